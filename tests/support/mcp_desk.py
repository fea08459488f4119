"""The ticket desk over MCP: a real stdio MCP server (``mcp_server.py``, FastMCP, offline),
the tools it serves over one stdio session, the side effects it counted, and the scripted
policy that calls them (the MCP tests and the compatibility suite's ``mcp-tools`` case)."""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from contextlib import asynccontextmanager
from pathlib import Path

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from tests.support.agent_shapes import SECRET
from tests.support.transcript import last_human

SERVER = Path(__file__).with_name("mcp_server.py")  #: the server, run as a script


@asynccontextmanager
async def mcp_tools(effects: Path, secret: str = SECRET):
    """The server's tools, over one stdio session (one server process) for the block."""
    from langchain_mcp_adapters.client import MultiServerMCPClient
    from langchain_mcp_adapters.tools import load_mcp_tools

    client = MultiServerMCPClient({"tickets": {
        "command": sys.executable, "args": [str(SERVER)], "transport": "stdio",
        "env": {"MCP_EFFECTS": str(effects), "MCP_SECRET": secret}}})
    async with client.session("tickets") as session:
        yield {t.name: t for t in await load_mcp_tools(session)}


def fired(effects: Path) -> list[str]:
    return effects.read_text().split() if effects.exists() else []


def policy(messages: Sequence[BaseMessage], tools: Sequence[str]) -> AIMessage:
    """Calls the tools the last user message names, then answers with a summary of what they
    returned (the first line of each: the secret flows into the reply)."""
    last = messages[-1]
    if isinstance(last, ToolMessage):
        done = []
        for m in reversed(messages):
            if not isinstance(m, ToolMessage):
                break
            text = m.content if isinstance(m.content, str) else "".join(
                b.get("text", "") for b in m.content if isinstance(b, dict))
            done.append(text)
        return AIMessage(content="Result: " + "; ".join(reversed(done)))
    text = last_human(messages)
    calls = [{"name": "get_ticket", "args": {"ticket": t}, "id": "_"} for t in re.findall(r"look at (T\d)", text)]
    calls += [{"name": "close_ticket", "args": {"ticket": t}, "id": "_"} for t in re.findall(r"close (T\d)", text)]
    calls += [{"name": "ticket_status", "args": {"ticket": t}, "id": "_"} for t in re.findall(r"status (T\d)", text)]
    calls += [{"name": "tag_ticket", "args": {"ticket": t, "tag": g}, "id": "_"}
              for t, g in re.findall(r"tag (T\d) (\w+)", text)]
    if calls:
        return AIMessage(content="", tool_calls=calls)
    return AIMessage(content=f"Noted: {text}")
