"""The agent of the old-home fixture (``tests/data/old_home``): a home recorded by an earlier
unsee must still open, audit and forget with today's code (``test_old_home.py``).

``scripts/make-old-home.py`` runs this module against an *earlier* unsee (a frozen install of
it on ``PYTHONPATH``) to record the fixture; the test runs it against the working tree. So it
uses only public API that both have: ``Unsee(home=)``, ``u.middleware()``, ``u.tool(effect=)``,
``unsee.plugins.model.ScriptedChatModel`` / ``call_id``, and LangChain/LangGraph's own pieces.

The session (``TURNS``, one thread ``THREAD``): seven user turns on a support agent whose model
is a deterministic scripted policy that copies what it reads into its replies (taint flows into
derived text). Turn 3 looks up two tickets in one model turn (parallel tool calls); the T1
ticket's text carries ``SECRET`` (it enters through a tool result in the middle of the
session). Turn 4 calls ``refund``, an external side effect (logged in ``fired``; its arguments
never quote the secret, so the counterfactual makes the same call). LangChain's
``SummarizationMiddleware`` compacts the history once the state holds 10 messages (a
deterministic summarizer: the first 80 characters of each message), so the secret is copied
into the summary too. The checkpointer is a ``SqliteSaver`` on ``<home>/langgraph.sqlite``.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Sequence
from pathlib import Path

from langchain.agents import create_agent
from langchain.agents.middleware import SummarizationMiddleware
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.sqlite import SqliteSaver

SECRET = "4417-2231"
THREAD = "dana"
CHECKPOINTS = "langgraph.sqlite"  # the SqliteSaver's file, inside the home
TURNS = [
    "Hello, I'm Dana.",
    "Please look up T2.",
    "Look up T1 and T3 for me.",  # parallel lookups; T1's ticket carries the secret
    "refund 5521 please",  # the external side effect
    "What is the status?",
    "Thanks. Anything else on file?",
    "Bye for now.",
]


def tickets(secret: str) -> dict[str, str]:
    return {"T1": f"ticket T1: card {secret} on file, blender broken",
            "T2": "ticket T2: kettle leaks",
            "T3": "ticket T3: toaster fine"}


def policy(messages: Sequence[BaseMessage], tools: Sequence[str]) -> AIMessage:
    from unsee.plugins.model import call_id

    last = messages[-1]
    if isinstance(last, ToolMessage):
        rets = []
        for m in reversed(messages):
            if not isinstance(m, ToolMessage):
                break
            rets.append(str(m.content))
        return AIMessage(content="Result: " + "; ".join(reversed(rets)))
    text = str(last.content)
    calls = [("lookup", {"ticket": t}) for t in re.findall(r"\bT\d\b", text)]
    if m := re.search(r"refund (\d+)", text):
        calls.append(("refund", {"order": m.group(1), "reason": "broken blender"}))
    if calls:
        return AIMessage(content="working on it", tool_calls=[
            {"name": n, "args": a, "id": call_id(messages, i), "type": "tool_call"} for i, (n, a) in enumerate(calls)])
    seen = [str(x.content) for x in messages if isinstance(x, (HumanMessage, ToolMessage))]
    return AIMessage(content=f"Noted. So far: {' | '.join(seen[-3:])}")


def summarizer(msgs: Sequence[BaseMessage]) -> str:
    return " / ".join(str(m.content)[:80] for m in msgs if m.content)


def make_agent(checkpointer, *, u=None, secret: str = SECRET, fired: list | None = None):
    """The agent on ``checkpointer``. With ``u`` (an ``Unsee``): recorded by ``u.middleware()``, its
    tools made by ``u.tool`` (effects declared, the external one through unsee's ledger).
    Without: the same agent without unsee (the counterfactual's reference run, ``secret=""``)."""
    from unsee.plugins.model import ScriptedChatModel

    fired = fired if fired is not None else []

    def lookup(ticket: str) -> str:
        """Look up a ticket."""
        return tickets(secret).get(ticket, f"ticket {ticket}: unknown")

    def refund(order: str, reason: str) -> str:
        """Refund an order (moves money)."""
        fired.append((order, reason))
        return f"refund of {order} issued"

    if u is not None:
        tools = [u.tool(lookup, effect="read"), u.tool(refund, effect="external")]
    else:
        tools = [tool(lookup), tool(refund)]
        tools[0].metadata = {"unsee.effect": "read"}
        tools[1].metadata = {"unsee.effect": "external"}
    middleware = [u.middleware()] if u is not None else []
    middleware.append(SummarizationMiddleware(ScriptedChatModel(policy=policy), trigger=("messages", 10),
                                              keep=("messages", 3), summarizer=summarizer))
    return create_agent(ScriptedChatModel(policy=policy), tools, system_prompt="You are support.",
                        middleware=middleware, checkpointer=checkpointer)


def open_home(home: Path, *, fired: list | None = None):
    """``(u, agent, close)``: ``Unsee(home=home)`` and the agent on ``<home>/langgraph.sqlite``."""
    from unsee import Unsee

    home = Path(home)
    u = Unsee(home=home)
    conn = sqlite3.connect(home / CHECKPOINTS, check_same_thread=False)
    agent = make_agent(SqliteSaver(conn), u=u, fired=fired)

    def close():
        u.close()
        conn.close()

    return u, agent, close


def run(agent, thread: str = THREAD, turns: Sequence[str] = TURNS) -> None:
    for text in turns:
        agent.invoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": thread}})


def live(agent, thread: str = THREAD) -> list[tuple[str, str, list]]:
    """The live state's messages as the user sees them: (type, content, tool calls by name and
    args); ids left out (they derive from the transcript, which the counterfactual changes)."""
    msgs = agent.get_state({"configurable": {"thread_id": thread}}).values.get("messages", [])
    return [(type(m).__name__, str(m.content),
             [(c["name"], sorted(c["args"].items())) for c in getattr(m, "tool_calls", None) or []])
            for m in msgs]
