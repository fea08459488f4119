"""Three data subjects on one home (``Ann``, ``Bob``, ``Cid``): their threads, cards and
namespaces, and one support agent for all of them (``build``: SqliteSaver + SqliteStore, or
PostgreSQL) that writes each subject's preferences into its namespace (the subject erasure tests
and the shared-receipts tests)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from langchain.agents import create_agent
from langchain.tools import ToolRuntime
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.store.sqlite import SqliteStore

from tests.support.erasure_agents import policy
from unsee import Unsee
from unsee.plugins.model import ScriptedChatModel

# what each subject's sessions hold; A's strings must end with 0 copies, B's and C's untouched
NAMES = {"a": "Ann Aldridge", "b": "Bob Brennan", "c": "Cid Carver"}
CARDS = {"a": "4417-2231", "b": "8812-7763", "c": "6029-1184"}
THINGS = {"a": "blender broken", "b": "kettle leaks", "c": "toaster sparks"}
TICKET = {"a": "T1", "b": "T2", "c": "T3"}
THREADS = {"a": ["a1", "a2"], "b": ["b1"], "c": ["c1"]}
NS = {s: ("users", NAMES[s].split()[0].lower()) for s in NAMES}


def turns(thread: str) -> list[str]:
    s, name = thread[0], NAMES[thread[0]]
    if thread.endswith("2"):
        return [f"Hi again, {name} here.", "refund 5521 please"]
    return [f"Hello, I'm {name}.", f"Please look up {TICKET[s]}.", f"remember that {name} prefers sms"]


def build(home: Path, pg_url: str | None = None, encrypted: bool = False):
    """(u, agent, store, close): one agent for every subject; ``note`` writes the subject's namespace."""
    u = Unsee(home=home, sandbox="local", store=pg_url)
    if pg_url:
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver
        from langgraph.store.postgres import PostgresStore
        from psycopg.rows import dict_row

        lg, st = (psycopg.connect(pg_url, autocommit=True, prepare_threshold=0, row_factory=dict_row)
                  for _ in range(2))
        saver, inner = PostgresSaver(lg), PostgresStore(st)
        saver.setup()
    else:
        lg = sqlite3.connect(home / "langgraph.sqlite", check_same_thread=False)
        st = sqlite3.connect(home / "store.sqlite", check_same_thread=False, isolation_level=None)
        saver = u.encrypted(lambda serde: SqliteSaver(lg, serde=serde)) if encrypted else SqliteSaver(lg)
        inner = SqliteStore(st)
    inner.setup()
    store = u.recorded_store(inner)

    @u.tool(effect="read")
    def lookup(ticket: str) -> str:
        """Look up a ticket."""
        s = next((k for k, v in TICKET.items() if v == ticket), None)
        return f"ticket {ticket}: card {CARDS[s]} on file, {THINGS[s]}" if s else f"ticket {ticket}: unknown"

    @u.tool(effect="external")
    def refund(order: str, reason: str) -> str:
        """Refund an order (moves money)."""
        return f"refund of {order} issued"

    @tool
    def note(fact: str, runtime: ToolRuntime) -> str:
        """Remember a preference of the customer."""
        runtime.store.put(NS[runtime.config["configurable"]["thread_id"][0]], "pref", {"text": fact})
        return "noted"

    note.metadata = {"unsee.effect": "write"}
    agent = create_agent(ScriptedChatModel(policy=policy), [lookup, refund, note], system_prompt="You are support.",
                         middleware=[u.middleware()], checkpointer=saver, store=store)

    def close():
        u.close()
        lg.close()
        st.close()

    return u, agent, store, close


def run_all(agent) -> None:
    for ts in THREADS.values():
        for t in ts:
            for text in turns(t):
                agent.invoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": t}})
