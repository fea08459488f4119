"""Several worker processes on one unsee home (SQLite): recording throughput and forget latency.

1, 2 and 4 worker processes each run a scripted ``create_agent`` agent (one
tool, a file ``SqliteSaver`` per worker) on sessions of their own, all
recording into one home (provenance, vault, leases shared). Printed: agent
steps per second over all workers, as a ratio to one worker in the same run;
then the latency of a forget (B7 with erasure) of a session while 4 workers
are busy, against the same forget with no worker running.

    python -m benchmarks.bench_workers [--seconds 8]

PostgreSQL (several machines) is not measured: unsee has no PostgreSQL store
yet (docs/deployment.md).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import tempfile
import time
from pathlib import Path

SECRET = "4417-2231"
STEPS_PER_RUN = 3


def _agent(home: Path, db: str):
    import sqlite3

    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage, ToolMessage
    from langgraph.checkpoint.sqlite import SqliteSaver

    from unsee import Unsee
    from unsee.plugins.eval import ScriptedChatModel, call_id

    u = Unsee(home=home)

    @u.tool(effect="read")
    def lookup(ticket: str) -> str:
        """Look up a ticket."""
        return f"ticket {ticket}: card {SECRET} on file" if ticket == "T-SECRET" else f"ticket {ticket}: ok"

    def policy(messages, tools):
        if isinstance(messages[-1], ToolMessage):
            return AIMessage(content=f"Noted: {messages[-1].content}")
        return AIMessage(content="", tool_calls=[{"name": "lookup", "args": {"ticket": str(messages[-1].content)},
                                                  "id": call_id(messages), "type": "tool_call"}])

    conn = sqlite3.connect(home / db, check_same_thread=False)
    agent = create_agent(ScriptedChatModel(policy=policy), [lookup], middleware=[u.middleware()],
                         checkpointer=SqliteSaver(conn))
    return u, agent


def _worker(home: str, wid: int, seconds: float, out) -> None:
    from langchain_core.messages import HumanMessage

    u, agent = _agent(Path(home), f"lg-{wid}.sqlite")
    runs, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        thread = f"w{wid}-{runs // 3}"  # three turns a session
        agent.invoke({"messages": [HumanMessage(f"T{runs}")]}, {"configurable": {"thread_id": thread}})
        runs += 1
    u.flush()
    out.put(runs * STEPS_PER_RUN / (time.perf_counter() - t0))
    u.close()


def throughput(home: Path, workers: int, seconds: float) -> float:
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    ps = [ctx.Process(target=_worker, args=(str(home), i, seconds, q)) for i in range(workers)]
    for p in ps:
        p.start()
    rates = [q.get(timeout=seconds + 120) for _ in ps]
    for p in ps:
        p.join()
    return sum(rates)


def forget_latency(home: Path, busy: int, seconds: float) -> float:
    from langchain_core.messages import HumanMessage

    from unsee import RevocationEvent

    u, agent = _agent(home, "lg-main.sqlite")
    thread = f"victim-{busy}"
    for text in ("T1", "T-SECRET", "T2"):
        agent.invoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": thread}})
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    ps = [ctx.Process(target=_worker, args=(str(home), 100 + busy * 10 + i, seconds, q)) for i in range(busy)]
    for p in ps:
        p.start()
    if busy:
        time.sleep(min(3.0, seconds / 2))  # the workers are running
    t0 = time.perf_counter()
    report = u.forget(thread, RevocationEvent(target=SECRET))
    took = time.perf_counter() - t0
    assert report.committed
    for _ in ps:
        q.get(timeout=seconds + 120)
    for p in ps:
        p.join()
    u.close()
    return took


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=8.0)
    args = ap.parse_args(argv if argv is not None else [])
    with tempfile.TemporaryDirectory() as d:
        home = Path(d)
        base = None
        for n in (1, 2, 4):
            rate = throughput(home, n, args.seconds)
            base = base or rate
            print(f"{n} worker(s): {rate:8.1f} agent steps/s   ratio to 1 worker: {rate / base:.2f}", flush=True)
        idle = forget_latency(home, 0, args.seconds)
        busy = forget_latency(home, 4, args.seconds)
        print(f"forget (B7 + erasure) latency: {idle:.2f} s idle, {busy:.2f} s with 4 busy workers "
              f"(ratio {busy / idle:.2f})", flush=True)


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
