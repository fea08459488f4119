"""A late target on a DeltaChannel thread costs the suffix, not the session (issue 29).

The erasure's counterpart of Corollary 1: bench_erasure's scripted support
agent whose ``messages`` channel is LangGraph's ``DeltaChannel`` (beta; the
channel's default snapshot frequency), on a file ``SqliteSaver``, talks for N
turns; the target enters in a tool return three turns before the end. Then
``u.forget`` (B7, ``erase=False``: the replay) and ``u.erase`` (every route:
the history rewritten in place, the records, the byte-level audits before and
after) are timed, each in a fresh process state (the forget's graph read
builds the session's graph from the whole record, as a CLI user's would).

Printed per N: checkpoints, the saver file's size, the size of unsee's own
record of the session (its other SQLite files: the audits read them too),
replay, erasure, their sum and the history route's share; then the ratio of the largest N's forget +
erase to the smallest's (target: <= 2 from 100 to 1 000 turns).

    python -m benchmarks.bench_delta [--turns 100,1000] [--repeat 1]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.bench_erasure import SECRET, _agent, _size, delta_state

SUFFIX = 3


def run_size(turns: int, root: Path) -> dict:
    from langchain_core.messages import HumanMessage

    from unsee import RevocationEvent

    home = root / f"d{turns}"
    home.mkdir(parents=True)
    u, agent, conn = _agent(home, delta_state())
    cfg = {"configurable": {"thread_id": "s"}}
    tau = turns - SUFFIX
    for i in range(turns):
        agent.invoke({"messages": [HumanMessage(f"look up T-{'SECRET' if i == tau else i}")]}, cfg)
    n = sum(1 for _ in agent.checkpointer.list(cfg))
    size0 = _size(home / "langgraph.sqlite")
    # unsee's own record of the session (every other SQLite file of the home): the audits read it too
    record = sum(_size(p) for p in home.glob("*.sqlite") if p.name != "langgraph.sqlite")
    u.close()
    conn.close()
    u, agent, conn = _agent(home, delta_state())  # a fresh process state: nothing of the session cached
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
    return {"turns": turns, "checkpoints": n, "size0": size0, "record": record, "replay_s": replay, "erase_s": erase,
            "history_s": res.timings.get("langgraph.checkpoints", 0.0), "transitions": report.transitions_replayed}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", default="100,1000")
    ap.add_argument("--repeat", type=int, default=1, help="sessions per size (medians are printed)")
    args = ap.parse_args(argv if argv is not None else [])
    sizes = [int(x) for x in args.turns.split(",")]
    runs: dict[int, list[dict]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeat):
            for n in sizes:
                runs.setdefault(n, []).append(run_size(n, Path(tmp) / f"r{r}"))
    med = {n: {k: statistics.median(x[k] for x in v) for k in v[0]} for n, v in runs.items()}
    print(f"DeltaChannel SqliteSaver, target {SUFFIX} turns before the end; medians of {args.repeat}")
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


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
