"""Reconcile plugin: bring the world to a forget's counterfactual, exactly once.

A forget rebuilds the agent's state; the world outside it still holds what the original run did.
From the forget's report, a plan (``plan``): compensate each orphaned side effect whose tool
declares a compensator, report those without one (what a human must undo), run each deferred call
(with a decision). The reconciler (``reconciler``) runs approved items through the call ledger
under keys made of the forget event and the call, so nothing runs twice across processes and
machines, a crash rolls forward or is reported in doubt, and a failure stays visible until
retried. Approval takes LangChain's human-in-the-loop shape (``approval``); each run is an
``execute_tool`` span in the forget's trace (``trace``); the tools and compensators come from the
agent (``catalog``). What it needs from its surroundings is ``reconciler.ReconcileContext``.

Public names are imported lazily; other plugins and the facade use only these.
"""

from __future__ import annotations

from unsee.plugins import lazy_exports

_EXPORTS = {
    "Reconciler": ".reconciler",
    "ReconcileContext": ".reconciler",
    "ReconcileOutcome": ".reconciler",
    "RUNS": ".reconciler",
    "tools_for": ".reconciler",
    "ReconcilePlan": ".plan",
    "ReconcileItem": ".plan",
    "build_plan": ".plan",
    "item_key": ".plan",
    "approval_request": ".approval",
    "decisions": ".approval",
    "interrupt_approval": ".approval",
    "reconcile_spans": ".trace",
    "agent_tools": ".catalog",
    "ReconcileError": ".errors",
    "UnknownReconciliation": ".errors",
    "PlanAlreadyRun": ".errors",
    "CompensatorUnavailable": ".errors",
    "CompensationFailed": ".errors",
    "NeedsAsync": ".errors",
    "InvalidDecision": ".errors",
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
