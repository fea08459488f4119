"""The facade's reconciliation: the reconcile plugin's ports over an ``Unsee``, and what follows each
committed forget by the home's default (``Unsee(reconcile="never"|"plan"|"compensate")``)."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

    from unsee.middleware.hashing import ContentHasher
    from unsee.middleware.recorder import Recorder
    from unsee.sandbox import Ledger

class Unsee(Protocol):
    """What the reconciliation's wiring reads from the facade (``unsee.core.Unsee`` is one). A
    protocol, not the class: core imports this module."""

    home: Path
    hasher: ContentHasher
    recorder: Recorder
    tracer_provider: TracerProvider
    #: ``never`` | ``plan`` | ``compensate``
    reconcile_default: str
    #: the tools ``Unsee.tool`` made, by name
    made_tools: dict[str, Any]

    @property
    def ledger(self) -> Ledger: ...

    def existing_ledger(self) -> Ledger | None: ...

    @property
    def reconciler(self) -> Any: ...

    def _shared_db(self) -> Any: ...


#: what follows a committed forget: nothing, its plan kept (nothing runs without a decision), or its
#: plan kept and its compensations run (deferred calls still wait for a decision)
RECONCILE_DEFAULTS = ("never", "plan", "compensate")


def reconcile_context(u: Unsee) -> Any:
    """The reconcile plugin's ports over ``u``: its ledger, the tools it knows for a session, its
    forget tracer, its receipts and its view records."""
    from unsee.plugins.reconcile import ReconcileContext, tools_for

    from .config import version

    def tools(session: str, agent: Any) -> dict[str, Any]:
        return tools_for(agent or u.recorder.agents.for_session(session), u.made_tools)

    def ledger(create: bool) -> Any:
        return u.ledger if create else u.existing_ledger()  # (reading a plan never makes a ledger)

    return ReconcileContext(ledger=ledger, tools=tools, keyed_hash=u.hasher.hash,
                            tracer=lambda: u.tracer_provider.get_tracer("unsee.forget", version()),
                            amend_receipt=lambda event_id, items: _amend_receipt(u, event_id, items),
                            keep_record=lambda event_id, items: _keep_record(u, event_id, items))


def receipt_facts(items: list[Any]) -> Any:
    """The receipt's reconciliation section from the plan's items (names, ids and states only)."""
    from unsee.plugins.erasure import ReconciledItem, ReconciliationFacts

    def why(item: Any) -> str | None:
        if item.action == "report":
            return "no compensator declared: undo it by hand"
        if item.state == "failed" and item.outcome:
            return str(item.outcome).split(":", 1)[0]  # (the error's type: its message may say anything)
        return None

    return ReconciliationFacts(as_of=datetime.now(timezone.utc), items=[
        ReconciledItem(key=i.key, action=i.action, tool=i.tool, runs=i.runs if i.actionable else None,
                       call_artifact_id=i.call_artifact_id, state=i.state, why=why(i)) for i in items])


def _amend_receipt(u: Unsee, event_id: str, items: list[Any]) -> str | None:
    from unsee.plugins.erasure import amend_receipt, receipt_path

    receipt = amend_receipt(u.home, u._shared_db(), event_id, reconciliation=receipt_facts(items))
    return None if receipt is None else str(receipt_path(u.home, event_id))


def _keep_record(u: Unsee, event_id: str, items: list[Any]) -> None:
    from unsee.plugins.view import ForgetRecordKeeper

    ForgetRecordKeeper(u.home).keep_reconciliation(event_id, [
        {"key": i.key, "action": i.action, "tool": i.tool, "runs": i.runs if i.actionable else None,
         "call_artifact_id": i.call_artifact_id, "state": i.state} for i in items])


class ReconcileAfterForget:
    """``AfterForget`` (the forget plugin's port) by the home's default: keep the plan, then with
    ``"compensate"`` run its compensations. Its outcome goes on the report (``reconciliation``;
    a compensation that failed or could not run: a note)."""

    def __init__(self, u: Unsee):
        self.u = u

    def after_forget(self, report: Any, agent: Any, span_context: Any, event: Any) -> Any:
        mode = self.u.reconcile_default
        if mode == "never":
            return report
        from unsee.plugins.forget import replay_loop
        from unsee.plugins.reconcile import CompensationFailed, ReconcileError

        rec = self.u.reconciler
        plan = rec.keep(report, agent, target_length=len(getattr(event, "target", "") or ""))
        rec.note_span(report.event_id, span_context)
        notes = list(report.notes)
        ran = False
        if mode == "compensate" and any(i.action == "compensate" and i.state == "planned" for i in plan.items):
            try:
                plan = rec.run(report.event_id, "compensate", agent=agent, loop=replay_loop.get()).plan
                ran = True
            except CompensationFailed as e:
                plan, ran = e.outcome.plan, True
                notes.append(f"reconcile: {e}")
            except ReconcileError as e:  # (nothing ran: the plan waits for a reconcile that can)
                notes.append(f"reconcile: the compensations did not run: {e}")
        if plan.items and not ran:  # (a run brings them up to date itself) the receipt states what is owed
            _, errors = rec.bookkeep(plan)
            notes.extend(f"reconcile: could not update the {e}" for e in errors)
        return report.model_copy(update={"reconciliation": plan, "notes": notes})
