"""Several worker processes on one store, SQLite and PostgreSQL: recording throughput and forget latency.

1, 2 and 4 worker processes each run a scripted ``create_agent`` agent (one
tool) on sessions of their own, all recording into one store: a SQLite home
(provenance, vault, leases shared; a file ``SqliteSaver`` per worker), then
one PostgreSQL database (unsee's store and leases; a ``PostgresSaver`` on a
pool per worker). Printed: agent steps per second over all workers, as a ratio
to one worker on SQLite in the same run; then the latency of a forget (B7 with
erasure) of a session while 4 workers are busy, against the same forget with
no worker running, per engine. Then the snapshots section: docker and local
snapshots without and with a push to the OCI registry (``--registry``, default
``$UNSEE_TEST_REGISTRY``), restores from the local copy and after a pull.
Then the call ledger: the median cost of one ``ledger.run`` of an external call
that fires (a new call id each time) and of one that is replayed (answered from
the ledger), on SQLite (``ledger.sqlite``) and on PostgreSQL (``unsee.calls``, on
the store's pool), with the ratio PG/SQLite. ``--only ledger`` runs that alone.

    python -m benchmarks.bench_workers [--seconds 8] [--pg URL] [--ledger-calls 400]
                                       [--only workers|snapshots|ledger]

``--pg``: a PostgreSQL URL of a database the bench may fill (default
``$UNSEE_TEST_PG_URL``, which ``source scripts/postgres-up.sh`` sets; each
measurement gets a fresh database there). Without one the PostgreSQL rows are skipped.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import tempfile
import time
from pathlib import Path

SECRET = "4417-2231"
STEPS_PER_RUN = 3


def _agent(home: Path, db: str, store: str | None = None):
    import sqlite3

    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage, ToolMessage
    from langgraph.checkpoint.sqlite import SqliteSaver

    from unsee import Unsee
    from unsee.plugins.model import ScriptedChatModel, call_id

    u = Unsee(home=home, store=store)

    @u.tool(effect="read")
    def lookup(ticket: str) -> str:
        """Look up a ticket."""
        return f"ticket {ticket}: card {SECRET} on file" if ticket == "T-SECRET" else f"ticket {ticket}: ok"

    def policy(messages, tools):
        if isinstance(messages[-1], ToolMessage):
            return AIMessage(content=f"Noted: {messages[-1].content}")
        return AIMessage(content="", tool_calls=[{"name": "lookup", "args": {"ticket": str(messages[-1].content)},
                                                  "id": call_id(messages), "type": "tool_call"}])

    if store:
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg.rows import dict_row
        from psycopg_pool import ConnectionPool

        saver = PostgresSaver(ConnectionPool(store, min_size=1, max_size=2, kwargs={
            "autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}))  # tables made by _setup
    else:
        saver = SqliteSaver(sqlite3.connect(home / db, check_same_thread=False))
    agent = create_agent(ScriptedChatModel(policy=policy), [lookup], middleware=[u.middleware()],
                         checkpointer=saver)
    return u, agent


def _setup(store: str | None) -> None:
    """Make LangGraph's tables once, before the workers start (concurrent setups collide in the catalog)."""
    if store:
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg.rows import dict_row

        with psycopg.connect(store, autocommit=True, row_factory=dict_row) as conn:
            PostgresSaver(conn).setup()


def _worker(home: str, wid: int, seconds: float, out, store: str | None = None) -> None:
    from langchain_core.messages import HumanMessage

    u, agent = _agent(Path(home), f"lg-{wid}.sqlite", store)
    runs, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        thread = f"w{wid}-{runs // 3}"  # three turns a session
        agent.invoke({"messages": [HumanMessage(f"T{runs}")]}, {"configurable": {"thread_id": thread}})
        runs += 1
    u.flush()
    out.put(runs * STEPS_PER_RUN / (time.perf_counter() - t0))
    u.close()


def throughput(home: Path, workers: int, seconds: float, store: str | None = None) -> float:
    _setup(store)
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    ps = [ctx.Process(target=_worker, args=(str(home), i, seconds, q, store)) for i in range(workers)]
    for p in ps:
        p.start()
    rates = [q.get(timeout=seconds + 120) for _ in ps]
    for p in ps:
        p.join()
    return sum(rates)


def forget_latency(home: Path, busy: int, seconds: float, store: str | None = None) -> float:
    from langchain_core.messages import HumanMessage

    from unsee import RevocationEvent

    _setup(store)
    u, agent = _agent(home, "lg-main.sqlite", store)
    thread = f"victim-{busy}"
    for text in ("T1", "T-SECRET", "T2"):
        agent.invoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": thread}})
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    ps = [ctx.Process(target=_worker, args=(str(home), 100 + busy * 10 + i, seconds, q, store))
          for i in range(busy)]
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


def ledger_costs(home: Path, calls: int, store: str | None = None) -> tuple[float, float]:
    """Median µs per ``Unsee.ledger.run`` of an external call: fired (a new call id each time,
    the function returns at once) and replayed (the same calls again, from the ledger)."""
    import statistics

    from unsee import Unsee

    u = Unsee(home=home, store=store)
    led = u.ledger
    fired, replayed = [], []
    for i in range(calls):
        t0 = time.perf_counter()
        out = led.run("bench", "refund", {"order": i}, lambda: {"ok": True}, occurrence=0)
        fired.append(time.perf_counter() - t0)
        assert out.disposition == "fired"
    for i in range(calls):
        t0 = time.perf_counter()
        out = led.run("bench", "refund", {"order": i}, lambda: {"ok": False}, occurrence=0)
        replayed.append(time.perf_counter() - t0)
        assert out.disposition == "replayed"
    u.close()
    return statistics.median(fired) * 1e6, statistics.median(replayed) * 1e6


def ledger_section(engines: list, calls: int) -> None:
    """The ledger rows, one per engine, then the ratio PostgreSQL/SQLite of the same run."""
    costs: dict[str, tuple[float, float]] = {}
    for engine, dbs in engines:
        store = dbs.new() if dbs else None
        with tempfile.TemporaryDirectory() as d:
            fire, replay = costs[engine] = ledger_costs(Path(d), calls, store)
        durable = "synchronous=FULL"  # (each commit fsync'd: the ledger's own setting)
        if store:  # the server's: a throw-away test cluster may run without fsync
            import psycopg

            with psycopg.connect(store) as conn:
                durable = "server fsync=" + conn.execute("SHOW fsync").fetchone()[0]
        print(f"{engine:10} ledger.run, external call: {fire:7.0f} µs fired, {replay:6.0f} µs replayed "
              f"(median of {calls}; {durable})", flush=True)
    if "postgresql" in costs:
        (pf, pr), (sf, sr) = costs["postgresql"], costs["sqlite"]
        print(f"{'ratio':10} ledger PostgreSQL/SQLite: fired {pf / sf:.2f}, replayed {pr / sr:.2f}", flush=True)


class _Databases:
    """Fresh databases on a PostgreSQL server (one per measurement), dropped at the end."""

    def __init__(self, admin: str):
        self.admin, self.made = admin, []

    def new(self) -> str:
        import uuid
        from urllib.parse import urlsplit

        import psycopg

        name = "bench_" + uuid.uuid4().hex[:10]
        with psycopg.connect(self.admin, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        self.made.append(name)
        return urlsplit(self.admin)._replace(path="/" + name).geturl()

    def drop(self) -> None:
        import psycopg

        with psycopg.connect(self.admin, autocommit=True) as conn:
            for name in self.made:
                conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def snapshots(registry: str | None, repeats: int = 7, size: int = 1 << 20) -> None:
    """Snapshots in the OCI registry: median ms of a snapshot (docker: commit; local: copy) and
    of a snapshot + push, of a restore from the local copy and of one after a pull (the local copy
    removed first), each with its ratio to the local-only operation. Every snapshot holds ``size``
    fresh random bytes (so every push has a new layer to send)."""
    import os
    import shutil
    import statistics
    import uuid

    from unsee.sandbox import open_environment
    from unsee.sandbox.docker_env import daemon_unavailable_reason, docker_client

    if not registry:
        print("snapshots section skipped: no registry (--registry, or `source scripts/registry-up.sh`)", flush=True)
        return

    def median_ms(fn, setup=lambda: None) -> float:
        times = []
        for _ in range(repeats):
            setup()
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1000)
        return statistics.median(times)

    def measure(backend: str, opts: dict, drop_local) -> None:
        repo = f"unsee/bench-{uuid.uuid4().hex[:8]}"
        plain = open_environment(backend, **opts)
        pushing = open_environment(backend, registry=registry, repository=repo, **opts)
        try:
            def snap(env):
                env.write_file("blob.bin", os.urandom(size))
                return env.snapshot()

            commit = median_ms(lambda: snap(plain))
            push = median_ms(lambda: snap(pushing))
            other = snap(pushing)
            s = snap(pushing)
            local = median_ms(lambda: pushing.restore(s), setup=lambda: pushing.restore(other))

            def drop():  # not timed: off the snapshot (a container runs on its image), then drop it
                pushing.restore(other)
                drop_local(pushing, s)

            after_pull = median_ms(lambda: pushing.restore(s), setup=drop)
        finally:
            plain.discard()
            pushing.discard()
        print(f"snapshots {backend:6} snapshot {commit:7.1f} ms, snapshot+push {push:7.1f} ms (ratio {push / commit:.2f}); "
              f"restore {local:7.1f} ms, restore after pull {after_pull:7.1f} ms (ratio {after_pull / local:.2f})",
              flush=True)

    if daemon_unavailable_reason() is None:
        def drop_image(env, s):
            for t in getattr(env, "_reaper", []):  # the container that ran on it is removed in the background
                t.join(timeout=30)
            docker_client().images.remove(s.ref, force=True)

        measure("docker", {"image": "unsee-sandbox:busybox"}, drop_image)
    else:
        print("snapshots docker rows skipped: no Docker daemon", flush=True)

    def drop_dir(env, s):
        shutil.rmtree(s.ref, ignore_errors=True)

    measure("local", {}, drop_dir)


def main(argv: list[str] | None = None) -> None:
    import os

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--pg", default=os.environ.get("UNSEE_TEST_PG_URL"))
    ap.add_argument("--registry", default=os.environ.get("UNSEE_TEST_REGISTRY"),
                    help="host:port of an OCI registry for the snapshots section ($UNSEE_TEST_REGISTRY)")
    ap.add_argument("--ledger-calls", type=int, default=400, help="calls per ledger measurement")
    ap.add_argument("--only", choices=["workers", "snapshots", "ledger"], help="run one section only")
    args = ap.parse_args(argv if argv is not None else [])
    engines = [("sqlite", None)] + ([("postgresql", _Databases(args.pg))] if args.pg else [])
    if not args.pg:
        print("PostgreSQL rows skipped: no server (--pg URL, or `source scripts/postgres-up.sh`)", flush=True)
    base = None
    try:
        for engine, dbs in engines:
            if args.only not in (None, "workers"):
                break
            with tempfile.TemporaryDirectory() as d:
                home = Path(d)
                for n in (1, 2, 4):
                    rate = throughput(home / f"t{n}", n, args.seconds, dbs.new() if dbs else None)
                    base = base or rate
                    print(f"{engine:10} {n} worker(s): {rate:8.1f} agent steps/s   ratio to 1 worker on SQLite: "
                          f"{rate / base:.2f}", flush=True)
                store = dbs.new() if dbs else None
                idle = forget_latency(home / "f", 0, args.seconds, store)
                busy = forget_latency(home / "f", 4, args.seconds, store)
                print(f"{engine:10} forget (B7 + erasure) latency: {idle:.2f} s idle, {busy:.2f} s with 4 busy "
                      f"workers (ratio {busy / idle:.2f})", flush=True)
        if args.only in (None, "ledger"):
            ledger_section(engines, args.ledger_calls)
    finally:
        for _, dbs in engines:
            if dbs:
                dbs.drop()
    if args.only in (None, "snapshots"):
        snapshots(args.registry)


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
