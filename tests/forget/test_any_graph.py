"""unsee on graphs without ``create_agent``: a hand-written ``StateGraph`` and ``create_react_agent``.

Each graph records through ``u.recorded_model(model)`` and ``u.tool_node(tools)``
(``middleware/graph_adapter.py``), unchanged otherwise. The secret enters through a
tool result; the session has several turns, one of them a real side effect. A forget
(B7) must reach B5 computed independently (the same graph built plain, without
unsee, run from scratch on a fresh thread in a world that never held the secret),
in every state key (the graph's own keys too), fire no side effect again, and leave
no copy of the secret in the home or the checkpointer's file.
"""

from __future__ import annotations

import json
import operator
from pathlib import Path
from typing import Annotated

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import MessagesState

from tests.support.agent_shapes import (SECRET, HostedChatModel, World, build_react_agent, build_state_graph, file_copies,
                          model_and_tools_graph, normalized, run, sqlite_saver, worker_policy)
from unsee import RevocationEvent, Unsee
from unsee.middleware.graph_adapter import RecordedChatModel
from unsee.plugins.forget import AgentCannotReplay
from unsee.plugins.forget.preflight import records_through_unsee

BUILDERS = {"state_graph": build_state_graph, "react": build_react_agent}
TURNS = ("hello", "look at T1", "refund A7", "thanks, bye")


def _saver(kind: str, tmp: Path, name: str):
    return InMemorySaver() if kind == "memory" else sqlite_saver(tmp / f"{name}.sqlite")


def _b5(shape: str, turns, saver) -> dict:
    """B5, independently: the plain graph (no unsee) from scratch, in a world without the secret."""
    app = BUILDERS[shape](World(secret=None), checkpointer=saver)
    run(app, "reference", turns)
    return normalized(app, "reference")


class Case:
    def __init__(self, tmp: Path, shape: str, saver: str, turns=TURNS):
        self.tmp, self.shape = tmp, shape
        self.u = Unsee(home=tmp / "home")
        self.world = World()
        self.app = BUILDERS[shape](self.world, u=self.u, checkpointer=_saver(saver, tmp, "live"))
        self.turns = turns
        self.ref = _b5(shape, turns, _saver(saver, tmp, "ref"))

    def record(self) -> None:
        run(self.app, "s", self.turns)
        self.fired = list(self.world.fired)

    def now(self) -> dict:
        return normalized(self.app, "s")

    def counterfactual(self, report) -> None:
        assert report.committed and report.errors == []
        assert self.now() == self.ref
        assert SECRET not in json.dumps(self.now())
        assert self.world.fired == self.fired == ["A7"]  # the refund fired once, in the original run
        assert report.erased_clean is True
        assert self.u.audit("s", SECRET, agent=self.app).clean
        assert file_copies([self.tmp / "home", *self.tmp.glob("live.sqlite*")], SECRET) == {}


@pytest.mark.parametrize("saver", ["memory", "sqlite"])
@pytest.mark.parametrize("shape", sorted(BUILDERS))
def test_a_forget_on_the_graph_reaches_the_independent_counterfactual(tmp_path, shape, saver):
    case = Case(tmp_path, shape, saver)
    case.record()
    before = case.now()
    assert SECRET in json.dumps(before["messages"])
    if shape == "state_graph":  # (the graph's own keys: the secret flowed into its notes)
        assert SECRET in before["notes"] and json.loads(before["model_calls"]) == 6
    turns = {a.turn for a in case.u.graph("s")}
    assert turns == {1, 2, 3, 4}  # one turn per run, however many model calls it made
    report = case.u.forget("s", RevocationEvent(target=SECRET, event_id="ev-1"), agent=case.app)
    case.counterfactual(report)


@pytest.mark.parametrize("shape", sorted(BUILDERS))
def test_the_graph_is_found_without_naming_it(tmp_path, shape):
    case = Case(tmp_path, shape, "memory", turns=("look at T1", "refund A7", "bye"))
    case.record()
    assert records_through_unsee(case.app)
    case.counterfactual(case.u.forget("s", RevocationEvent(target=SECRET, event_id="ev-1")))


@pytest.mark.parametrize("saver", ["memory", "async_sqlite"])
@pytest.mark.parametrize("shape", sorted(BUILDERS))
async def test_async_runs_and_forget(tmp_path, shape, saver):
    conn = None
    if saver == "async_sqlite":
        import aiosqlite
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        conn = await aiosqlite.connect(str(tmp_path / "live.sqlite"))
        saver = AsyncSqliteSaver(conn)
    try:
        case = Case(tmp_path, shape, "memory")
        case.app = BUILDERS[shape](case.world, u=case.u, checkpointer=InMemorySaver() if conn is None else saver)
        for text in case.turns:
            await case.app.ainvoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": "s"}})
        case.fired = list(case.world.fired)
        assert {a.turn for a in case.u.graph("s")} == {1, 2, 3, 4}
        report = await case.u.aforget("s", RevocationEvent(target=SECRET, event_id="ev-1"), agent=case.app)
        assert report.committed and report.errors == [] and report.erased_clean is True
        state = await case.app.aget_state({"configurable": {"thread_id": "s"}})
        assert normalized_values(state.values) == case.ref
        assert case.world.fired == ["A7"]
        assert file_copies([tmp_path / "home", *tmp_path.glob("live.sqlite*")], SECRET) == {}
    finally:
        if conn is not None:
            await conn.close()


def normalized_values(values: dict) -> dict:
    """``agent_shapes.normalized`` of state values read through the async API."""
    class _Snap:
        def get_state(self, _cfg):
            return type("S", (), {"values": values})()
    return normalized(_Snap(), "s")


def test_a_graph_whose_tool_node_does_not_record_is_refused_before_anything_changes(tmp_path):
    from tests.support.agent_shapes import TicketState

    u, world = Unsee(home=tmp_path / "home"), World()
    tools = world.tools()
    llm = u.recorded_model(HostedChatModel(policy=worker_policy, role="g")).bind_tools(tools)
    # (its model recorded, its tool node a plain ToolNode: a replay would run its tools again)
    app = model_and_tools_graph(TicketState, lambda state: {"messages": [llm.invoke(state["messages"])],
                                                             "model_calls": 1},
                                tools, u=None, checkpointer=InMemorySaver())
    run(app, "s", ("look at T1", "refund A7"))
    assert not records_through_unsee(app)
    before, records = normalized(app, "s"), [a.id for a in u.graph("s")]
    with pytest.raises(AgentCannotReplay):
        u.forget("s", RevocationEvent(target=SECRET, event_id="ev-1"), agent=app)
    assert normalized(app, "s") == before and [a.id for a in u.graph("s")] == records
    assert world.fired == ["A7"]


def test_bound_models_stay_recorded(tmp_path):
    u = Unsee(home=tmp_path / "home")
    model = u.recorded_model(HostedChatModel(policy=worker_policy))
    bound = model.bind_tools(World().tools())
    assert isinstance(bound, RecordedChatModel) and bound.middleware is u.middleware()
    assert bound.inner.tool_names == ("lookup", "refund") and [t.name for t in bound.tools] == ["lookup", "refund"]
    assert u.recorded_model(model) is model
    # outside a graph run it answers as the model does, and records nothing
    assert "Noted" in str(model.invoke([HumanMessage("hi")]).content)
    assert u.sessions() == []


def test_a_resumed_run_goes_on_in_its_turn(tmp_path):
    """A run resumed after an interrupt begins no turn of its own (as ``create_agent`` skips
    ``before_agent``): its calls are recorded as the resumed run's."""
    from langchain_core.tools import StructuredTool
    from langgraph.types import Command, interrupt

    u, world = Unsee(home=tmp_path / "home"), World()

    def refund(order: str) -> str:
        """Refund an order (moves money)."""
        answer = interrupt(f"approve refund of {order}?")
        world.fired.append(order)
        return f"refund of {order}: {answer}"

    lookup = world.tools()[0]
    world.tools = lambda: [lookup, StructuredTool.from_function(refund, metadata={"unsee.effect": "external"})]
    app = build_state_graph(world, u=u, checkpointer=InMemorySaver())
    cfg = {"configurable": {"thread_id": "s"}}
    app.invoke({"messages": [HumanMessage("refund A7")]}, cfg)
    assert app.get_state(cfg).interrupts
    app.invoke(Command(resume="approved"), cfg)
    g = u.graph("s")
    assert {a.turn for a in g} == {1}
    resumed = {a.type.value for a in g if a.attrs.get("resumed")}
    assert {"model_turn", "tool_return"} <= resumed


def test_a_recorded_model_in_an_agent_with_the_middleware_is_recorded_once(tmp_path):
    from langchain.agents import create_agent

    u, world = Unsee(home=tmp_path / "home"), World()
    agent = create_agent(u.recorded_model(HostedChatModel(policy=worker_policy)), world.tools(),
                         middleware=[u.middleware()], checkpointer=InMemorySaver())
    run(agent, "s", ("look at T1",))
    turns = [a for a in u.graph("s") if a.type.value == "model_turn"]
    assert len(turns) == 2 and {a.turn for a in u.graph("s")} == {1}


def _react_with_subagent(world: World, u: Unsee | None = None, checkpointer=None):
    """A ``create_react_agent`` whose tool invokes another one on the same thread (LangGraph hands
    the tool's config, thread included, to it); recorded with ``u``, plain without."""
    import warnings

    from langchain_core.tools import StructuredTool
    from langgraph.prebuilt import ToolNode

    from tests.support.agent_shapes import outer_policy

    def model(policy, role):
        m = HostedChatModel(policy=policy, role=role)
        return u.recorded_model(m) if u is not None else m

    def tool_node(tools):
        return u.tool_node(tools) if u is not None else ToolNode(tools)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from langgraph.prebuilt import create_react_agent

        inner = create_react_agent(model(worker_policy, "inner"), tool_node(world.tools()), name="specialist")

        def ask_specialist(question: str) -> str:
            """Ask the specialist agent."""
            return str(inner.invoke({"messages": [HumanMessage(question)]})["messages"][-1].content)

        tools = [StructuredTool.from_function(ask_specialist)]
        return create_react_agent(model(outer_policy, "outer"), tool_node(tools), checkpointer=checkpointer)


def test_a_graph_a_recorded_tool_runs_is_part_of_the_turn(tmp_path):
    u, world = Unsee(home=tmp_path / "home"), World()
    app = _react_with_subagent(world, u, InMemorySaver())
    run(app, "s", TURNS)
    g = u.graph("s")
    assert {a.turn for a in g} == {1, 2, 3, 4}
    nested = [a for a in g if a.attrs.get("graph_ns")]
    assert nested and "user_input" not in {a.type.value for a in nested}  # its input is derived
    report = u.forget("s", RevocationEvent(target=SECRET, event_id="ev-1"), agent=app)
    assert report.committed and report.errors == [] and report.erased_clean is True
    ref = _react_with_subagent(World(secret=None), None, InMemorySaver())
    run(ref, "reference", TURNS)
    assert normalized(app, "s") == normalized(ref, "reference")
    assert world.fired == ["A7"]
    assert file_copies([tmp_path / "home"], SECRET) == {}


#: a model a node function reaches by its global name (discovery reads the globals a function names)
_GLOBAL_LLM: RecordedChatModel | None = None


def _global_model_node(state: dict) -> dict:
    return {"messages": [_GLOBAL_LLM.invoke(state["messages"])]}


def test_a_recorded_model_named_as_a_global_is_found(tmp_path):
    global _GLOBAL_LLM
    from langgraph.graph import START, MessagesState, StateGraph

    from unsee.middleware.discovery import node_owners

    u = Unsee(home=tmp_path / "home")
    _GLOBAL_LLM = u.recorded_model(HostedChatModel(policy=worker_policy))
    g = StateGraph(MessagesState)
    g.add_node("model", _global_model_node)
    g.add_edge(START, "model")
    app = g.compile(checkpointer=InMemorySaver())
    assert u.middleware() in node_owners(app) and records_through_unsee(app)
    run(app, "s", ("hello",))
    assert [a.type.value for a in u.graph("s") if a.type.value in ("user_input", "model_turn")] == [
        "user_input", "model_turn"]


async def test_async_runs_find_their_graph_among_others(tmp_path):
    """Off the call stack (async), the graph is found among the others recording through the same
    middleware by the checkpointer its run writes to."""
    u, world = Unsee(home=tmp_path / "home"), World()
    others = [build_react_agent(World(), u=u, checkpointer=InMemorySaver()) for _ in range(2)]
    app = build_react_agent(world, u=u, checkpointer=InMemorySaver())
    for text in ("look at T1", "refund A7", "bye"):
        await app.ainvoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": "s"}})
    report = await u.aforget("s", RevocationEvent(target=SECRET, event_id="ev-1"))
    assert report.committed and report.errors == [] and report.erased_clean is True
    assert SECRET not in json.dumps(normalized(app, "s")) and world.fired == ["A7"]
    assert others  # (kept alive: candidates the search must pass over)


# -- whatever fails where: the old state or the counterfactual ----------------------------------
STEPS = ("plan", "check", "fork", "replay:turn:", "replay:done", "commit:checked", "commit:begin",
         "commit:state", "commit:records", "erase:langgraph.checkpoints", "erase:history:staged")


@pytest.mark.parametrize("crash", [True, False], ids=["crash", "failure"])
@pytest.mark.parametrize("step", STEPS)
@pytest.mark.parametrize("shape", sorted(BUILDERS))
def test_a_fault_anywhere_leaves_the_old_state_or_the_counterfactual(tmp_path, shape, step, crash):
    from unsee.middleware.errors import InjectedCrash, UnseeError
    from unsee.middleware.faults import InjectedFailure, crash_at, fail_at

    case = Case(tmp_path, shape, "sqlite", turns=("look at T1", "refund A7", "bye"))
    case.record()
    before = case.now()
    event = RevocationEvent(target=SECRET, event_id="ev-1")
    with (crash_at if crash else fail_at)(step):
        try:
            report = case.u.forget("s", event, agent=case.app)
        except (UnseeError, InjectedFailure) as e:
            report = None
            if not crash:  # a failure before the commit: the old state
                assert not isinstance(e, InjectedCrash) and case.now() == before
    assert case.now() in (before, case.ref), "neither the old state nor the counterfactual"
    assert case.world.fired == ["A7"]
    if report is None or report.erased_clean is not True:  # retried: it finishes what the fault left
        report = case.u.forget("s", event, agent=case.app)
        if report.erased_clean is not True:
            report = case.u.forget("s", event, agent=case.app)
    case.counterfactual(report)


class CustomerState(MessagesState):
    customer: str
    notes: Annotated[list[str], operator.add]


def _customer_graph(world: World, u: Unsee | None = None, checkpointer=None):
    """A hand-written graph whose runs are given a key of its own beside the messages
    (``customer``), which its model node reads into the prompt and its notes."""
    from langchain_core.messages import SystemMessage

    tools = world.tools()
    model = HostedChatModel(policy=worker_policy, role="customer")
    llm = (u.recorded_model(model) if u is not None else model).bind_tools(tools)

    def call_model(state: dict) -> dict:
        reply = llm.invoke([SystemMessage(f"Customer: {state.get('customer')}"), *state["messages"]])
        return {"messages": [reply], "notes": [] if reply.tool_calls else [f"{state.get('customer')}: {reply.content}"]}

    return model_and_tools_graph(CustomerState, call_model, tools, u=u, checkpointer=checkpointer)


def _run_customers(app, thread: str) -> None:
    for customer, text in (("acme", "hello"), ("acme", "look at T1"), ("globex", "refund A7"), ("globex", "bye")):
        app.invoke({"messages": [HumanMessage(text)], "customer": customer}, {"configurable": {"thread_id": thread}})


def test_runs_given_keys_of_the_graph_replay_with_them(tmp_path):
    u, world = Unsee(home=tmp_path / "home"), World()
    app = _customer_graph(world, u, InMemorySaver())
    _run_customers(app, "s")
    report = u.forget("s", RevocationEvent(target=SECRET, event_id="ev-1"), agent=app)
    assert report.committed and report.errors == [] and report.erased_clean is True
    ref = _customer_graph(World(secret=None), None, InMemorySaver())
    _run_customers(ref, "reference")
    now = normalized(app, "s")
    assert now == normalized(ref, "reference") and json.loads(now["customer"]) == "globex"
    assert world.fired == ["A7"]
