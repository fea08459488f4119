"""A support agent for forget tests: read, write and external tools, memory
injection, optional summarization; a deterministic scripted policy that
copies what it reads into its replies (so taint flows into derived text)."""

import re
from collections.abc import Sequence

from langchain.agents import create_agent
from langchain.agents.middleware import SummarizationMiddleware
from langchain.tools import ToolRuntime
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from tests.support.transcript import trailing_results
from unsee.plugins.model import ScriptedChatModel, call_id
from unsee.eval.window import RecentTurns

SECRET = "4417-2231"
FIRED: list[dict] = []  # real firings of the external tool, across the test session


@tool
def lookup(ticket: str) -> str:
    """Look up a ticket."""
    return {"T1": f"ticket T1: card {SECRET} on file", "T2": "ticket T2: blender broken"}.get(
        ticket, f"ticket {ticket}: unknown")


@tool
def note(fact: str, runtime: ToolRuntime) -> str:
    """Remember a fact about the customer."""
    runtime.store.put(("mem", "dana"), "note", {"text": fact})
    return "noted"


@tool
def refund(order: str, reason: str) -> str:
    """Refund an order (moves money)."""
    FIRED.append({"order": order, "reason": reason})
    return f"refund of {order} issued ({reason})"


lookup.metadata = {"unsee.effect": "read"}
note.metadata = {"unsee.effect": "write"}
refund.metadata = {"unsee.effect": "external"}
TOOLS = [lookup, note, refund]


def _system_text(messages: Sequence[BaseMessage]) -> str:
    return " ".join(str(m.content) for m in messages if isinstance(m, SystemMessage))


def policy(messages: Sequence[BaseMessage], tools: Sequence[str]) -> AIMessage:
    last = messages[-1]
    if isinstance(last, ToolMessage):
        return AIMessage(content="Result: " + "; ".join(trailing_results(messages)))
    text = str(last.content)
    calls = []
    for t in re.findall(r"\bT\d\b", text):
        calls.append({"name": "lookup", "args": {"ticket": t}})
    if m := re.search(r"remember (.+)", text):
        calls.append({"name": "note", "args": {"fact": m.group(1)}})
    if m := re.search(r"refund (\w+)", text):
        # the reason quotes the most recent tool result: a consequential call whose args may be tainted
        prior = [str(x.content) for x in messages if isinstance(x, ToolMessage)]
        calls.append({"name": "refund", "args": {"order": m.group(1), "reason": (prior[-1] if prior else "none")[:40]}})
    if calls:
        return AIMessage(content="working on it", tool_calls=[
            {**c, "id": call_id(messages, i), "type": "tool_call"} for i, c in enumerate(calls)])
    memo = _system_text(messages)
    seen = [str(x.content) for x in messages if isinstance(x, (HumanMessage, ToolMessage))]
    return AIMessage(content=f"Noted. Context: {seen[-2:] if len(seen) > 1 else seen} | memory: {memo[-60:]}")


def summarizer(msgs):
    return " / ".join(str(m.content)[:80] for m in msgs if m.content)


def build(u, *, summarize=False, store=None, checkpointer=None, window=None):
    """``window``: the model sees only the last ``window`` user turns (a view-only trim, outer to
    unsee's recording); the state keeps every message."""
    store = store if store is not None else u.recorded_store(InMemoryStore())
    mws = [u.middleware(), u.memory_middleware(store, ("mem", "dana"))]
    if window is not None:
        mws.insert(0, RecentTurns(window))
    if summarize:
        mws.append(SummarizationMiddleware(ScriptedChatModel(policy=policy), trigger=("messages", 10),
                                           keep=("messages", 3), summarizer=summarizer))
    agent = create_agent(ScriptedChatModel(policy=policy), TOOLS, system_prompt="You are support.",
                         middleware=mws, checkpointer=checkpointer or InMemorySaver(), store=store)
    return agent, store


def say(agent, thread, text):
    return agent.invoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": thread}})


def state_of(agent, store, thread):
    """What Theorem 1 compares: messages (content, tool calls), store items."""
    msgs = agent.get_state({"configurable": {"thread_id": thread}}).values.get("messages", [])
    norm = []
    for m in msgs:
        calls = [(c["name"], sorted(c["args"].items())) for c in getattr(m, "tool_calls", None) or []]
        norm.append((type(m).__name__, str(m.content), calls))
    items = sorted((tuple(i.namespace), i.key, str(i.value)) for i in store.inner.search((), limit=1000))
    return norm, items
