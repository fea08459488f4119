"""How a replay answers one tool call (pure: no LangChain, no state).

``decide(call, record, policy)`` takes the call as the counterfactual run
makes it (tool name, arguments, declared effect), its recorded counterpart
(the call at the same place of the recorded transcript, or None once the run
diverged), and the side-effect policy; ``identical`` lists recorded calls
elsewhere in the suffix with the same tool and arguments that no call has
matched yet (candidates for de-duplication of an external call). Rules:

- ``read``: answered with the recorded return when the recorded call ran and
  did not fail; otherwise executed (against the restored environment);
- ``write``: executed again (against the restored environment and store);
- ``external`` or undeclared: never fired twice. A recorded counterpart that
  fired (or an identical fired call) answers it (``deduplicated``); a new call
  is executed only under ``execute``, else deferred or, under ``ask``,
  awaiting approval.

A recorded call that never ran (an IFC block, a deferral) or that returned an
error does not answer anything: the counterfactual may now meet the
precondition the original lacked, so it counts as a new call.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from unsee.sandbox.errors import ArgumentsNotCanonical
from unsee.sandbox.ledger import canonical_json

from .plan import RecordedCall

SideEffectPolicy = Literal["defer", "execute", "ask"]
SIDE_EFFECT_POLICIES: tuple[str, ...] = ("defer", "execute", "ask")


def same_args(a: Any, b: Any) -> bool:
    """Equal arguments, compared as canonical JSON (the call ledger's)."""
    try:
        return canonical_json(a) == canonical_json(b)
    except ArgumentsNotCanonical:
        return a == b


@dataclass(frozen=True)
class ToolCall:
    """A tool call as the counterfactual run makes it."""

    name: str
    args: Any
    call_id: str | None = None
    #: the tool's declared effect: "read" | "write" | "external" | None (undeclared)
    effect: str | None = None


class Action(enum.Enum):
    RECORD = "record"                       # answer with the recorded return (no tool runs)
    EXECUTE = "execute"                     # run the tool (read/write, in the restored environment)
    EXECUTE_EXTERNAL = "execute_external"   # run a new external call (policy "execute")
    DEFER = "deferred"                      # do not run; tell the model it was not executed


@dataclass(frozen=True)
class Decision:
    action: Action
    #: the recorded call whose return answers (RECORD only)
    record: RecordedCall | None = None
    #: what to report: "deduplicated" (an external call answered from the record),
    #: "deferred" | "awaiting_approval" (DEFER); None otherwise
    status: Literal["deduplicated", "deferred", "awaiting_approval"] | None = None


def decide(call: ToolCall, record: RecordedCall | None, policy: SideEffectPolicy = "defer",
           identical: Sequence[RecordedCall] = ()) -> Decision:
    """How to answer ``call`` during a replay (see the module's docstring)."""
    if record is not None and not record.reusable:
        record = None  # never ran, or failed: nothing to reuse or de-duplicate
    if call.effect == "read":
        if record is not None and record.return_content is not None:
            return Decision(Action.RECORD, record)
        return Decision(Action.EXECUTE)
    if call.effect == "write":
        return Decision(Action.EXECUTE)
    # external or undeclared: never fire during replay what already fired
    if record is None:
        record = next((c for c in identical if c.reusable and c.name == call.name
                       and same_args(c.args, call.args)), None)
    if record is not None:
        return Decision(Action.RECORD, record, "deduplicated")
    if policy == "execute":
        return Decision(Action.EXECUTE_EXTERNAL)
    return Decision(Action.DEFER, status="awaiting_approval" if policy == "ask" else "deferred")
