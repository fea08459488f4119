"""A late target on a DeltaChannel thread costs the suffix, not the session.

The erasure's counterpart of Corollary 1: bench_erasure's scripted support
agent whose ``messages`` channel is LangGraph's ``DeltaChannel`` (beta; the
channel's default snapshot frequency), on a file ``SqliteSaver``, talks for N
turns; the target enters in a tool return three turns before the end. Then
``u.forget`` (B7, ``erase=False``: the replay) and ``u.erase`` (every route:
the history rewritten in place, the records, the byte-level audits before and
after) are timed, each in a fresh process state (the forget's graph read
builds the session's graph from the whole record, as a CLI user's would).
A short session is forgotten and erased first, untimed, so that the smallest
N does not pay the process's first forget (imports, caches).

Printed per N: checkpoints, the saver file's size, the size of unsee's own
record of the session (its other SQLite files: the audits read them too),
replay, erasure, their sum and the history route's share; then the ratio of the largest N's forget +
erase to the smallest's (target: <= 2 from 100 to 1 000 turns).

unsee's part, against LangGraph's floor of the same run: beside each forget, a
bare twin of the same agent (no unsee, its own file ``SqliteSaver``, the same
session) is forked before the suffix with ``get_state`` / ``update_state``, the
three turns re-run and the counterfactual written back as the thread's state
(``bench_late_target``'s floor, on this bench's agent and saver). The erasure
has no LangGraph floor (LangGraph has nothing that rewrites a thread's history
in place), so unsee's part is the forget's (B7 - floor) plus the whole erasure;
its ratio, largest N over the smallest, is printed against 2x.

Record size, three agents (``--agents``), each recorded for N turns and
measured after ``u.flush()``, before any forget:

- ``delta``: the DeltaChannel agent above;
- ``full``: the same agent with ``create_agent``'s own full-state ``messages``
  channel (``add_messages``: every checkpoint the whole list);
- ``compact``: ``full`` with LangChain's ``SummarizationMiddleware`` (a
  deterministic extractive summarizer, no model call) triggered at
  ``4 * COMPACT_EVERY + 1`` messages keeping the last one: a compaction every
  ``COMPACT_EVERY`` (20) turns; the count that fired is printed.

Per agent and N: LangGraph's file and unsee's record (the home's SQLite files
other than ``langgraph.sqlite``), each the database file plus its WAL (the
definition above), and record / LangGraph; beside them the bytes in use
(``dbstat``'s pages: what the files hold once checkpointed and vacuumed; the
WAL of a file written to lately can be megabytes of frames the database does
not keep). Then per agent the record at the largest N over the smallest's
(target <= 12x, every agent) and, for ``delta``, record / LangGraph at the
largest N (target <= 1.0x); both ratios are printed for the files and for the
bytes in use. Then the record by table (bytes in use per table, its indexes
included, the bytes of its cells, its rows; ``dbstat``, else the columns'
``length()``) so one can see what dominates.

Only the ``delta`` agent is forgotten; ``--sizes-only`` skips its forget and
erasure too (sizes alone).

    python -m benchmarks.bench_delta [--turns 100,1000] [--repeat 1] [--agents delta,full,compact] [--sizes-only]
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.bench_erasure import SECRET, _agent, _size, delta_state, lookup_text, support_agent, support_policy

SUFFIX = 3
TARGET = 2.0
SIZE_TARGET = 1.0  # record / LangGraph's file at the largest N, DeltaChannel
GROWTH_TARGET = 12.0  # record at the largest N / the smallest, every agent
COMPACT_EVERY = 20  # turns between two compactions of the ``compact`` agent
AGENTS = {"delta": "DeltaChannel", "full": "full-state", "compact": f"compaction/{COMPACT_EVERY}"}


def _cfg(thread: str = "s") -> dict:
    return {"configurable": {"thread_id": thread}}


def _text(i: int, tau: int) -> str:
    return f"look up T-{'SECRET' if i == tau else i}"


def _schema(kind: str) -> type | None:
    return delta_state() if kind == "delta" else None


def _summarizer(counter: list[int]):
    """A ``SummarizationMiddleware`` compacting every ``COMPACT_EVERY`` turns; ``counter[0]`` counts them."""
    from langchain.agents.middleware import SummarizationMiddleware

    from unsee.plugins.model import ScriptedChatModel

    def summarize(messages) -> str:
        counter[0] += 1
        return " / ".join(str(m.content)[:80] for m in messages)

    # a turn is 4 messages (user, tool call, tool return, reply); the check runs before each model call,
    # so at 4 * COMPACT_EVERY + 1 the first call of every COMPACT_EVERY-th turn compacts to [summary, user]
    return SummarizationMiddleware(ScriptedChatModel(policy=support_policy),
                                   trigger=("messages", 4 * COMPACT_EVERY + 1), keep=("messages", 1),
                                   summarizer=summarize)


def _open(home: Path, kind: str, counter: list[int] | None = None):
    middleware = (_summarizer(counter if counter is not None else [0]),) if kind == "compact" else ()
    return _agent(home, _schema(kind), middleware)


# -- sizes ---------------------------------------------------------------------------------------
def _tables(path: Path) -> dict[str, tuple[int, int, int]]:
    """{table: (bytes in use, payload bytes, rows)} of one SQLite file, each table with its indexes:
    ``dbstat``'s pages and the bytes of the cells on them, where SQLite has ``dbstat``; else both the
    sum of ``length()`` of every column of every row."""
    out: dict[str, tuple[int, int, int]] = {}
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_schema WHERE type='table'")]
        rows = {n: conn.execute(f'SELECT COUNT(*) FROM "{n}"').fetchone()[0] for n in names}
        try:
            sizes = {t: (b, pay) for t, b, pay in conn.execute(
                "SELECT COALESCE(s.tbl_name, d.name), SUM(d.pgsize), SUM(d.payload) FROM dbstat d"
                " LEFT JOIN sqlite_schema s ON s.name = d.name GROUP BY 1")}
        except sqlite3.OperationalError:  # no dbstat in this SQLite build: the values' own lengths
            sizes = {}
            for n in names:
                cols = [r[1] for r in conn.execute(f'PRAGMA table_info("{n}")')]
                expr = " + ".join(f'COALESCE(LENGTH("{c}"), 0)' for c in cols) or "0"
                b = conn.execute(f'SELECT COALESCE(SUM({expr}), 0) FROM "{n}"').fetchone()[0]
                sizes[n] = (b, b)
        for n in set(names) | set(sizes):
            b, pay = sizes.get(n, (0, 0))
            out[n] = (int(b or 0), int(pay or 0), rows.get(n, 0))
    finally:
        conn.close()
    return out


def measure(home: Path) -> dict:
    """The home's SQLite files: LangGraph's and unsee's record, on disk (file + WAL) and in use."""
    lg = home / "langgraph.sqlite"
    record_files = sorted(p for p in home.glob("*.sqlite") if p.name != "langgraph.sqlite")
    tables = {f"{p.stem}.{t}": v for p in record_files for t, v in _tables(p).items()}
    return {"size0": _size(lg), "record": sum(_size(p) for p in record_files),
            "lg_used": sum(v[0] for v in _tables(lg).values()), "record_used": sum(v[0] for v in tables.values()),
            "tables": tables}


# -- LangGraph's floor ---------------------------------------------------------------------------
def _bare(path: Path, kind: str):
    """(agent, conn): the same agent without unsee, on its own file ``SqliteSaver``."""
    from langchain_core.tools import tool

    @tool
    def lookup(ticket: str) -> str:
        """Look up a ticket."""
        return lookup_text(ticket)

    return support_agent(path, lookup, _schema(kind))


def floor(turns: int, root: Path, kind: str = "delta") -> float:
    """LangGraph alone, the same session: fork before the suffix, re-run it, write the counterfactual
    back as the thread's state (as a forget's commit does), in a fresh process state; seconds."""
    from langchain_core.messages import HumanMessage, RemoveMessage
    from langgraph.graph.message import REMOVE_ALL_MESSAGES

    path = root / f"bare{turns}.sqlite"
    tau = turns - SUFFIX
    agent, conn = _bare(path, kind)
    fork = None
    for i in range(turns):
        if i == tau:
            fork = agent.get_state(_cfg()).config
        agent.invoke({"messages": [HumanMessage(_text(i, tau))]}, _cfg())
    conn.close()
    agent, conn = _bare(path, kind)  # nothing of the session cached, as for the forget
    try:
        t0 = time.perf_counter()
        values = agent.get_state(fork).values
        agent.update_state(_cfg("s-replay"), values)
        for i in range(tau, turns):
            agent.invoke({"messages": [HumanMessage(_text(i, -1))]}, _cfg("s-replay"))
        final = agent.get_state(_cfg("s-replay")).values["messages"]
        agent.update_state(_cfg(), {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *final]})
        return time.perf_counter() - t0
    finally:
        conn.close()


# -- one session ---------------------------------------------------------------------------------
def run_size(turns: int, root: Path, kind: str = "delta", forget: bool = True) -> dict:
    from langchain_core.messages import HumanMessage

    from unsee import RevocationEvent

    home = root / f"{kind}{turns}"
    home.mkdir(parents=True)
    compactions = [0]
    u, agent, conn = _open(home, kind, compactions)
    cfg = _cfg()
    tau = turns - SUFFIX
    for i in range(turns):
        agent.invoke({"messages": [HumanMessage(_text(i, tau))]}, cfg)
    n = sum(1 for _ in agent.checkpointer.list(cfg))
    u.flush()  # the store writer's queue written: the record is the session's whole record
    out = {"turns": turns, "checkpoints": n, "compactions": compactions[0], **measure(home)}
    u.close()
    conn.close()
    if not forget:
        return out
    u, agent, conn = _open(home, kind)  # a fresh process state: nothing of the session cached
    event = RevocationEvent(target=SECRET)
    try:
        t0 = time.perf_counter()
        report = u.forget("s", event, agent=agent, erase=False)
        replay = time.perf_counter() - t0
        t0 = time.perf_counter()
        res = u.erase("s", event, agent=agent)
        erase = time.perf_counter() - t0
        assert res.clean, f"erasure left copies: {res.after}"
        assert SECRET not in repr(agent.get_state(cfg).values)
    finally:
        u.close()
        conn.close()
    return {**out, "replay_s": replay, "erase_s": erase, "floor_s": floor(turns, root, kind),
            "history_s": res.timings.get("langgraph.checkpoints", 0.0), "transitions": report.transitions_replayed}


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def _ratio(a: float, b: float) -> float:
    return a / b if b > 0 else float("inf")


def _x(a: float, b: float) -> str:
    return "-" if not b else f"{a / b:.1f}x"


def report_forget(sizes: list[int], med: dict, runs: dict, repeat: int) -> None:
    print(f"DeltaChannel SqliteSaver, target {SUFFIX} turns before the end; medians of {repeat}")
    print(f"{'turns':>6} {'checkpoints':>11} {'db bytes':>11} {'record bytes':>12} {'replay s':>9} {'erase s':>8} {'total s':>8} "
          f"{'history s':>9} {'transitions':>11}")
    for n in sizes:
        m = med[n]
        print(f"{n:>6} {m['checkpoints']:>11.0f} {m['size0']:>11.0f} {m['record']:>12.0f} {m['replay_s']:>9.2f} {m['erase_s']:>8.2f} "
              f"{m['replay_s'] + m['erase_s']:>8.2f} {m['history_s']:>9.2f} {m['transitions']:>11.0f}")
    lo, hi = med[sizes[0]], med[sizes[-1]]
    ratio = (hi["replay_s"] + hi["erase_s"]) / (lo["replay_s"] + lo["erase_s"])
    print(f"target: forget + erase within 2x from {sizes[0]} to {sizes[-1]} turns: {ratio:.2f}x "
          f"({'PASS' if ratio <= 2 else 'FAIL'}); erase alone {hi['erase_s'] / lo['erase_s']:.2f}x, "
          f"replay alone {hi['replay_s'] / lo['replay_s']:.2f}x")
    # unsee's part: the forget's B7 minus LangGraph's floor of the same round, plus the erasure (no floor)
    part = {n: statistics.median(r["replay_s"] - r["floor_s"] + r["erase_s"] for r in runs[n]) for n in sizes}
    b7_part = {n: statistics.median(r["replay_s"] - r["floor_s"] for r in runs[n]) for n in sizes}
    print(f"unsee's part = (B7 - LangGraph floor) + erase (LangGraph has no floor for the erasure: all of it "
          f"counts as unsee's); medians of {repeat}, seconds")
    print(f"{'turns':>6} {'B7 s':>8} {'floor s':>8} {'B7-floor s':>10} {'erase s':>8} {'unsee part s':>12}")
    for n in sizes:
        m = med[n]
        print(f"{n:>6} {m['replay_s']:>8.2f} {m['floor_s']:>8.2f} {b7_part[n]:>10.2f} {m['erase_s']:>8.2f} "
              f"{part[n]:>12.2f}")
    r = _ratio(part[sizes[-1]], part[sizes[0]])
    print(f"target: unsee's part of forget + erase within {TARGET:g}x from {sizes[0]} to {sizes[-1]} turns: "
          f"{r:.2f}x ({_verdict(r <= TARGET)}); floor alone {_ratio(hi['floor_s'], lo['floor_s']):.2f}x, "
          f"B7 - floor alone {_ratio(b7_part[sizes[-1]], b7_part[sizes[0]]):.2f}x")


def report_sizes(sizes: list[int], meds: dict[str, dict], repeat: int) -> None:
    lo_n, hi_n = sizes[0], sizes[-1]
    print(f"\nRecord size after recording the session (u.flush(), before any forget); medians of {repeat}. "
          f"'file' = the database + its WAL (unsee's record: every SQLite file of the home but langgraph.sqlite); "
          f"'in use' = dbstat's pages")
    print(f"{'agent':>14} {'turns':>6} {'checkpoints':>11} {'LangGraph file':>14} {'record file':>12} "
          f"{'record/LG':>9} {'LG in use':>11} {'record in use':>13} {'record/LG':>9} {'compactions':>11}")
    for kind, med in meds.items():
        for n in sizes:
            m = med[n]
            comp = f"{m['compactions']:.0f}" if kind == "compact" else "-"
            print(f"{AGENTS[kind]:>14} {n:>6} {m['checkpoints']:>11.0f} {m['size0']:>14.0f} {m['record']:>12.0f} "
                  f"{_ratio(m['record'], m['size0']):>8.2f}x {m['lg_used']:>11.0f} {m['record_used']:>13.0f} "
                  f"{_ratio(m['record_used'], m['lg_used']):>8.2f}x {comp:>11}")
    print("targets (ratios within this run; file | in use):")
    if "delta" in meds:
        m = meds["delta"][hi_n]
        r, ru = _ratio(m["record"], m["size0"]), _ratio(m["record_used"], m["lg_used"])
        print(f"  DeltaChannel, record <= {SIZE_TARGET:g}x LangGraph's file at {hi_n} turns:  "
              f"file {r:.2f}x {_verdict(r <= SIZE_TARGET)}  |  in use {ru:.2f}x {_verdict(ru <= SIZE_TARGET)}")
    for kind, med in meds.items():
        lo, hi = med[lo_n], med[hi_n]
        r, ru = _ratio(hi["record"], lo["record"]), _ratio(hi["record_used"], lo["record_used"])
        lg, lgu = _ratio(hi["size0"], lo["size0"]), _ratio(hi["lg_used"], lo["lg_used"])
        print(f"  {AGENTS[kind]}, record {hi_n}/{lo_n} turns <= {GROWTH_TARGET:g}x:  file {r:.2f}x "
              f"{_verdict(r <= GROWTH_TARGET)}  |  in use {ru:.2f}x {_verdict(ru <= GROWTH_TARGET)}  "
              f"(LangGraph's file {lg:.2f}x, in use {lgu:.2f}x)")
    for kind, med in meds.items():
        lo, hi = med[lo_n], med[hi_n]
        total = hi["record_used"] or 1
        names = sorted(set(lo["tables"]) | set(hi["tables"]), key=lambda t: -hi["tables"].get(t, (0, 0, 0))[0])
        big = [t for t in names if hi["tables"].get(t, (0, 0, 0))[0] >= 0.01 * total]
        print(f"\n{AGENTS[kind]}: the record by table, largest first (in use: dbstat's pages, the table's "
              f"indexes included; payload: the bytes of its cells; tables under 1 % at {hi_n} turns together)")
        print(f"{'table':>28} {'in use':>11} {'payload':>11} {'rows':>7} {'in use':>11} {'payload':>11} {'rows':>7} "
              f"{'in use':>7} {'payload':>7} {'share':>6}")
        print(f"{'':>28} {f'--- {lo_n} turns':>31} {f'--- {hi_n} turns':>31} {f'--- {hi_n}/{lo_n}':>15}")
        small = [t for t in names if t not in big]
        lines = [(t, lo["tables"].get(t, (0, 0, 0)), hi["tables"].get(t, (0, 0, 0))) for t in big]
        if small:
            lines.append((f"({len(small)} other tables)",
                          tuple(sum(lo["tables"].get(t, (0, 0, 0))[i] for t in small) for i in range(3)),
                          tuple(sum(hi["tables"].get(t, (0, 0, 0))[i] for t in small) for i in range(3))))
        for t, (b0, p0, r0), (b1, p1, r1) in lines:
            print(f"{t:>28} {b0:>11} {p0:>11} {r0:>7} {b1:>11} {p1:>11} {r1:>7} {_x(b1, b0):>7} "
                  f"{_x(p1, p0):>7} {b1 / total:>6.1%}")


def _median_runs(runs: list[dict]) -> dict:
    med = {k: statistics.median(x[k] for x in runs) for k in runs[0] if k != "tables"}
    tables = {t for x in runs for t in x["tables"]}
    med["tables"] = {t: tuple(int(statistics.median(x["tables"].get(t, (0, 0, 0))[i] for x in runs))
                              for i in range(3)) for t in tables}
    return med


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", default="100,1000")
    ap.add_argument("--repeat", type=int, default=1, help="sessions per size (medians are printed)")
    ap.add_argument("--agents", default="delta,full,compact",
                    help="delta (DeltaChannel), full (full-state), compact (full-state, a compaction every "
                         f"{COMPACT_EVERY} turns); only delta is forgotten")
    ap.add_argument("--sizes-only", action="store_true", help="no forget nor erasure: the record sizes only")
    args = ap.parse_args(argv if argv is not None else [])
    sizes = [int(x) for x in args.turns.split(",")]
    kinds = [k for k in args.agents.split(",") if k]
    for k in kinds:
        if k not in AGENTS:
            ap.error(f"unknown agent {k!r} (delta, full, compact)")
    if min(sizes) <= SUFFIX:
        ap.error(f"every size must be more than {SUFFIX} turns")
    runs: dict[str, dict[int, list[dict]]] = {k: {} for k in kinds}
    with tempfile.TemporaryDirectory(prefix="unsee-bench-delta-") as tmp:
        if "delta" in kinds and not args.sizes_only:  # untimed: the first forget's imports and caches
            run_size(SUFFIX + 2, Path(tmp) / "warm", "delta", forget=True)
        for r in range(args.repeat):
            for k in kinds:
                for n in sizes:
                    forget = k == "delta" and not args.sizes_only
                    runs[k].setdefault(n, []).append(run_size(n, Path(tmp) / f"r{r}", k, forget=forget))
    meds = {k: {n: _median_runs(v) for n, v in runs[k].items()} for k in kinds}
    if "delta" in kinds and not args.sizes_only:
        report_forget(sizes, meds["delta"], runs["delta"], args.repeat)
    report_sizes(sizes, meds, args.repeat)


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
