"""A reconciliation plan: what the world needs after a forget (pure; no I/O).

A forget's report says where the world and the counterfactual differ: **orphaned** side effects
(fired by the original run, not made by the counterfactual) and **deferred** ones (wanted by the
counterfactual, never executed). The plan turns each into one item:

============  =========================================================  ==================
item          from                                                       what reconcile does
============  =========================================================  ==================
compensate    an orphaned call whose tool declares a compensator         runs the compensator
report        an orphaned call whose tool declares none                  nothing: says what a
                                                                         human must undo
run           a deferred call                                            runs the tool
============  =========================================================  ==================

Each item has a key derived from the forget event and the call it acts on (the orphaned call's
artifact id; a deferred call's place among the deferred calls, its tool and arguments): the call
ledger row that runs it is keyed by it, so it runs at most once whoever reconciles, wherever.

A plan carries no target text: the arguments and results are the report's, without the target
(removed from arguments, replaced by its keyed hash mark in results).
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone
from typing import Any, Callable, Literal, Mapping

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Action", "ItemState", "ReconcileItem", "ReconcilePlan", "build_plan", "item_key", "state_of"]

Action = Literal["compensate", "run", "report"]
#: ``planned``: not started; ``started``: claimed by a reconcile (running now, or in doubt if
#: the process running it died); ``done``: compensated / ran; ``failed``: the compensator or tool
#: raised (a retry is a decision: ``retry=True``); ``left``: nothing can run (no compensator)
ItemState = Literal["planned", "started", "done", "failed", "left"]

#: the ledger statuses each state reads from (``Ledger`` rows; None: no row yet)
_STATES: dict[str | None, ItemState] = {
    None: "planned", "pending": "planned", "released": "planned",
    "fired": "started", "compensating": "started",
    "done": "done", "compensated": "done",
    "failed": "failed", "compensation_failed": "failed",
}


def state_of(action: Action, status: str | None) -> ItemState:
    """An item's state from its ledger row's status (``report`` items are always ``left``)."""
    return "left" if action == "report" else _STATES.get(status, "planned")


class ReconcileItem(BaseModel):
    """One thing the world needs after a forget (the module docstring's table)."""

    model_config = ConfigDict(frozen=True)

    key: str
    action: Action
    #: the call's tool (the orphaned call's, or the deferred call's)
    tool: str
    #: the call's arguments as the forget's report shows them (the target masked)
    args: dict[str, Any] = Field(default_factory=dict)
    #: what the orphaned call returned, as the agent saw it (the target masked); None for ``run``
    result: str | None = None
    #: the orphaned call's artifact (in the world the forget replaced: ``unsee view --event``)
    call_artifact_id: str | None = None
    #: the compensator's name (``compensate``)
    compensator: str | None = None
    #: running it again after a crash does nothing more (the compensator, or the deferred tool)
    idempotent: bool = False
    #: ``report``: what a human must do, in words
    why: str | None = None
    state: ItemState = "planned"
    #: what the compensator or tool returned (the target masked), or why it failed
    outcome: str | None = None

    @property
    def actionable(self) -> bool:
        return self.action != "report"

    @property
    def runs(self) -> str:
        """What running it calls: the compensator, or the deferred tool."""
        return self.compensator if self.action == "compensate" and self.compensator else self.tool


class ReconcilePlan(BaseModel):
    """A forget's reconciliation plan (JSON; kept in the call ledger, one per event)."""

    model_config = ConfigDict(frozen=True)

    version: int = 1
    event_id: str
    session_id: str
    target_hash: str
    created_at: datetime = Field(default_factory=lambda: datetime.now(timezone.utc))
    items: list[ReconcileItem] = Field(default_factory=list)
    #: the forget's root span (``trace_id``, ``span_id`` as hex): its reconciliation's spans are
    #: its children; None when the forget was not traced
    forget_span: tuple[str, str] | None = None
    #: the target's length in characters (with ``target_hash``, what finds it in what a
    #: compensator returns: ``masking``); 0: unknown (nothing is searched)
    target_length: int = 0
    #: each item's state as the receipt and the view record last said it (key -> state): a
    #: reconcile that finds them behind the ledger (a process died between the two) brings them
    #: up to date
    recorded: dict[str, str] = Field(default_factory=dict)

    def by_action(self, action: Action) -> list[ReconcileItem]:
        return [i for i in self.items if i.action == action]

    @property
    def pending(self) -> list[ReconcileItem]:
        """The items a reconcile could still run (planned, or failed: a retry)."""
        return [i for i in self.items if i.actionable and i.state in ("planned", "failed")]

    def with_states(self, states: Mapping[str, tuple[ItemState, str | None]]) -> "ReconcilePlan":
        """The plan with each item's state and outcome as ``states`` (key -> (state, outcome)) says."""
        items = [i.model_copy(update={"state": states[i.key][0], "outcome": states[i.key][1]})
                 if i.key in states else i for i in self.items]
        return self.model_copy(update={"items": items})

    def summary(self) -> dict[str, int]:
        """How many items are in each state, by action (``compensate.done`` ...)."""
        out: dict[str, int] = {}
        for i in self.items:
            k = f"{i.action}.{i.state}"
            out[k] = out.get(k, 0) + 1
        return out


def item_key(event_id: str, action: Action, ident: Any) -> str:
    """The key of the item that does ``action`` about ``ident`` for the forget ``event_id``."""
    blob = json.dumps([event_id, action, ident], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "rec-" + hashlib.sha256(blob.encode("utf-8")).hexdigest()[:32]


def _human(tool: str, args: dict[str, Any]) -> str:
    shown = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in sorted(args.items()))
    return (f"{tool}({shown}) fired in the original run and its tool declares no compensator: undo it by hand "
            f"(or declare compensate= on {tool} and plan again for later forgets)")


def build_plan(report: Any, compensators: Mapping[str, Any], idempotent: Callable[[str], bool],
               earlier_runs: Mapping[tuple[str, str], list[str]] | None = None,
               target_length: int = 0) -> ReconcilePlan:
    """The plan of a forget from its report (``ForgetReport``): ``compensators`` maps a tool name to
    its compensator (a ``Compensator``: a ``str``, its name; ``.idempotent``), ``idempotent(tool)``
    says whether a deferred tool may run again after a crash. ``earlier_runs``: the keys of the
    deferred calls earlier reconciliations of the session ran, by (tool, canonical JSON of the
    arguments): a deferred call the counterfactual wants again takes an earlier one's key, so the
    call it already made is never made twice."""
    event = report.event_id
    items: list[ReconcileItem] = []
    for effect in report.orphaned_side_effects:
        ident = effect.call_artifact_id or [effect.tool, effect.args]
        comp = compensators.get(effect.tool)
        if comp is not None:
            items.append(ReconcileItem(key=item_key(event, "compensate", ident), action="compensate", tool=effect.tool,
                                       args=dict(effect.args), result=effect.result,
                                       call_artifact_id=effect.call_artifact_id, compensator=str(comp),
                                       idempotent=bool(getattr(comp, "idempotent", False))))
        else:
            items.append(ReconcileItem(key=item_key(event, "report", ident), action="report", tool=effect.tool,
                                       args=dict(effect.args), result=effect.result,
                                       call_artifact_id=effect.call_artifact_id, state="left",
                                       why=_human(effect.tool, dict(effect.args))))
    unused = {k: list(v) for k, v in (earlier_runs or {}).items()}
    for n, effect in enumerate(report.deferred_side_effects):
        made = unused.get((effect.tool, args_text(effect.args)))
        key = made.pop(0) if made else item_key(event, "run", [n, effect.tool, effect.args])
        items.append(ReconcileItem(key=key, action="run", tool=effect.tool, args=dict(effect.args),
                                   idempotent=idempotent(effect.tool)))
    return ReconcilePlan(event_id=event, session_id=report.session_id, target_hash=report.target_hash, items=items,
                         target_length=target_length)


def args_text(args: Any) -> str:
    """The arguments of a call as one text (sorted keys): how two calls' arguments are compared."""
    return json.dumps(args, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
