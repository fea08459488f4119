"""Async end to end: an agent with an ``async def`` tool and an async-only model, run with ``ainvoke``, forgotten with
``await u.aforget(...)``: the replay runs it with ``ainvoke`` on the caller's event loop and
equals B5 computed independently; a synchronous ``u.forget`` on it raises ``NeedsAsync``
(naming ``aforget``) before anything changes."""

from __future__ import annotations

import asyncio
import json

import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langchain_core.tools import StructuredTool
from langgraph.checkpoint.memory import InMemorySaver

from tests.support.agent_shapes import SECRET, HostedChatModel, World, normalized, worker_policy
from unsee import RevocationEvent, Unsee
from unsee.plugins.forget import NeedsAsync

TURNS = ("hello", "look at T1", "refund A7", "thanks, bye")


class AsyncOnlyModel(HostedChatModel):
    """A hosted-like chat model with an async client only (``ainvoke``)."""

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        raise NotImplementedError("this model answers ainvoke only")

    async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):
        await asyncio.sleep(0)
        return HostedChatModel._generate(self, messages, stop, None, **kwargs)


def async_agent(world: World, *, middleware=(), loops: list | None = None, checkpointer=None):
    """``create_agent`` over a model with an async client only, whose ``lookup`` exists only as a
    coroutine (as every MCP tool), recording
    the event loop each call ran on; declared ``write`` so a replay runs it again (never from
    the record)."""

    async def lookup(ticket: str) -> str:
        """Look up a support ticket."""
        await asyncio.sleep(0)
        if loops is not None:
            loops.append(asyncio.get_running_loop())
        return world.records.get(ticket, f"ticket {ticket}: unknown")

    read = StructuredTool.from_function(coroutine=lookup, name="lookup", description="Look up a support ticket.",
                                        metadata={"unsee.effect": "write"})
    return create_agent(AsyncOnlyModel(policy=worker_policy, role="async"), [read, world.tools()[1]],
                        middleware=list(middleware), checkpointer=checkpointer or InMemorySaver())


async def _run(app, thread: str) -> None:
    for text in TURNS:
        await app.ainvoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": thread}})


def test_an_async_only_agent_is_forgotten_with_aforget_and_equals_b5(tmp_path):
    u, world, loops = Unsee(home=tmp_path / "h"), World(), []
    agent = async_agent(world, middleware=[u.middleware()], loops=loops)

    async def scenario():
        await _run(agent, "s")
        before = (normalized(agent, "s"), [a.id for a in u.graph("s")])
        with pytest.raises(NeedsAsync, match=r"aforget") as e:  # (sync: refused before anything changes)
            u.forget("s", RevocationEvent(target=SECRET))
        assert e.value.tools == ["lookup"] and e.value.exit_code == 2
        assert (normalized(agent, "s"), [a.id for a in u.graph("s")]) == before
        assert [s.session_id for s in u.sessions()] == ["s"]
        calls = len(loops)
        report = await u.aforget("s", RevocationEvent(target=SECRET, source="tool:lookup"))
        return report, calls

    report, calls = asyncio.run(scenario())
    assert report.committed and report.erased_clean is True
    ref_world = World(secret=None)
    ref = async_agent(ref_world)
    asyncio.run(_run(ref, "ref"))
    assert normalized(agent, "s") == normalized(ref, "ref")
    assert SECRET not in json.dumps(normalized(agent, "s"))
    assert world.fired == ["A7"] == ref_world.fired  # the refund fired once in all
    assert len(loops) > calls  # the replay ran the async-only tool again ...
    assert len({id(loop) for loop in loops}) == 1  # ... on the application's event loop


def test_aforget_on_an_async_checkpointer(tmp_path):
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    u, world = Unsee(home=tmp_path / "h"), World()

    async def scenario():
        async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "lg.sqlite")) as saver:
            agent = async_agent(world, middleware=[u.middleware()], checkpointer=saver)
            await _run(agent, "s")
            report = await u.aforget("s", RevocationEvent(target=SECRET, source="tool:lookup"))
            return report, await agent.aget_state({"configurable": {"thread_id": "s"}})

    report, state = asyncio.run(scenario())
    assert report.committed and report.erased_clean is True
    ref = async_agent(World(secret=None))
    asyncio.run(_run(ref, "ref"))
    values = ref.get_state({"configurable": {"thread_id": "ref"}}).values
    assert [(type(m).__name__, str(m.content)) for m in state.values["messages"]] == [
        (type(m).__name__, str(m.content)) for m in values["messages"]]
    assert world.fired == ["A7"]
