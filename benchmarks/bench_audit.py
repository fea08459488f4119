"""Erasure audit throughput vs a plain byte search of the same files.

One full-state SqliteSaver thread of about 1 000 checkpoints (bench_erasure's
scripted support agent; the target enters in a tool return in the middle turn),
then timed: one audit of the checkpoint route (its files' bytes in the child
process, every form; its rows judged by ``row_audit``), its two halves in
process, the full decode the value level did before, and one ``u.audit`` of
every route. Each is printed in MB/s of the route files (the checkpoint
database + -wal/-shm) beside a plain ``bytes.find`` of the target's UTF-8 form
over the same files (the physical reference) and the ratio to it.

    python -m benchmarks.bench_audit [--checkpoints 1000] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import tempfile
import time
from pathlib import Path

from benchmarks.bench_erasure import SECRET, _agent


def _find_all(paths: list[Path], needle: bytes) -> tuple[int, float]:
    """(copies, seconds) of ``needle`` in ``paths`` read whole: the plain byte search."""
    t0 = time.perf_counter()
    n = 0
    for p in paths:
        data = p.read_bytes()
        i = data.find(needle)
        while i >= 0:
            n += 1
            i = data.find(needle, i + len(needle))
    return n, time.perf_counter() - t0


def build(home: Path, checkpoints: int):
    """(u, agent, conn, checkpoints written): a thread "s" of about ``checkpoints`` checkpoints."""
    from langchain_core.messages import HumanMessage

    u, agent, conn = _agent(home)
    cfg = {"configurable": {"thread_id": "s"}}
    turns = max(2, round(checkpoints / 7))  # a turn writes about 7 checkpoints (measured)
    for i in range(turns):
        agent.invoke({"messages": [HumanMessage(f"look up T-{'SECRET' if i == turns // 2 else i}")]}, cfg)
    return u, agent, conn, len(list(agent.checkpointer.list(cfg)))


def _route_audit(agent, home: Path, target: str):
    """(seconds, RouteAudit): one audit of the checkpoint route alone: its files' bytes read in
    the child process (``prefetch_byte_scans``, as the eraser does) and its rows judged."""
    from unsee.plugins.erasure.forms import target_forms
    from unsee.plugins.erasure.routes import Scope, prefetch_byte_scans
    from unsee.plugins.erasure.routes_langgraph import CheckpointHistoryRoute

    route = CheckpointHistoryRoute(agent, None, home / "erasures")  # (records: used by erase only)
    scope = Scope("s", target, target_forms(target))
    t0 = time.perf_counter()
    prefetch_byte_scans(scope, [route])
    out = route.audit(scope)
    return time.perf_counter() - t0, out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoints", type=int, default=1000)
    ap.add_argument("--profile", action="store_true", help="print the whole audit's top functions (cProfile)")
    args = ap.parse_args(argv if argv is not None else [])
    from unsee.plugins.erasure import history, row_audit
    from unsee.plugins.erasure.forms import holds_target, target_forms
    from unsee.plugins.erasure.scan import scan_file, sqlite_files

    with tempfile.TemporaryDirectory() as d:
        home = Path(d)
        t0 = time.perf_counter()
        u, agent, conn, n = build(home, args.checkpoints)
        built = time.perf_counter() - t0
        files = sqlite_files(home / "langgraph.sqlite")
        size = sum(p.stat().st_size for p in files)
        u.audit("s", SECRET, agent=agent)  # warm: imports, page cache
        route_s, route = _route_audit(agent, home, SECRET)
        forms = target_forms(SECRET)
        t0 = time.perf_counter()
        scanned = sum(scan_file(p, forms).copies for p in files)
        scan_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        rows = row_audit.history_rows_holding(agent.checkpointer, "s", SECRET, forms)
        rows_s = time.perf_counter() - t0
        prof = cProfile.Profile() if args.profile else None
        t0 = time.perf_counter()
        if prof:
            prof.enable()
        u.audit("s", SECRET, agent=agent)
        if prof:
            prof.disable()
        whole_s = time.perf_counter() - t0
        found, plain = _find_all(files, SECRET.encode())
        t0 = time.perf_counter()
        decoded = history.history_holding(agent.checkpointer, "s",
                                          lambda v: holds_target(history.value_text(v), SECRET))
        decode_s = time.perf_counter() - t0
        assert decoded == rows, (decoded, rows)
        u.close()
        conn.close()
    mb = size / 1e6
    print(f"{n} checkpoints ({built:.1f} s to build), route files {mb:.1f} MB; "
          f"{route.notes[0]}; byte copies {sum(route.byte_copies.values())} (plain find: {found})")
    rows_fmt = [("plain bytes.find of the UTF-8 form (reference)", plain),
                ("checkpoint route audit (child byte scan + rows)", route_s),
                ("  byte level in process (scan_file, all forms)", scan_s),
                ("  value level from rows (row_audit)", rows_s),
                ("  value level by full decode (before)", decode_s),
                ("u.audit, every route", whole_s)]
    print(f"{'what':<50} {'s':>7} {'MB/s':>7} {'x find':>7}")
    for what, s in rows_fmt:
        print(f"{what:<50} {s:>7.3f} {mb / max(s, 1e-9):>7.0f} {s / max(plain, 1e-9):>7.1f}", flush=True)
    assert scanned == sum(route.byte_copies.values())
    if prof:
        pstats.Stats(prof).sort_stats("cumulative").print_stats(25)


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
