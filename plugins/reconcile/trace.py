"""A reconciliation's spans (pure layout; ``emit`` sends them): one ``execute_tool`` span per
compensator or deferred tool a reconcile ran, a child of the forget's own root span
(``invoke_workflow unsee.forget``) when the plan knows it, so the reconciliation reads as part
of the forget's trace in Jaeger or Phoenix; otherwise under a root of its own
(``invoke_workflow unsee.reconcile``).

GenAI semantic conventions: ``gen_ai.operation.name = execute_tool``, ``gen_ai.tool.name`` (the
compensator or tool that ran), ``gen_ai.tool.call.id`` (the item's key), ``gen_ai.tool.type =
function``, ``gen_ai.conversation.id`` (the session). unsee's own attributes say what the call
reconciled (``unsee.reconcile.*``). No arguments, no results: nothing that could carry the target.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from unsee.middleware.semconv import (
    GEN_AI_CONVERSATION_ID, GEN_AI_OPERATION, GEN_AI_TOOL_CALL_ID, GEN_AI_TOOL_NAME, GEN_AI_TOOL_TYPE, OP_EXECUTE_TOOL,
)
from unsee.middleware.trace_after import SpanSpec

__all__ = ["Ran", "reconcile_spans", "WORKFLOW", "ATTR"]

WORKFLOW = "unsee.reconcile"
ATTR = {
    "event": "unsee.revocation.event_id",
    "action": "unsee.reconcile.action",
    "of_call": "unsee.reconcile.of_call",
    "of_tool": "unsee.reconcile.of_tool",
    "state": "unsee.reconcile.state",
    "disposition": "unsee.reconcile.disposition",
}


@dataclass(frozen=True)
class Ran:
    """One item a reconcile took to the ledger: what ran, when, and how it ended
    (``disposition``: the ledger's ``fired`` / ``replayed`` / ``in_doubt`` / ``failed``)."""

    item: Any
    start_ns: int
    end_ns: int
    disposition: str
    state: str
    error: str | None = None


def _span_context(forget_span: tuple[str, str] | None) -> Any:
    if not forget_span:
        return None
    from opentelemetry.trace import SpanContext, TraceFlags

    trace_id, span_id = forget_span
    return SpanContext(int(trace_id, 16), int(span_id, 16), is_remote=True, trace_flags=TraceFlags(1))


def reconcile_spans(plan: Any, ran: list[Ran]) -> list[SpanSpec]:
    """The spans of one reconcile of ``plan`` (a ``ReconcilePlan``): an ``execute_tool`` span per
    item in ``ran``, children of the forget's root span, or of a root of their own."""
    if not ran:
        return []
    conv = {GEN_AI_CONVERSATION_ID: plan.session_id}
    parent_ctx = _span_context(plan.forget_span)
    specs: list[SpanSpec] = []
    parent: int | None = None
    if parent_ctx is None:
        specs.append(SpanSpec(f"invoke_workflow {WORKFLOW}", min(r.start_ns for r in ran), max(r.end_ns for r in ran),
                              {GEN_AI_OPERATION: "invoke_workflow", "gen_ai.workflow.name": WORKFLOW, **conv,
                               ATTR["event"]: plan.event_id}))
        parent = 0
    for r in ran:
        item = r.item
        attrs: dict[str, Any] = {GEN_AI_OPERATION: OP_EXECUTE_TOOL, GEN_AI_TOOL_NAME: item.runs,
                                 GEN_AI_TOOL_CALL_ID: item.key, GEN_AI_TOOL_TYPE: "function", **conv,
                                 ATTR["event"]: plan.event_id, ATTR["action"]: item.action,
                                 ATTR["of_tool"]: item.tool, ATTR["state"]: r.state,
                                 ATTR["disposition"]: r.disposition}
        if item.call_artifact_id:
            attrs[ATTR["of_call"]] = item.call_artifact_id
        specs.append(SpanSpec(f"{OP_EXECUTE_TOOL} {item.runs}", r.start_ns, r.end_ns, attrs, parent=parent,
                              parent_context=parent_ctx if parent is None else None, error=r.error))
    return specs
