"""Check first: a forget refuses, before anything changes, what its later steps could not do.

Each case is a real agent: async-only tools under a synchronous forget
(``NeedsAsync``; runs resumed after a human approval and a run waiting at an
interrupt are forgotten now: tests/forget/test_run_inputs.py), a model that returns a message id twice, a
target the clean prefix still holds. After every refusal the state, the
records and the side effects are as they were. (A deepagents subagent on the
same thread is no refusal: it is replayed as a part of its ``task`` call.) The pure part (``preflight.recorded_refusals``) is tested on hand-built
graphs.
"""

from __future__ import annotations

import json
import os

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import StructuredTool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from tests.support.agent_shapes import SECRET, HostedChatModel, World, normalized, reference, run, worker_policy
from unsee import RevocationEvent, Unsee
from unsee.middleware.graph import ProvenanceGraph
from unsee.middleware.records import Artifact, ArtifactType
from unsee.plugins.forget import AgentCannotReplay, NeedsAsync, NotDerived, TargetRemains, UnsupportedSession
from unsee.plugins.forget.plan import make_plan
from unsee.plugins.forget.preflight import async_only_tools, recorded_refusals
from unsee.plugins.model import ScriptedChatModel

CFG = {"configurable": {"thread_id": "s"}}


def _agent(u, world, *, middleware=(), tools=None, model=None):
    return create_agent(model or HostedChatModel(policy=worker_policy, role="a"),
                        tools if tools is not None else world.tools(),
                        middleware=[u.middleware(), *middleware], checkpointer=InMemorySaver())


def _snapshot(u, agent):
    return normalized(agent, "s"), [a.id for a in u.graph("s")]


def test_a_run_waiting_at_or_resumed_after_a_human_approval_is_forgotten(tmp_path):
    # (no refusal any more: the human's decision is a recorded input, given again to the same
    # question; tests/forget/test_run_inputs.py holds the cases)
    u, world = Unsee(home=tmp_path / "h"), World()
    agent = _agent(u, world, middleware=[HumanInTheLoopMiddleware({"refund": True})])
    run(agent, "s", ["look at T1"])
    agent.invoke({"messages": [HumanMessage("refund A7")]}, CFG)  # stops at the approval
    waiting = u.forget("s", RevocationEvent(target=SECRET))
    assert waiting.committed and waiting.awaiting_human and agent.get_state(CFG).interrupts
    agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), CFG)
    assert world.fired == ["A7"]
    run(agent, "s", ["look at T1 again"])
    report = u.forget("s", RevocationEvent(target=SECRET))
    assert report.committed and report.erased_clean is True and report.awaiting_human is None
    assert SECRET not in json.dumps(normalized(agent, "s")) and world.fired == ["A7"]


def test_async_only_tools_need_an_async_forget(tmp_path):
    u, world = Unsee(home=tmp_path / "h"), World()

    async def status(order: str) -> str:
        """The order's status (an async-only tool, like every MCP tool)."""
        return f"{order}: shipped"

    tools = [*world.tools(), StructuredTool.from_function(coroutine=status, name="status")]
    agent = _agent(u, world, tools=tools)
    assert async_only_tools(agent) == ["status"]
    run(agent, "s", ["look at T1", "bye"])
    before = _snapshot(u, agent)
    with pytest.raises(NeedsAsync, match="status have no synchronous form.*aforget") as e:
        u.forget("s", RevocationEvent(target=SECRET))
    assert e.value.tools == ["status"] and e.value.exit_code == 2
    assert _snapshot(u, agent) == before


def _deep_with_subagent(world: World, middleware, checkpointer):
    """A deepagents agent whose ``task`` tool runs a ``helper`` subagent on the same thread."""
    from deepagents import create_deep_agent

    def policy(messages, tools):
        last = messages[-1]
        if "task" in tools and isinstance(last, HumanMessage) and "T1" in str(last.content):
            return AIMessage(content="", tool_calls=[{"name": "task", "id": "_", "args": {
                "description": "look at T1", "subagent_type": "helper"}}])
        return worker_policy(messages, tools)

    model = HostedChatModel(policy=policy, role="deep")
    helper = {"name": "helper", "description": "looks tickets up", "system_prompt": "You look tickets up.",
              "tools": world.tools()[:1], "model": model, "middleware": middleware()}
    return create_deep_agent(model=model, tools=world.tools(), subagents=[helper], middleware=middleware(),
                             checkpointer=checkpointer)


def test_a_deepagents_subagent_on_the_same_thread_is_replayed(tmp_path):
    """Its run is a part of the ``task`` call's turn: a forget re-runs the outer agent, the
    subagent runs again inside it, and the state is B5's (run independently)."""
    u, world = Unsee(home=tmp_path / "h"), World()
    turns = ["hello", "look at T1", "refund A7", "bye"]
    agent = _deep_with_subagent(world, lambda: [u.middleware()], InMemorySaver())
    run(agent, "s", turns)
    assert SECRET in json.dumps(normalized(agent, "s"))
    fired = list(world.fired)
    ref_world = World(secret=None)
    ref = _deep_with_subagent(ref_world, list, InMemorySaver())
    run(ref, "reference", turns)
    report = u.forget("s", RevocationEvent(target=SECRET, source="tool:lookup"))
    assert report.committed and report.errors == [] and report.erased_clean is True
    assert normalized(agent, "s") == normalized(ref, "reference")
    assert world.fired == fired


def test_an_agent_without_the_thread_is_refused(tmp_path):
    u, world = Unsee(home=tmp_path / "h"), World()
    agent = _agent(u, world)
    run(agent, "s", ["look at T1", "bye"])
    before = _snapshot(u, agent)
    other = _agent(u, world)  # the same graph on another checkpointer: it holds no thread "s"
    with pytest.raises(AgentCannotReplay, match="holds no thread 's'"):
        u.forget("s", RevocationEvent(target=SECRET), agent=other)
    unsaved = create_agent(HostedChatModel(policy=worker_policy), world.tools(), middleware=[u.middleware()])
    with pytest.raises(AgentCannotReplay, match="no checkpointer of its own"):
        u.forget("s", RevocationEvent(target=SECRET), agent=unsaved)
    assert _snapshot(u, agent) == before


def test_a_model_that_returns_a_message_twice_is_refused_before_the_commit(tmp_path):
    u, world = Unsee(home=tmp_path / "h"), World()
    hello = AIMessage(content="Hello!", id="always-the-same")

    def policy(messages, tools):
        reply = worker_policy(messages, tools)
        return hello if reply.content.startswith("Noted") else reply

    agent = _agent(u, world, model=ScriptedChatModel(policy=policy))
    run(agent, "s", ["hi", "look at T1", "hello again"])
    before = _snapshot(u, agent)
    with pytest.raises(NotDerived, match="returned message id"):
        u.forget("s", RevocationEvent(target=SECRET))
    assert _snapshot(u, agent) == before
    assert [s.session_id for s in u.sessions()] == ["s"]  # no scratch session left behind


def test_the_target_in_the_clean_prefix_is_refused_and_forgotten_from_where_it_first_entered(tmp_path):
    turns = [f"my card is {SECRET}", "look at T1", "bye"]
    u, world = Unsee(home=tmp_path / "h"), World()
    agent = _agent(u, world)
    run(agent, "s", turns)
    before = _snapshot(u, agent)
    # naming the later source: the prefix keeps the user's own message, so nothing is committed
    with pytest.raises(TargetRemains) as e:
        u.forget("s", RevocationEvent(target=SECRET, source="tool:lookup"))
    assert any(p.startswith("state key 'messages'") for p in e.value.places)
    assert any(s.startswith("user") for s in e.value.sources)
    assert _snapshot(u, agent) == before
    # from where it first entered: removed from that message and from the later tool result
    report = u.forget("s", RevocationEvent(target=SECRET, source="user"))
    assert report.committed and report.erased_clean is True
    ref, _ = reference("agent", [t.replace(SECRET, "") for t in turns], InMemorySaver())
    assert normalized(agent, "s") == ref


# -- the pure part ---------------------------------------------------------------------------
def _graph(**attrs) -> ProvenanceGraph:
    T = ArtifactType
    arts = [Artifact(id="in1", session_id="s", type=T.USER_INPUT, seq=1, turn=1, step=1, source_ids=("user",)),
            Artifact(id="mt1", session_id="s", type=T.MODEL_TURN, seq=2, turn=1, step=1, parents=("in1",),
                     attrs=attrs),
            Artifact(id="in2", session_id="s", type=T.USER_INPUT, seq=3, turn=2, step=2, source_ids=("user",))]
    contents = {"in1": f"card {SECRET}", "in2": "bye"}
    return ProvenanceGraph(arts, [], content_of=contents.get, hash_of=lambda s: s[:4], session_id="s")


@pytest.mark.parametrize("attrs, words", [
    ({}, None),
    ({"graph_ns": "worker_a:1f|tools:2e", "in_turn": True}, None),  # (a nested run: part of its turn)
    ({"graph_ns": "worker_a:1f|tools:2e"}, "worker_a/tools"),  # (recorded as a turn of its own: older)
    ({"resumed": True}, "turn(s) 1 were resumed"),
])
def test_recorded_refusals_read_the_suffix_of_the_record(attrs, words):
    g = _graph(**attrs)
    hit = g.locate(SECRET)
    found = recorded_refusals(g, make_plan(g, hit, g.taint(hit), "B5"))
    assert (found == []) if words is None else (len(found) == 1 and words in found[0])


def test_a_replay_under_other_numerics_says_so_on_the_report():
    from unsee.plugins.forget.notes import numerics_differ as _numerics_differ

    g = _graph(numerics="backend=cpu;threads=1")
    hit = g.locate(SECRET)
    plan = make_plan(g, hit, g.taint(hit), "B5")

    class Model:
        def __init__(self, value):
            self.value = value

        def numerics(self, session):
            return self.value

    assert _numerics_differ(Model("backend=cpu;threads=1"), g, plan, "s") is None
    note = _numerics_differ(Model("backend=cpu;threads=2"), g, plan, "s")
    assert note and "recorded backend=cpu;threads=1; now backend=cpu;threads=2" in note
    assert _numerics_differ(object(), g, plan, "s") is None  # another model: nothing to compare


@pytest.mark.skipif(os.environ.get("UNSEE_TEST_STORE") == "postgres",
                    reason="the command line finds the home by its SQLite records (the second pass keeps them on "
                           "PostgreSQL)")
@pytest.mark.parametrize("factory, code, words", [
    ("tests.support.agent_shapes:supervisor_app", 2, "cannot be forgotten safely yet"),
    ("tests.support.agent_shapes:agent_app", 0, None),
])
def test_the_command_line_refuses_in_one_line_before_anything_changes(tmp_path, monkeypatch, capsys,
                                                                       factory, code, words):
    from tests.support import agent_shapes
    from tests.support.cli_helpers import assert_one_line_error
    from tests.support.cli_helpers import run as cli

    monkeypatch.setenv("UNSEE_HOME", str(tmp_path / "home"))
    app = getattr(agent_shapes, factory.split(":")[1])()
    run(app, "s", ["hello", "look at T1", "bye"])
    before = normalized(app, "s")
    status, out, err = cli(capsys, "forget", "s", "--target", SECRET, "--agent", factory, "--json")
    assert status == code, err
    if words:
        assert words in assert_one_line_error(err)
        assert normalized(app, "s") == before
    else:
        assert json.loads(out)["erased_clean"] is True
        assert SECRET not in json.dumps(normalized(app, "s"))


def test_an_agent_without_unsees_middleware_is_refused_before_its_tools_run_again(tmp_path):
    from langchain.agents import create_agent as plain_agent

    u, world = Unsee(home=tmp_path / "h"), World()
    saver = InMemorySaver()
    agent = create_agent(HostedChatModel(policy=worker_policy), world.tools(), middleware=[u.middleware()],
                         checkpointer=saver)
    run(agent, "s", ["look at T1", "refund A7", "bye"])
    before = _snapshot(u, agent)
    bare = plain_agent(HostedChatModel(policy=worker_policy), world.tools(), checkpointer=saver)  # same thread
    with pytest.raises(AgentCannotReplay, match="does not run unsee's middleware"):
        u.forget("s", RevocationEvent(target=SECRET), agent=bare)
    assert _snapshot(u, agent) == before and world.fired == ["A7"]


def test_the_clean_prefix_must_stay_verbatim_and_in_order():
    from unsee.plugins.forget.derived import Seed, _prefix_changed, message_prints

    prefix = [HumanMessage("hi", id="h1"), AIMessage("hello", id="a1")]
    seed = Seed("cp-1", message_prints(prefix))
    later = [HumanMessage("look at T1", id="h2"), AIMessage("ok", id="a2")]
    assert _prefix_changed(seed, [*prefix, *later]) is None
    assert _prefix_changed(seed, [prefix[1], *later]) is None  # (a compaction removed one: a later step)
    replaced = [prefix[0], AIMessage("something else", id="a1"), *later]
    assert "a1" in _prefix_changed(seed, replaced)
    assert "order" in _prefix_changed(seed, [prefix[1], prefix[0], *later])
