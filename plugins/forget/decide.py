"""How a replay answers one tool call (pure: no LangChain, no state).

``decide(call, record, policy)`` takes the call as the counterfactual run
makes it (tool name, arguments, declared effect), its recorded counterpart
(the call at the same place of the recorded transcript, or None once the run
diverged), and the side-effect policy; ``identical`` lists recorded calls
elsewhere in the suffix with the same tool and arguments that no call has
matched yet (candidates for de-duplication of an external call). Rules:

- ``write``: executed again (against the restored environment and store);
- ``state`` (the tool updates the agent's graph state: it returned a
  ``Command``, or a middleware or harness of the agent adds it; also an
  undeclared tool whose recorded counterpart returned a ``Command``):
  executed again, so its update happens in the counterfactual run as it did
  in the original one;
- a recorded counterpart observed before the target's entry (the clean
  prefix) answers the call verbatim, whatever it was (an error, a call that
  never ran included): the counterfactual made this very call and saw this
  very observation. After the entry, a counterpart that ran and failed
  answers it verbatim too: while the run follows the record, the call, its
  arguments and the environment it meets are the original's, so it fails
  the same way (running it again could succeed where B5 fails, or fire an
  external effect twice);
- ``read``: answered with the recorded return when the recorded call ran and
  did not fail; otherwise executed (against the restored environment);
- a call to a tool that agents ran nested in (a subagent the tool invokes, as
  the record shows): executed again, whatever its effect and arguments; the
  nested agent's own calls follow these rules;
- ``external`` or undeclared: never fired twice. A recorded counterpart that
  fired (or an identical fired call) answers it (``deduplicated``); a new call
  is executed only under ``execute``, else deferred or, under ``ask``,
  awaiting approval.

After the entry, a recorded call that never ran (an IFC block, a deferral; its
reason may have come from the target), and a failed one elsewhere than at
this place, do not answer anything: the counterfactual may now meet the
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
    #: the tool's effect (declared or inferred: ``middleware.tools.effect_of``): "read" | "write" |
    #: "external" | "state" | None (undeclared, treated as external)
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
           identical: Sequence[RecordedCall] = (), *, hosts_runs: bool = False) -> Decision:
    """How to answer ``call`` during a replay (see the module's docstring). ``hosts_runs``: the
    record shows agents run nested in calls of this tool (``ReplayPlan.run_hosts``)."""
    if hosts_runs or (record is not None and record.hosts_run) or any(c.hosts_run for c in identical):
        # an agent ran nested in the call: its own calls are matched to their records (and
        # de-duplicated) as the tool runs again, and its result is the counterfactual's
        return Decision(Action.EXECUTE)
    effect = call.effect
    if effect is None and record is not None and record.command:
        effect = "state"  # (undeclared, but the original call returned a Command)
    if effect in ("write", "state"):
        return Decision(Action.EXECUTE)
    if record is not None and record.return_id is not None and record.return_content is not None and (
            record.prefix or (record.fired and record.return_status == "error")):
        # The clean prefix, or a failure at the same place: the observation this very call
        # gets, never merged with a later identical call, never executed again.
        return Decision(Action.RECORD, record, "deduplicated" if effect != "read" and record.fired else None)
    if record is not None and not record.reusable:
        record = None  # never ran, or failed: nothing to reuse or de-duplicate
    if effect == "read":
        if record is not None and record.return_content is not None:
            return Decision(Action.RECORD, record)
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
