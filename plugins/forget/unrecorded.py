"""A session whose records stop short of its agent's state (a run's process died before the
run's records were written: ``SessionInfo.run_died``).

The store marks such a session when it finds the dead run's lease; the forget then compares
the agent's LangGraph state with the records. Nothing missing: the mark goes. Messages
missing: only B5 goes on, its user inputs completed from the state (``with_inputs_from_state``);
every other strategy raises ``RecordsBehind``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage

from unsee.middleware.messages import text_of

from .plan import RecordedInput, ReplayPlan
from .thread import artifact_of, thread_cfg


def unrecorded_messages(agent: Any, session: str, recorded: Any) -> list[BaseMessage]:
    """The messages of ``session``'s LangGraph state whose artifact ``recorded`` (a graph, or
    any container of artifact ids) does not hold, in state order."""
    snap = agent.get_state(thread_cfg(session))
    values = (snap.values if snap is not None else None) or {}
    msgs = values.get("messages", [])
    return [m for m in msgs if (aid := artifact_of(session, m)) and aid not in recorded]


def with_inputs_from_state(plan: ReplayPlan, session: str, missing: list[BaseMessage]) -> ReplayPlan:
    """``plan`` (a replay from the empty state) with the user inputs the records lack, each a
    turn of its own after the recorded ones (an agent's ``invoke`` takes one input a turn)."""
    humans = [m for m in missing if isinstance(m, HumanMessage)]
    if not humans:
        return plan
    last = max(plan.turns, default=0)
    inputs = dict(plan.inputs)
    turns = list(plan.turns)
    for n, m in enumerate(humans, start=1):
        turn = last + n
        inputs[turn] = (RecordedInput(artifact_of(session, m), m.id, text_of(m), turn),)
        turns.append(turn)
    return replace(plan, inputs=inputs, turns=tuple(turns))
