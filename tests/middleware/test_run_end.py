"""A run's end from LangChain's callbacks, not an ``after_agent`` node (issue 32), and a writer
that works while the agent waits. The watcher's logic by tables; real agents for the rest."""

import asyncio
import threading
import time
import uuid

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import ModelRetryMiddleware
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.support.recording_agents import make_agent, say
from unsee import Unsee
from unsee.middleware.run_end import RunEndWatcher
from unsee.middleware.store_writer import BatchWriter
from unsee.plugins.model import ScriptedChatModel


# -- the watcher, pure ------------------------------------------------------------------------
def test_a_watched_node_names_its_graph_whose_end_calls_once():
    w, seen = RunEndWatcher(), []
    node, graph, other = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    w.watch(node, seen.append)
    w.on_chain_end({}, run_id=other, parent_run_id=graph)  # another run: nothing
    assert seen == [] and w.watching() == 1
    w.on_chain_end({}, run_id=node, parent_run_id=graph)  # the node ends: its graph is watched
    assert seen == [] and w.watching() == 1
    err = RuntimeError("x")
    w.on_chain_error(err, run_id=graph, parent_run_id=None)
    assert seen == [err] and w.watching() == 0
    w.on_chain_end({}, run_id=graph, parent_run_id=None)  # once
    assert seen == [err]


def test_a_node_without_a_parent_is_the_whole_run_and_a_failing_function_is_logged():
    w, seen = RunEndWatcher(), []
    node = uuid.uuid4()

    def boom(error):
        raise ValueError("observer")

    w.watch(node, boom)
    w.watch(node, seen.append)
    w.on_chain_end({}, run_id=node, parent_run_id=None)  # (boom's error never reaches LangChain)
    assert seen == [None] and w.watching() == 0


def test_the_watcher_ignores_every_event_but_chain_and_tool_events():
    w = RunEndWatcher()
    assert w.ignore_llm and w.ignore_chat_model and w.ignore_retriever
    assert not w.ignore_chain and not w.ignore_agent and w.run_inline  # (tool events are the "agent" kind)


def test_a_tool_start_is_seen_only_for_an_expected_call():
    w = RunEndWatcher()
    w.on_tool_start({}, "", run_id=uuid.uuid4(), tool_call_id="c0")  # (nobody waits for it: not kept)
    w.expect_tool("c1")
    w.expect_tool("c2")
    w.on_tool_start({}, "", run_id=uuid.uuid4(), tool_call_id="c1")
    assert w.tool_started("c1") is True and w.tool_started("c2") is False
    assert w.tool_started("c0") is False and w.tool_started("c1") is False  # (each told once)


# -- real agents --------------------------------------------------------------------------------
def test_the_agent_has_no_after_agent_node_and_the_turn_ends_with_the_graph(u):
    agent = make_agent(u, InMemorySaver())
    assert not [n for n in agent.builder.nodes if n.endswith("after_agent") and "Unsee" in n]
    say(agent, "e", "look at T1 please")
    assert not u.recorder.activity.is_running("e")  # ended when invoke returned
    u.flush()
    assert u.recorder.run_leases.table is None or not u.recorder.run_leases.table.holders("e")
    say(agent, "e", "hello")
    g = u.graph("e")
    assert max(a.turn for a in g) == 2 and [c.kind.value for c in g.checkpoints][:1] == ["session_start"]


def test_another_graph_on_the_same_thread_id_gives_this_session_nothing(u):
    """The inputs of a graph that records nothing (another agent of the process, on the same
    thread id, e.g. a reference run without unsee) are never recorded as this session's."""
    agent = make_agent(u, InMemorySaver())
    say(agent, "before", "hello")  # (unsee watches the process's runs from its first one on)
    plain = create_agent(ScriptedChatModel(policy=lambda m, t: AIMessage("ok")), [], checkpointer=InMemorySaver())
    for i in range(3):
        plain.invoke({"messages": [("user", f"elsewhere {i} 9911-0000")]}, {"configurable": {"thread_id": "e"}})
    say(agent, "e", "hello")
    u.flush()
    assert not [c for c in u.store.contents("e").values() if "9911-0000" in str(c)]
    assert [a.type.value for a in u.graph("e") if a.type.value == "run_input"] == ["run_input"]


def test_an_error_ends_the_turn_with_the_error_on_the_run_span(tmp_path):
    exporter = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    u = Unsee(home=tmp_path, tracer_provider=tp)

    def broken(messages, tools):
        raise RuntimeError("model down")

    agent = create_agent(ScriptedChatModel(policy=broken), [], middleware=[u.middleware()],
                         checkpointer=InMemorySaver())
    with pytest.raises(RuntimeError):
        agent.invoke({"messages": [HumanMessage("hi")]}, {"configurable": {"thread_id": "x"}})
    assert not u.recorder.activity.is_running("x")
    u.flush()
    runs = [s for s in exporter.get_finished_spans() if s.name == "invoke_agent"]
    assert len(runs) == 1 and runs[0].status.status_code.name == "ERROR"
    u.close()


def test_an_error_an_outer_retry_catches_stays_in_one_turn(tmp_path):
    u = Unsee(home=tmp_path)
    calls = []

    def flaky(messages, tools):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("once")
        return AIMessage("fine")

    agent = create_agent(ScriptedChatModel(policy=flaky), [],
                         middleware=[ModelRetryMiddleware(max_retries=2, initial_delay=0.0), u.middleware()],
                         checkpointer=InMemorySaver())
    out = agent.invoke({"messages": [HumanMessage("hi")]}, {"configurable": {"thread_id": "r"}})
    assert out["messages"][-1].content == "fine" and len(calls) == 2
    assert not u.recorder.activity.is_running("r")
    g = u.graph("r")
    assert {a.turn for a in g} == {1}
    u.close()


def test_async_runs_end_too(u):
    agent = make_agent(u, InMemorySaver())

    async def go():
        for text in ("look at T1 please", "hello"):
            await agent.ainvoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": "a"}})

    asyncio.run(go())
    assert not u.recorder.activity.is_running("a")
    assert max(a.turn for a in u.graph("a")) == 2


# -- the writer works while the agent waits -------------------------------------------------------
class _Writer(BatchWriter):
    """The writer alone, with a fake store write."""

    def __init__(self, busy):
        import threading as th

        self._read_lock = th.RLock()
        self.written = []
        self._start_writer()
        self.ran = []
        self.add_producer(self._producer, busy)

    def _producer(self, pause=None):
        self.ran.append(threading.current_thread().name)

    def _write(self, batches):
        self.written.extend(batches)

    def mark_failure(self, session_id, why):
        pass


def test_a_busy_agent_keeps_the_writer_off_until_a_flush_or_the_backlog():
    busy = [True]
    w = _Writer(lambda: busy[0])
    try:
        w.ran.clear()
        w.kick(write=True)
        time.sleep(0.12)
        assert "unsee-store-writer" not in w.ran  # held back
        assert not w.backlog_due() or w._held_since is not None
        time.sleep(0.3)
        assert w.backlog_due()  # the agent's next call hands it over
        w.flush()  # a flush writes whatever the agent does
        assert not w.backlog_due()
        busy[0] = False
        w.ran.clear()
        w.kick(write=True)
        deadline = time.monotonic() + 2
        while "unsee-store-writer" not in w.ran and time.monotonic() < deadline:
            time.sleep(0.01)
        assert "unsee-store-writer" in w.ran  # an idle agent: the writer works at once
    finally:
        busy[0] = False
        w._stop_writer()


def test_a_scripted_agent_in_a_loop_hands_its_backlog_over(u):
    agent = make_agent(u, InMemorySaver())
    for i in range(40):
        say(agent, f"loop{i}", "look at T1 please")
    assert len(u.recorder.tasks) < 2048  # bounded: handed over at the agent's calls
    u.flush()
    assert not u.recorder.tasks and u.store.failures == 0
    assert len(u.store.sessions()) >= 40
