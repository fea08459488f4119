"""The observation stream is every input the graph received: run inputs and human approvals.

A real ``create_agent`` with ``HumanInTheLoopMiddleware(interrupt_on={"refund": True})``:
the secret enters through a tool result before a human approves, edits or
rejects a refund. The forget gives every recorded input again as LangGraph got
it (the human's decision included, to the same question only) and equals B5
computed independently (the same agent run from scratch in a world without the
secret, resumed with the same decisions); the refund fires once in all. Where
the counterfactual asks another question, the session is left waiting at it
(``awaiting_human``). A state update with keys of its own, and a
``Command(update=...)`` between runs, are given again too.
"""

from __future__ import annotations

import json
from typing import NotRequired

import pytest
from langchain.agents import AgentState
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from tests.support.agent_shapes import (SECRET, World, card_policy, give, hitl_agent, normalized, pending_questions,
                          sqlite_saver)
from unsee import RevocationEvent, Unsee
from unsee.middleware.records import ArtifactType

CFG = {"configurable": {"thread_id": "s"}}

DECISIONS = {
    "approve": ({"type": "approve"}, ["A7"]),
    "edit": ({"type": "edit", "edited_action": {"name": "refund", "args": {"order": "A8"}}}, ["A8"]),
    "reject": ({"type": "reject", "message": "not this order"}, []),
}


def _saver(kind, tmp_path, name):
    return InMemorySaver() if kind == "memory" else sqlite_saver(tmp_path / f"{name}.sqlite")


def _reference(steps, tmp_path, kind="memory", **kw):
    """B5, independently: the same agent, no unsee, a world without the secret, the same inputs."""
    world = World(secret=None)
    app = hitl_agent(world, checkpointer=_saver(kind, tmp_path, "ref"), **kw)
    give(app, "ref", steps)
    return normalized(app, "ref"), pending_questions(app, "ref"), world


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
@pytest.mark.parametrize("decision", sorted(DECISIONS))
def test_a_human_decision_is_given_again_to_the_same_question(tmp_path, decision, kind):
    answer, fired = DECISIONS[decision]
    steps = ["look at T1", "refund A7", answer, "thanks, bye"]
    u, world = Unsee(home=tmp_path / "h"), World()
    agent = hitl_agent(world, middleware=[u.middleware()], checkpointer=_saver(kind, tmp_path, "s"))
    give(agent, "s", steps)
    assert world.fired == fired and SECRET in json.dumps(normalized(agent, "s"))
    kinds = [json.loads(u.graph("s").content(a.id))["kind"] for a in u.graph("s") if a.type is ArtifactType.RUN_INPUT]
    assert kinds == ["input", "input", "command", "input"]

    report = u.forget("s", RevocationEvent(target=SECRET))
    assert report.committed and report.erased_clean is True and report.awaiting_human is None
    ref, asked, ref_world = _reference(steps, tmp_path, kind)
    assert normalized(agent, "s") == ref and asked == [] == pending_questions(agent, "s")
    assert world.fired == fired == ref_world.fired  # the refund fired once in all
    # the session's record holds the decision again: a second forget replays it once more
    again = u.forget("s", RevocationEvent(target="T1"))  # (from turn 1: the decision's run again)
    assert again.committed and again.awaiting_human is None and world.fired == fired
    assert "T1" not in json.dumps(normalized(agent, "s"))


def test_a_different_question_leaves_the_session_waiting_at_the_counterfactuals(tmp_path):
    # the refund's argument is the card found in the ticket: without it, the human is asked
    # about another action, which the recorded approval never answered
    steps = ["refund the card on T1", {"type": "approve"}, "thanks, bye"]
    u, world = Unsee(home=tmp_path / "h"), World()
    agent = hitl_agent(world, middleware=[u.middleware()], checkpointer=InMemorySaver(), policy=card_policy)
    give(agent, "s", steps)
    assert world.fired == [f"card-{SECRET}"]

    report = u.forget("s", RevocationEvent(target=SECRET))
    assert report.committed and report.erased_clean is True
    ref, asked, _ = _reference(steps[:1], tmp_path, policy=card_policy)  # B5 stops at the same question
    assert normalized(agent, "s") == ref
    assert pending_questions(agent, "s") == asked == report.awaiting_human
    assert asked[0]["action_requests"][0]["args"] == {"order": "card-none"}
    assert any("asks a question of its own" in n for n in report.notes)
    assert [o.tool for o in report.orphaned_side_effects] == ["refund"]
    assert world.fired == [f"card-{SECRET}"]  # never resumed with an answer given to another question
    # the question is the session's: a human's answer resumes it
    agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), CFG)
    assert world.fired == [f"card-{SECRET}", "card-none"]


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_a_session_waiting_at_an_approval_is_forgotten_up_to_the_same_pause(tmp_path, kind):
    steps = ["look at T1", "refund A7"]
    u, world = Unsee(home=tmp_path / "h"), World()
    agent = hitl_agent(world, middleware=[u.middleware()], checkpointer=_saver(kind, tmp_path, "s"))
    give(agent, "s", steps)
    question = pending_questions(agent, "s")
    assert question and world.fired == []

    report = u.forget("s", RevocationEvent(target=SECRET))
    assert report.committed and report.erased_clean is True
    ref, asked, _ = _reference(steps, tmp_path, kind)
    assert normalized(agent, "s") == ref and pending_questions(agent, "s") == asked == question
    assert report.awaiting_human == question
    give(agent, "s", [{"type": "approve"}, "thanks, bye"])  # the human answers after the forget
    ref_world = World(secret=None)
    b5 = hitl_agent(ref_world, checkpointer=InMemorySaver())
    give(b5, "ref", [*steps, {"type": "approve"}, "thanks, bye"])
    assert normalized(agent, "s") == normalized(b5, "ref") and world.fired == ["A7"] == ref_world.fired


class Ticketed(AgentState):
    priority: NotRequired[str]


def test_keys_of_a_state_update_and_a_command_update_are_given_again(tmp_path):
    steps = [{"messages": [HumanMessage("look at T1")], "priority": "high"},
             Command(update={"messages": [HumanMessage("look at T2")], "priority": "low"}),  # runs no node
             "bye"]
    u, world = Unsee(home=tmp_path / "h"), World()
    agent = hitl_agent(world, middleware=[u.middleware()], checkpointer=InMemorySaver(), state_schema=Ticketed)
    give(agent, "s", steps)
    assert agent.get_state(CFG).values["priority"] == "low"

    report = u.forget("s", RevocationEvent(target=SECRET))
    assert report.committed and report.erased_clean is True
    ref, _, _ = _reference(steps, tmp_path, state_schema=Ticketed)
    assert normalized(agent, "s") == ref
    assert json.loads(ref["priority"]) == "low"


class Noted(AgentState):
    note: NotRequired[str]


def test_the_target_entering_through_a_key_of_a_run_input_is_forgotten(tmp_path):
    steps = ["hello", {"messages": [HumanMessage("look at T2")], "note": f"card {SECRET} on file"}, "bye"]
    u, world = Unsee(home=tmp_path / "h"), World()
    agent = hitl_agent(world, middleware=[u.middleware()], checkpointer=InMemorySaver(), state_schema=Noted)
    give(agent, "s", steps)
    assert SECRET in agent.get_state(CFG).values["note"]

    report = u.forget("s", RevocationEvent(target=SECRET))
    assert report.committed and report.erased_clean is True
    clean = [steps[0], {"messages": [HumanMessage("look at T2")], "note": "card  on file"}, steps[2]]
    ref, _, _ = _reference(clean, tmp_path, state_schema=Noted)
    assert normalized(agent, "s") == ref


# -- the pure part ---------------------------------------------------------------------------
def test_a_decision_answers_only_the_question_it_was_recorded_with():
    from types import SimpleNamespace

    from unsee.plugins.forget.given import RunToGive, question_matches, resume_for
    from unsee.plugins.forget.plan import RecordedRun

    asked = {"action_requests": [{"name": "refund", "args": {"order": "A7"}}]}
    payload = {"kind": "command", "resume": {"i-old": {"decisions": [{"type": "approve"}]}},
               "answers": [{"id": "i-old", "value": asked}]}
    give_ = RunToGive(2, RecordedRun("run-1", 2, 9, payload), ())
    plan = SimpleNamespace(entry=SimpleNamespace(seq=1))
    now = [SimpleNamespace(id="i-new", value=asked)]
    assert question_matches(now, give_, plan, SECRET)
    other = [SimpleNamespace(id="i-new", value={"action_requests": [{"name": "refund", "args": {"order": "A8"}}]})]
    assert not question_matches(other, give_, plan, SECRET)
    # a resume given by interrupt id goes to the counterfactual's interrupt, in order
    assert resume_for(payload["resume"], now, give_) == {"i-new": {"decisions": [{"type": "approve"}]}}
    # a decision whose question the record does not hold (given in another process) answers nothing
    unknown = RunToGive(2, RecordedRun("run-2", 2, 9, {**payload, "answers": None}), ())
    assert not question_matches(now, unknown, plan, SECRET)
