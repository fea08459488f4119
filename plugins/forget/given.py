"""What a replay gives the graph: each recorded run's input again, in order, without the target.

A session's record holds, for each graph run, the input LangGraph got (a
``run_input`` artifact: a state update's keys, or a ``Command`` with a resume
value, an update, a goto) and the user inputs its messages refer to.
``runs_to_give`` turns a plan into the runs a replay gives, each its input
rebuilt (``revive``) and sanitized where it holds the target; a session
recorded before run inputs were gets ``{"messages": [...]}`` per turn, as
before. Messages that entered a turn's state outside its input (an
``update_state`` between runs) were recorded with the turn's run: they are
given with its input, where they stood.

A human's decision at an interrupt is an observation, and it answered one
question: ``question_matches`` compares the question the counterfactual asks
now (the interrupts its graph waits at) with the one the decision answered
(recorded with it). A decision is given again only to the same question; where
the counterfactual asks another one, the replay stops there (``awaiting_human``
on the report), and where it asks none, the decision is not given (no one was
asked in the counterfactual).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import HumanMessage

from unsee.middleware.run_inputs import is_ref, json_value, revive

from .plan import RecordedInput, RecordedRun, ReplayPlan
from .sanitize import sanitize, sanitize_value


@dataclass(frozen=True)
class RunToGive:
    """One run a replay gives: its turn, its recorded input (None: a turn recorded before run
    inputs were), and the recorded user inputs it gives."""

    turn: int
    run: RecordedRun | None
    inputs: tuple[RecordedInput, ...]

    @property
    def resumes(self) -> bool:
        return self.run is not None and self.run.resumes

    @property
    def artifact_ids(self) -> tuple[str, ...]:
        """The recorded inputs (user inputs and the run input) this run gives again."""
        own = (self.run.artifact_id,) if self.run is not None else ()
        return own + tuple(i.artifact_id for i in self.inputs)


def runs_to_give(plan: ReplayPlan) -> list[RunToGive]:
    """The plan's runs, in the order they were given (module docstring)."""
    out: list[RunToGive] = []
    for turn in plan.turns:
        inputs = plan.inputs.get(turn, ())
        runs = [r for r in plan.runs if r.turn == turn]
        if not runs:
            if inputs:
                out.append(RunToGive(turn, None, tuple(inputs)))
            continue
        by_id = {i.artifact_id: i for i in inputs}
        referred = {ref for r in runs for ref in r.message_refs()}
        extra = tuple(i for i in inputs if i.artifact_id not in referred)  # (state updates between runs)
        for n, r in enumerate(runs):
            own = tuple(by_id[ref] for ref in r.message_refs() if ref in by_id)
            out.append(RunToGive(turn, r, (extra + own) if n == 0 else own))
    return out


def _message(i: RecordedInput, plan: ReplayPlan, target: str) -> HumanMessage:
    if plan.sanitizes(i.artifact_id):
        return HumanMessage(content=sanitize(i.text, target))  # (a new id: the recorded one held the target)
    return HumanMessage(content=i.text, id=i.message_id)


def value_of(give: RunToGive, plan: ReplayPlan, target: str) -> Any:
    """The input to give the graph for ``give``: its recorded input rebuilt, the target removed
    from the messages that held it and, from the target's entry on, from every other value."""
    messages = {i.artifact_id: _message(i, plan, target) for i in plan.inputs.get(give.turn, ())}
    if give.run is None:
        return {"messages": [messages[i.artifact_id] for i in give.inputs]}
    referred = set(give.run.message_refs())
    extra = [messages[i.artifact_id] for i in give.inputs if i.artifact_id not in referred]
    payload = give.run.payload
    if give.run.seq >= plan.entry.seq:  # (message references are names: a target in one is not in the message)
        payload = sanitize_value(payload, target, keep=is_ref)

    def message_of(aid: str) -> Any:
        if aid in messages:
            return messages[aid]
        return _MISSING  # (recorded earlier and already in the state with its id: nothing to give)

    kind = payload.get("kind")
    if kind == "none":
        return {"messages": extra} if extra else None
    if kind == "command":
        from langgraph.types import Command

        update = _drop_missing(revive(payload["update"], message_of)) if "update" in payload else None
        if extra:
            update = dict(update or {})
            update["messages"] = [*extra, *(update.get("messages") or [])]
        goto = revive(payload.get("goto"), message_of) if "goto" in payload else ()
        return Command(resume=revive(payload["resume"], message_of) if "resume" in payload else None,
                       update=update, goto=goto or (), graph=payload.get("graph"))
    if "keys" in payload:
        keys = _drop_missing(revive(payload["keys"], message_of))
        if extra:
            keys["messages"] = [*extra, *(keys.get("messages") or [])]
        return keys
    return revive(payload.get("value"), message_of)


class _Missing:
    pass


_MISSING = _Missing()


def _drop_missing(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_missing(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_drop_missing(v) for v in value if v is not _MISSING]
    return value


# -- a human's decision ------------------------------------------------------------------------
def questions(interrupts: Any) -> list[Any]:
    """Interrupts (LangGraph's ``Interrupt``s, or recorded ``{"id", "value"}``) as comparable
    JSON values, in order."""
    out = []
    for i in interrupts or ():
        value = i.get("value") if isinstance(i, dict) else getattr(i, "value", None)
        out.append(json.loads(json.dumps(json_value(value), sort_keys=True, default=str)))
    return out


def question_matches(pending: Any, give: RunToGive, plan: ReplayPlan, target: str) -> bool:
    """Whether the counterfactual waits at the very question the recorded decision answered (the
    same interrupts, values compared whole: for a human-in-the-loop approval, the same tool
    names and arguments); False when the record does not say what it answered."""
    answered = give.run.payload.get("answers") if give.run is not None else None
    if answered is None:
        return False
    if give.run.seq >= plan.entry.seq:
        answered = sanitize_value(answered, target)
    return questions(pending) == questions(answered)


def resume_for(resume: Any, pending: Any, give: RunToGive) -> Any:
    """The recorded resume value, its interrupt ids (a resume given by id) mapped to the ids of
    the interrupts the counterfactual waits at, in order."""
    answered = (give.run.payload.get("answers") if give.run is not None else None) or []
    ids = [a.get("id") for a in answered]
    if isinstance(resume, dict) and resume and all(k in ids for k in resume):
        now = [getattr(i, "id", None) for i in pending]
        return {now[ids.index(k)]: v for k, v in resume.items()}
    return resume


def asked(pending: Any) -> list[Any]:
    """What the counterfactual asks (its pending interrupts' values), as the report shows it."""
    return questions(pending)
