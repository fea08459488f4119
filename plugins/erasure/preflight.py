"""Whether an erasure could rewrite a thread's history, asked before a forget commits.

A forget erases after its commit; an erasure that then refuses leaves a
committed state over a history that still holds the target. The forget asks
first (``erasure_blockers``) and refuses before anything changes. The answer
is what the history rewrite itself would refuse for: no checkpointer, one that
cannot delete a thread, ``DeltaChannel`` channels on a saver or LangGraph
version unsee cannot read, checkpoints in namespaces other than the root one
(a subgraph's, a subagent's: ``delete_thread`` would take them with it and
they are not copied back).
"""

from __future__ import annotations

from typing import Any

from .history import HistoryNotRewritable, check_rewritable, postgres_saver
from .history_sql import sqlite_saver_conn

FIX = "forget with erase=False (--no-erase) to keep the old record, or erase the thread whole (u.erase_subject)"


def has_subgraph_checkpoints(saver: Any, thread: str) -> bool:
    """Whether ``thread`` has checkpoints outside the root namespace: one indexed row read on a
    plain SqliteSaver or PostgresSaver, the thread's namespaces on an InMemorySaver, a listing
    of the thread through the saver's API otherwise."""
    from langgraph.checkpoint.memory import InMemorySaver

    conn = sqlite_saver_conn(saver)
    if conn is not None:
        with saver.lock:
            return conn.execute("SELECT 1 FROM checkpoints WHERE thread_id = ? AND checkpoint_ns != '' LIMIT 1",
                                (thread,)).fetchone() is not None
    if postgres_saver(saver):
        with saver._cursor() as cur:
            cur.execute("SELECT 1 FROM checkpoints WHERE thread_id = %s AND checkpoint_ns != '' LIMIT 1", (thread,))
            return cur.fetchone() is not None
    if type(saver) is InMemorySaver:
        return any(ns for ns in saver.storage.get(thread, {}))
    return any(t.config["configurable"].get("checkpoint_ns")
               for t in saver.list({"configurable": {"thread_id": thread}}))


def erasure_blockers(agent: Any, thread: str) -> list[str]:
    """Why an erasure after a forget could not rewrite ``thread``'s history through ``agent``
    ([] when it can). Reads one row or the thread's listing; changes nothing."""
    try:
        saver = check_rewritable(agent)
    except HistoryNotRewritable as e:
        return [f"its record could not be erased after the forget ({e}): {FIX}"]
    if has_subgraph_checkpoints(saver, thread):
        return [f"its record could not be erased after the forget: thread {thread!r} has checkpoints of nested "
                f"graphs (subgraphs, subagents), which a history rewrite cannot keep: {FIX}"]
    return []


__all__ = ["FIX", "erasure_blockers", "has_subgraph_checkpoints"]
