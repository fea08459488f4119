"""Small real ``create_agent`` agents for the recording tests (scripted model)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from tests.support.transcript import trailing_results
from unsee.plugins.model import ScriptedChatModel, call_id

SECRET = "4417-2231"


@tool
def lookup(ticket: str) -> str:
    """Look up a ticket."""
    if ticket == "T1":
        return f"ticket T1: card {SECRET}"
    return f"ticket {ticket}: nothing on file"


@tool
def refund(order: str) -> str:
    """Refund an order."""
    return f"refunded {order}"


lookup.metadata = {"unsee.effect": "read"}
refund.metadata = {"unsee.effect": "external"}


def policy(messages: Sequence[BaseMessage], tools: Sequence[str]) -> AIMessage:
    """Look up every ticket the user names (in parallel), then answer from the returns."""
    last = messages[-1]
    if isinstance(last, ToolMessage):
        return AIMessage(content="Found: " + "; ".join(trailing_results(messages)))
    text = str(last.content)
    tickets = re.findall(r"T\d+", text)
    if tickets:
        return AIMessage(content="checking", tool_calls=[
            {"name": "lookup", "args": {"ticket": t}, "id": call_id(messages, i), "type": "tool_call"}
            for i, t in enumerate(tickets)
        ])
    if m := re.search(r"refund (\w+)", text):
        return AIMessage(content="", tool_calls=[
            {"name": "refund", "args": {"order": m.group(1)}, "id": call_id(messages), "type": "tool_call"}])
    return AIMessage(content=f"ok ({len(messages)} messages so far)")


def make_agent(u, checkpointer, *, extra_middleware=(), store=None, system_prompt="You are support.", name=None):
    return create_agent(
        ScriptedChatModel(policy=policy),
        [lookup, refund],
        system_prompt=system_prompt,
        middleware=[u.middleware(), *extra_middleware],
        checkpointer=checkpointer,
        store=store,
        name=name,
    )


def say(agent, thread: str, text: str):
    return agent.invoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": thread}})
