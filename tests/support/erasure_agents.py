"""The erasure scenario of issue 12: a support agent on a file ``SqliteSaver`` and
a file ``SqliteStore``; the secret arrives in a tool return (recorded in the call
ledger), a sandboxed ``write`` tool files it into the sandbox, an ``external``
tool fires, a preference goes to the memory store. Deterministic (scripted policy)."""


import re
import sqlite3
from pathlib import Path

from typing import Annotated

from langchain.agents import AgentState, create_agent
from langchain.agents.middleware import SummarizationMiddleware
from langchain.tools import ToolRuntime
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.channels import DeltaChannel
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph.message import add_messages
from langgraph.store.sqlite import SqliteStore

from unsee import Unsee
from unsee.plugins.model import ScriptedChatModel, call_id

SECRET = "4417-2231"
TURNS = ["Hello, I'm Dana.", "Please look up T1.", "File it in my case.", "refund 5521 please",
         "remember that I prefer email", "What is the status?"]


def policy(messages, tools):
    last = messages[-1]
    if isinstance(last, ToolMessage):
        return AIMessage(content=f"Result: {last.content}")
    text = str(last.content)
    results = [str(m.content) for m in messages if isinstance(m, ToolMessage)]
    calls = []
    if t := re.search(r"\bT\d\b", text):
        calls.append(("lookup", {"ticket": t.group(0)}))
    elif "file it" in text.lower():
        found = [r for r in results if r.startswith("ticket")]
        calls.append(("save_case", {"note": found[-1] if found else "nothing"}))
    elif m := re.search(r"refund (\d+)", text):
        calls.append(("refund", {"order": m.group(1), "reason": "broken blender"}))
    elif m := re.search(r"remember that (.+)", text):
        calls.append(("note", {"fact": m.group(1)}))
    if calls:
        return AIMessage(content="", tool_calls=[{"name": n, "args": a, "id": call_id(messages, i), "type": "tool_call"}
                                                 for i, (n, a) in enumerate(calls)])
    seen = [str(x.content) for x in messages if isinstance(x, (HumanMessage, ToolMessage))]
    return AIMessage(content=f"Noted. So far: {' | '.join(seen[-3:])}")


def tickets(user_text: str = "") -> dict[str, str]:
    return {"T1": f"ticket T1: card {SECRET} on file, blender broken", "T2": "ticket T2: kettle leaks"}


def add_each(state: list, writes: list) -> list:
    """A DeltaChannel reducer over ``add_messages`` (batching-invariant: one fold per write)."""
    for w in writes:
        state = add_messages(state, w)
    return state


def delta_state(snapshot_frequency: int) -> type:
    """An agent state whose ``messages`` is a ``DeltaChannel`` (LangGraph 1.2, beta)."""

    class DeltaState(AgentState):
        messages: Annotated[list, DeltaChannel(add_each, snapshot_frequency=snapshot_frequency)]

    return DeltaState


def build(home: Path, *, sandbox: str = "local", summarize: bool = False, encrypted: bool = False,
          pg_url: str | None = None, delta: int | None = None, memory_saver: bool = False, saver=None):
    """(u, agent, close) on ``home``: files langgraph.sqlite and store.sqlite there; with ``pg_url``
    unsee's records, LangGraph's PostgresSaver and PostgresStore all in that database.
    ``delta``: the messages channel is a ``DeltaChannel`` with that snapshot frequency;
    ``memory_saver``: an ``InMemorySaver``; ``saver``: that checkpointer (a second agent on it)."""
    u = Unsee(home=home, sandbox=sandbox, store=pg_url)
    if pg_url:
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver
        from langgraph.store.postgres import PostgresStore
        from psycopg.rows import dict_row

        def connect():
            return psycopg.connect(pg_url, autocommit=True, prepare_threshold=0, row_factory=dict_row)
        lg, st = connect(), connect()
        inner_store = PostgresStore(st)

        def make_saver(serde=None):
            saver = PostgresSaver(lg, serde=serde)
            saver.setup()
            return saver
    else:
        lg = sqlite3.connect(home / "langgraph.sqlite", check_same_thread=False)
        st = sqlite3.connect(home / "store.sqlite", check_same_thread=False, isolation_level=None)
        inner_store = SqliteStore(st)

        def make_saver(serde=None):
            return SqliteSaver(lg, serde=serde)
    inner_store.setup()
    store = u.recorded_store(inner_store)
    if saver is None:
        saver = (InMemorySaver() if memory_saver else u.encrypted(make_saver) if encrypted else make_saver())

    @u.tool(effect="read")
    def lookup(ticket: str) -> str:
        """Look up a ticket."""
        return tickets().get(ticket, f"ticket {ticket}: unknown")

    @u.tool(effect="write", sandboxed=True)
    def save_case(note: str, env) -> str:
        """File a note in the customer's case."""
        env.write_file("case/notes.txt", note.encode())
        return "saved case/notes.txt"

    @u.tool(effect="external")
    def refund(order: str, reason: str) -> str:
        """Refund an order (moves money)."""
        with open(home / "payments.log", "a") as f:
            f.write(f"refund {order}\n")
        return f"refund of {order} issued"

    @tool
    def note(fact: str, runtime: ToolRuntime) -> str:
        """Remember a preference of the customer."""
        runtime.store.put(("mem", "dana"), "pref", {"text": fact})
        return "noted"

    note.metadata = {"unsee.effect": "write"}
    mws = [u.middleware(), u.memory_middleware(store, ("mem", "dana"))]
    if summarize:
        mws.append(SummarizationMiddleware(ScriptedChatModel(policy=policy), trigger=("messages", 10),
                                           keep=("messages", 3),
                                           summarizer=lambda ms: " / ".join(str(m.content)[:80] for m in ms)))
    agent = create_agent(ScriptedChatModel(policy=policy), [lookup, save_case, refund, note],
                         system_prompt="You are support.", middleware=mws, checkpointer=saver, store=store,
                         **({"state_schema": delta_state(delta)} if delta else {}))

    def close():
        u.close()
        lg.close()
        st.close()

    return u, agent, close


def run(agent, thread: str, turns=TURNS) -> None:
    for text in turns:
        agent.invoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": thread}})


def live(agent, thread="t1"):
    """What the user sees: messages (type, content, tool calls)."""
    msgs = agent.get_state({"configurable": {"thread_id": thread}}).values.get("messages", [])
    return [(type(m).__name__, str(m.content), [(c["name"], c["args"]) for c in getattr(m, "tool_calls", []) or []])
            for m in msgs]


def raw_copies(home: Path, needle: bytes = SECRET.encode()) -> dict[str, int]:
    """Raw byte copies per file under ``home`` (a plain grep, independent of unsee's scanner)."""
    out = {}
    for p in Path(home).rglob("*"):
        if p.is_file():
            n = p.read_bytes().count(needle)
            if n:
                out[str(p.relative_to(home))] = n
    return out
