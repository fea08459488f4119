"""MCP tools: their effect comes from the server's annotations; a forget never fires one twice.

A real stdio MCP server (``tests/support/mcp_server.py``, FastMCP, offline) is reached through
``langchain_mcp_adapters``' ``MultiServerMCPClient`` and ``load_mcp_tools`` (one server
process per session). The adapters put the server's tool annotations in the LangChain tool's
metadata: ``readOnlyHint`` makes a ``read``, ``destructiveHint`` / ``openWorldHint`` an
``external`` effect, ``idempotentHint`` is recorded with the call; a tool without them stays
undeclared (assumed external). The server counts its real side effects in a file.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from tests.support.agent_shapes import SECRET, HostedChatModel
from tests.support.mcp_desk import fired, mcp_tools, policy
from unsee import RevocationEvent, Unsee
from unsee.middleware.tools import effect_basis
from unsee.plugins.tools import declare_effect
from unsee.sandbox import Ledger


def _content(content: Any) -> str:
    """Message content as compared: content blocks without the ids the adapters draw at random."""
    if isinstance(content, list):
        content = [{k: v for k, v in b.items() if k != "id"} if isinstance(b, dict) else b for b in content]
    return json.dumps(content, sort_keys=True)


async def normalized(app: Any, thread: str) -> dict[str, Any]:
    values = (await app.aget_state({"configurable": {"thread_id": thread}})).values
    return {key: [(type(m).__name__, _content(m.content), getattr(m, "status", None),
                   [(c["name"], json.dumps(c["args"], sort_keys=True)) for c in getattr(m, "tool_calls", None) or []])
                  for m in value] if key == "messages" else json.dumps(value, sort_keys=True, default=str)
            for key, value in values.items()}


def agent(tools: dict, middleware: list) -> Any:
    return create_agent(HostedChatModel(policy=policy, role="mcp"), list(tools.values()), middleware=middleware,
                        checkpointer=InMemorySaver())


async def run(app: Any, thread: str, turns: Sequence[str]) -> None:
    for text in turns:
        await app.ainvoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": thread}})


async def test_annotations_give_the_effect(tmp_path):
    async with mcp_tools(tmp_path / "effects.txt") as tools:
        assert effect_basis(tools["get_ticket"]) == ("read", "mcp")
        assert effect_basis(tools["close_ticket"]) == ("external", "mcp")
        assert effect_basis(tools["tag_ticket"]) == ("external", "mcp")
        assert tools["tag_ticket"].metadata["idempotentHint"] is True
        assert effect_basis(tools["ticket_status"]) == (None, "assumed")
        # a declaration wins over the annotations
        assert effect_basis(declare_effect(tools["get_ticket"], "external")) == ("external", "declared")


async def test_a_routed_mcp_tool_keeps_its_json_schema_and_runs_async(tmp_path):
    effects = tmp_path / "effects.txt"
    ledger = Ledger(tmp_path / "ledger.sqlite")
    async with mcp_tools(effects) as tools:
        inner = tools["tag_ticket"]
        routed = declare_effect(inner, "external", ledger=ledger, session="s")
        assert routed.args_schema == inner.args_schema and isinstance(routed.args_schema, dict)
        assert routed.func is None  # (no synchronous form, like the tool it routes)
        assert routed.metadata["idempotentHint"] is True and routed.metadata["unsee.effect"] == "external"
        out = await routed.ainvoke({"ticket": "T2", "tag": "urgent"})
        assert "ticket T2 tagged urgent" in json.dumps(out)
        assert fired(effects) == ["tag:T2:urgent"]  # (the server received the arguments)
        with pytest.raises(NotImplementedError):
            routed.invoke({"ticket": "T2", "tag": "urgent"})


async def test_a_run_records_the_effects_the_annotations_give(tmp_path):
    u = Unsee(home=tmp_path / "home")
    async with mcp_tools(tmp_path / "effects.txt") as tools:
        app = agent(tools, [u.middleware()])
        await run(app, "s", ("look at T2", "tag T2 urgent", "status T2"))
    g = u.graph("s")
    calls = {a.attrs["tool"]: a for a in g if a.type.value == "tool_call"}
    assert {n: c.attrs.get("effect") for n, c in calls.items()} == {
        "get_ticket": "read", "tag_ticket": "external", "ticket_status": None}
    returns = {a.attrs.get("tool"): a for a in g if a.type.value == "tool_return"}
    assert returns["tag_ticket"].attrs.get("idempotent") is True
    assert "idempotent" not in returns["get_ticket"].attrs


@pytest.mark.parametrize("strategy", ["B7", "B5"])
async def test_a_forget_with_mcp_tools_reaches_b5_and_fires_nothing_again(tmp_path, strategy):
    turns = ("hello", "look at T1", "close T2", "status T2", "look at T2", "bye")
    effects, ref_effects = tmp_path / "effects.txt", tmp_path / "ref-effects.txt"
    u = Unsee(home=tmp_path / "home")
    async with mcp_tools(ref_effects, secret="") as tools:  # B5, independently: a world without the secret
        ref_app = agent(tools, [])
        await run(ref_app, "reference", turns)
        ref = await normalized(ref_app, "reference")
    async with mcp_tools(effects) as tools:
        app = agent(tools, [u.middleware()])
        await run(app, "s", turns)
        before = fired(effects)
        assert before == ["close:T2", "status:T2"] == fired(ref_effects)
        report = await u.aforget("s", RevocationEvent(target=SECRET, event_id="ev-1"), strategy=strategy, agent=app)
        now = await normalized(app, "s")
    assert report.committed
    assert now == ref
    assert SECRET not in json.dumps(now)
    assert fired(effects) == before  # (nothing fired again)
    assert report.assumed_external == ["ticket_status"]
    # the undeclared tool's answer is the original message: its two content blocks, not a string
    msgs = (await app.aget_state({"configurable": {"thread_id": "s"}})).values["messages"]
    status = next(m for m in msgs if isinstance(m, ToolMessage) and m.name == "ticket_status")
    assert [b["text"] for b in status.content] == ["ticket T2: ", "open"]
