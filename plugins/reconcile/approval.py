"""Putting a plan to a human, in the shape of LangChain's human-in-the-loop (pure, but
:func:`interrupt_approval`).

The request is what LangChain's ``HumanInTheLoopMiddleware`` puts in an interrupt: an
``action_requests`` list (``name``, ``args``, ``description``) and a ``review_configs`` list
(``action_name``, ``allowed_decisions``); the answer is what it resumes with:
``{"decisions": [{"type": "approve"} | {"type": "reject", "message": ...}, ...]}``, one per
action request, in order. A reconciliation only offers ``approve`` and ``reject`` (an edited
compensation is a different one: declare it).

``approve=`` of ``u.reconcile`` is any callable from the request to the answer; shorter answers
are accepted too: ``True`` / ``False`` (all), or a list of booleans.
:func:`interrupt_approval` is the callable that asks through LangGraph's ``interrupt()``:
called inside a graph node or tool, the graph pauses with the request as the interrupt's value
and the node runs again with the human's decisions once resumed with ``Command(resume=...)``.
"""

from __future__ import annotations

from typing import Any

from .errors import InvalidDecision
from .plan import ReconcileItem

__all__ = ["approval_request", "decisions", "interrupt_approval"]

DECISIONS = ["approve", "reject"]


def approval_request(event_id: str, items: list[ReconcileItem]) -> dict[str, Any]:
    """The human-in-the-loop request for ``items`` (the plan's items that would run)."""
    actions, reviews = [], []
    for item in items:
        if item.action == "compensate":
            what = (f"compensate {item.tool} with {item.compensator}: the original run fired it, the "
                    f"counterfactual of forget {event_id} did not")
        else:
            what = f"run {item.tool}: the counterfactual of forget {event_id} wants it and it never ran"
        actions.append({"name": item.runs, "args": dict(item.args), "description": what, "id": item.key})
        reviews.append({"action_name": item.runs, "allowed_decisions": list(DECISIONS)})
    return {"action_requests": actions, "review_configs": reviews, "reconcile": event_id}


def decisions(answer: Any, items: list[ReconcileItem]) -> dict[str, bool]:
    """Which items were approved (key -> True), from an approval's answer (module docstring).
    :class:`InvalidDecision` for anything else (then nothing runs)."""
    if answer is None or isinstance(answer, bool):
        return {i.key: bool(answer) for i in items}
    if isinstance(answer, dict):
        answer = answer.get("decisions")
    if not isinstance(answer, (list, tuple)) or len(answer) != len(items):
        raise InvalidDecision(f"an approval must answer one decision per action request ({len(items)}), as "
                              "{'decisions': [{'type': 'approve'|'reject'}, ...]}, a list of booleans, or True/False")
    out = {}
    for item, d in zip(items, answer):
        kind = d if isinstance(d, bool) else (d.get("type") if isinstance(d, dict) else None)
        if kind not in (True, False, *DECISIONS):
            raise InvalidDecision(f"decision {d!r} for {item.runs}: only approve or reject is allowed")
        out[item.key] = kind is True or kind == "approve"
    return out


def interrupt_approval(request: dict[str, Any]) -> Any:
    """Ask through LangGraph's ``interrupt()`` (inside a graph node or tool): the graph pauses with
    ``request`` and this returns the value it is resumed with."""
    from langgraph.types import interrupt

    return interrupt(request)
