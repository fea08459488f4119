"""Erasure cost vs session length on a file SqliteSaver.

Sessions of about 10, 100 and 1 000 LangGraph checkpoints (a scripted agent,
one user turn = user -> model -> tool -> model), the target entering in a tool
return in the middle turn. Each is forgotten with B7 and ``erase=False`` (the
replay, timed), then erased (``u.erase``, timed per route). Printed per size:
replay time, erasure time and its ratio to the replay, the checkpoint route's
share, bytes of the checkpoint file before/after and bytes rewritten (the
rewritten thread's rows), and — separately — what one VACUUM + WAL truncation
of the checkpoint file costs at that size (measured again after erasure).

    python -m benchmarks.bench_erasure [--sizes 10,100,1000]
"""


import argparse
import sqlite3
import tempfile
import time
from pathlib import Path

SECRET = "4417-2231"


def add_each(state: list, writes: list) -> list:
    """A ``DeltaChannel`` reducer over ``add_messages`` (one fold per write: batching-invariant)."""
    from langgraph.graph.message import add_messages

    for w in writes:
        state = add_messages(state, w)
    return state


def delta_state(snapshot_frequency: int | None = None) -> type:
    """An agent state whose ``messages`` is a ``DeltaChannel`` (LangGraph 1.2, beta); ``None``:
    the channel's default snapshot frequency. (This module has no ``from __future__ import
    annotations``: LangGraph evaluates the class's annotations, which must not be strings.)"""
    from typing import Annotated

    from langchain.agents import AgentState
    from langgraph.channels.delta import DeltaChannel

    channel = DeltaChannel(add_each) if snapshot_frequency is None else DeltaChannel(
        add_each, snapshot_frequency=snapshot_frequency)

    class DeltaState(AgentState):
        messages: Annotated[list, channel]

    return DeltaState


def lookup_text(ticket: str) -> str:
    """The ``lookup`` tool's answer: the secret for ticket T-SECRET."""
    return f"ticket {ticket}: card {SECRET} on file" if ticket == "T-SECRET" else f"ticket {ticket}: ok"


def support_policy(messages, tools):
    """The scripted support model: look up the ticket a user message names, then note the result."""
    from langchain_core.messages import AIMessage, ToolMessage

    from unsee.plugins.model import call_id

    last = messages[-1]
    if isinstance(last, ToolMessage):
        return AIMessage(content=f"Noted: {last.content}")
    return AIMessage(content="", tool_calls=[{"name": "lookup", "args": {"ticket": str(last.content).split()[-1]},
                                              "id": call_id(messages), "type": "tool_call"}])


def support_agent(path: Path, lookup, state_schema: type | None = None, middleware: tuple = ()):
    """(agent, conn): the support agent with the tool ``lookup`` on a file ``SqliteSaver`` at
    ``path`` (with unsee or without: ``middleware`` says)."""
    from langchain.agents import create_agent
    from langgraph.checkpoint.sqlite import SqliteSaver

    from unsee.plugins.model import ScriptedChatModel

    conn = sqlite3.connect(path, check_same_thread=False)
    agent = create_agent(ScriptedChatModel(policy=support_policy), [lookup], system_prompt="You are support.",
                         middleware=list(middleware), checkpointer=SqliteSaver(conn),
                         **({"state_schema": state_schema} if state_schema is not None else {}))
    return agent, conn


def _agent(home: Path, state_schema: type | None = None, middleware: tuple = ()):
    """(u, agent, conn): bench's support agent on a file ``SqliteSaver`` in ``home``; its
    ``lookup`` tool returns the secret for ticket T-SECRET. ``state_schema``: e.g. :func:`delta_state`;
    ``middleware``: more middleware after unsee's (e.g. a ``SummarizationMiddleware``)."""
    from unsee import Unsee

    u = Unsee(home=home)

    @u.tool(effect="read")
    def lookup(ticket: str) -> str:
        """Look up a ticket."""
        return lookup_text(ticket)

    agent, conn = support_agent(home / "langgraph.sqlite", lookup, state_schema, (u.middleware(), *middleware))
    return u, agent, conn


def _thread_bytes(conn: sqlite3.Connection, thread: str) -> int:
    a = conn.execute("SELECT COALESCE(SUM(LENGTH(checkpoint) + LENGTH(metadata)), 0) FROM checkpoints"
                     " WHERE thread_id=?", (thread,)).fetchone()[0]
    b = conn.execute("SELECT COALESCE(SUM(LENGTH(value)), 0) FROM writes WHERE thread_id=?", (thread,)).fetchone()[0]
    return a + b


def _size(p: Path) -> int:
    return sum(q.stat().st_size for q in (p, Path(f"{p}-wal")) if q.exists())


def run_size(checkpoints: int, per_turn: float) -> dict:
    from langchain_core.messages import HumanMessage

    from unsee import RevocationEvent
    from unsee.plugins.erasure.sqlite_scrub import scrub

    turns = max(2, round(checkpoints / per_turn))
    with tempfile.TemporaryDirectory() as d:
        home = Path(d)
        u, agent, conn = _agent(home)
        cfg = {"configurable": {"thread_id": "s"}}
        for i in range(turns):
            agent.invoke({"messages": [HumanMessage(f"look up T-{'SECRET' if i == turns // 2 else i}")]}, cfg)
        n = len(list(agent.get_state_history(cfg)))
        db = home / "langgraph.sqlite"
        size0 = _size(db)
        event = RevocationEvent(target=SECRET)
        t0 = time.perf_counter()
        u.forget("s", event, erase=False)
        replay = time.perf_counter() - t0
        t0 = time.perf_counter()
        res = u.erase("s", event, agent=agent)
        erase = time.perf_counter() - t0
        assert res.clean, "erasure left copies"
        rewritten = _thread_bytes(conn, "s")
        size1 = _size(db)
        t0 = time.perf_counter()
        scrub(conn)
        vacuum = time.perf_counter() - t0
        u.close()
        conn.close()
    return {"checkpoints": n, "turns": turns, "replay_s": replay, "erase_s": erase,
            "history_s": res.timings.get("langgraph.checkpoints", 0.0), "size0": size0, "size1": size1,
            "rewritten": rewritten, "vacuum_s": vacuum}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10,100,1000")
    args = ap.parse_args(argv if argv is not None else [])
    per_turn = run_size(10, 4)["checkpoints"] / 2.0 or 4  # checkpoints a turn writes, measured
    print(f"{'checkpoints':>11} {'replay s':>9} {'erase s':>8} {'erase/replay':>12} {'history s':>9} "
          f"{'db before':>10} {'db after':>9} {'rewritten':>10} {'VACUUM s':>8}")
    for size in (int(s) for s in args.sizes.split(",")):
        r = run_size(size, per_turn)
        print(f"{r['checkpoints']:>11} {r['replay_s']:>9.2f} {r['erase_s']:>8.2f} "
              f"{r['erase_s'] / r['replay_s']:>12.2f} {r['history_s']:>9.2f} {r['size0']:>10} {r['size1']:>9} "
              f"{r['rewritten']:>10} {r['vacuum_s']:>8.3f}", flush=True)


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
