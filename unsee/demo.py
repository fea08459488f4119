"""``unsee demo``: a small customer-support agent, recorded end to end.

Tools look up a ticket, check entitlement and issue a refund; a memory store
is injected into the prompt and written by a tool; summarization compacts the
conversation. One tool return carries a secret (a card number). The demo
prints where the secret entered (tau), its taint closure and which later
artifacts depend on it, and writes the session's Jaeger JSON.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from langchain.agents import create_agent
from langchain.agents.middleware import SummarizationMiddleware
from langchain.tools import ToolRuntime
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.store.memory import InMemoryStore
from rich.console import Console
from rich.table import Table

from unsee.core import Unsee
from unsee.scripted import ScriptedChatModel, call_id

SECRET = "4417-2231"
USER = "dana"

TICKETS = {
    "T-1001": f"Ticket T-1001: order #5521, blender arrived broken. Payment card on file {SECRET}.",
}

TURNS = [
    "Hi, I'm Dana. Ticket T-1001: my blender arrived broken.",
    "Am I entitled to a refund for order 5521?",
    "Yes please, issue the refund for order 5521.",
    "Please remember that I prefer updates by email.",
    "Thanks. What is the status of my case?",
]


@tool
def lookup_ticket(ticket_id: str) -> str:
    """Look up a support ticket by id (e.g. T-1001)."""
    return TICKETS.get(ticket_id, f"Ticket {ticket_id}: not found.")


@tool
def check_entitlement(order_id: str) -> str:
    """Check whether an order is entitled to a refund."""
    return f"Order {order_id}: within 30-day warranty, full refund of 49.90 EUR allowed."


@tool
def issue_refund(order_id: str, amount: float) -> str:
    """Issue a refund for an order (moves money)."""
    return f"Refund R-{order_id[-2:]}88 of {amount:.2f} EUR issued for order {order_id}."


@tool
def remember(fact: str, runtime: ToolRuntime) -> str:
    """Store a durable fact about the customer in memory."""
    runtime.store.put(("memories", USER), f"fact-{abs(hash(fact)) % 10_000}", {"text": fact})
    return "Saved to memory."


lookup_ticket.metadata = {"unsee.effect": "read"}
check_entitlement.metadata = {"unsee.effect": "read"}
issue_refund.metadata = {"unsee.effect": "external"}
remember.metadata = {"unsee.effect": "write"}

TOOLS = [lookup_ticket, check_entitlement, issue_refund, remember]


def support_policy(messages: Sequence[BaseMessage], tool_names: Sequence[str]) -> AIMessage:
    """The scripted support agent: one tool per request, then a reply from the tool's words."""
    last = messages[-1]
    if isinstance(last, ToolMessage):
        return AIMessage(content=f"Done. {last.content}")
    text = str(last.content)
    calls = []
    if m := re.search(r"T-\d+", text):
        calls = [{"name": "lookup_ticket", "args": {"ticket_id": m.group(0)}}]
    elif "entitled" in text and (m := re.search(r"\d{4}", text)):
        calls = [{"name": "check_entitlement", "args": {"order_id": m.group(0)}}]
    elif "refund" in text and (m := re.search(r"\d{4}", text)):
        calls = [{"name": "issue_refund", "args": {"order_id": m.group(0), "amount": 49.90}}]
    elif "remember" in text.lower():
        calls = [{"name": "remember", "args": {"fact": text.split("remember that", 1)[-1].strip(" .")}}]
    if calls:
        return AIMessage(content="", tool_calls=[
            {**c, "id": call_id(messages, i), "type": "tool_call"} for i, c in enumerate(calls)
        ])
    history = [str(m.content) for m in messages if isinstance(m, (ToolMessage, AIMessage)) and m.content]
    return AIMessage(content="Summary of your case: " + (" ".join(history[-2:]) or "nothing yet."))


def extractive_summary(messages: Sequence[BaseMessage]) -> str:
    """The scripted summarizer: keeps the gist of every message (so taint flows into it)."""
    return " | ".join(str(m.content)[:120] for m in messages if m.content)


def build_agent(u: Unsee, checkpointer, store, model=None):
    model = model or ScriptedChatModel(policy=support_policy)
    return create_agent(
        model,
        TOOLS,
        system_prompt="You are a helpful customer-support agent. Use tools to act.",
        middleware=[
            u.middleware(),
            u.memory_middleware(store, ("memories", USER)),
            SummarizationMiddleware(model, trigger=("messages", 12), keep=("messages", 4),
                                    summarizer=extractive_summary),
        ],
        checkpointer=checkpointer,
        store=store,
    )


def run_demo(home: Path, session: str, jaeger_json: Path, console: Console | None = None) -> dict:
    console = console or Console()
    home = Path(home)
    home.mkdir(parents=True, exist_ok=True)
    u = Unsee(home=home)
    store = u.recorded_store(InMemoryStore())
    import sqlite3

    conn = sqlite3.connect(home / "langgraph.sqlite", check_same_thread=False)
    saver = SqliteSaver(conn)
    agent = build_agent(u, saver, store)
    console.print("[bold]unsee demo[/] - customer-support agent")
    console.print("[yellow]model: scripted policy (a deterministic stand-in, not a neural model)[/]")
    cfg = {"configurable": {"thread_id": session}}
    # A rerun of the demo on the same home starts a fresh thread.
    if u.store.has_session(session):
        session = f"{session}-{len(u.sessions()) + 1}"
        cfg = {"configurable": {"thread_id": session}}
    for text in TURNS:
        console.print(f"[cyan]user>[/] {text}")
        out = agent.invoke({"messages": [HumanMessage(text)]}, cfg)
        console.print(f"[green]agent>[/] {out['messages'][-1].content}")
    g = u.graph(session)
    hit = g.locate(SECRET)
    closure = g.taint(hit)
    console.print()
    console.print(f"[bold]Provenance of the secret[/] (session {session}, {len(g)} artifacts, "
                  f"{len(g.checkpoints)} checkpoints)")
    console.print(f"  entered at step tau={hit.step} through {hit.artifact_type.value} {hit.artifact_id} "
                  f"from {', '.join(hit.source_ids)}")
    console.print(f"  taint closure |I(z)| = {len(closure)}")
    cp = g.checkpoint_before(hit.step)
    if cp is not None:
        console.print(f"  latest checkpoint at or before tau: {cp.id} ({cp.kind.value}, token offset {cp.token_offset})")
    t = Table("seq", "step", "type", "artifact", "contains secret")
    for a in g:
        if a.id in closure:
            t.add_row(str(a.seq), str(a.step), a.type.value, a.id, "yes" if SECRET in (g.content(a.id) or "") else "derived")
    console.print(t)
    n = u.export_jaeger_json(session, jaeger_json)
    console.print(f"wrote {n} spans to {jaeger_json} (Jaeger UI: Search > Upload)")
    conn.close()
    u.close()
    return {"session": session, "tau": hit.step, "closure": len(closure), "artifacts": len(g), "spans": n}
