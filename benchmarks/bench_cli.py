"""How fast the ``unsee`` command starts: ``--help``, ``--version``, ``sessions`` and ``graph``.

Each command is run as a fresh process (the installed ``unsee`` script, next to
this interpreter) ``--runs`` times, interleaved with the baseline, a bare
``python -c pass``, so machine noise hits both alike; printed are the medians,
the target (``--help`` <= 0.4 s, ``sessions`` / ``graph`` <= 0.8 s)
and each command's ratio to the interpreter's own start. ``sessions`` and
``graph`` read a home recorded by ``unsee demo --model scripted`` in a temporary
directory. ``python -X importtime -m unsee.cli --help`` shows where the rest goes.

    python -m benchmarks.bench_cli [--runs 7]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGETS = {"--help": 0.4, "--version": 0.4, "sessions": 0.8, "graph demo": 0.8}


def _time(cmd: list[str], cwd: str) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args(argv if argv is not None else [])
    unsee = str(Path(sys.executable).with_name("unsee"))
    with tempfile.TemporaryDirectory() as home:
        subprocess.run([unsee, "demo", "--model", "scripted"], cwd=home, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=True)
        times: dict[str, list[float]] = {"python -c pass": [], **{c: [] for c in TARGETS}}
        for _ in range(args.runs):
            times["python -c pass"].append(_time([sys.executable, "-c", "pass"], home))
            for c in TARGETS:
                times[c].append(_time([unsee, *c.split()], home))
    base = statistics.median(times["python -c pass"])
    print(f"{'command':<22}{'median s':>10}{'target s':>10}{'x python':>10}")
    print(f"{'python -c pass':<22}{base:>10.3f}{'-':>10}{1:>10.1f}")
    for c, target in TARGETS.items():
        m = statistics.median(times[c])
        print(f"{'unsee ' + c:<22}{m:>10.3f}{target:>10.1f}{m / base:>10.1f}")


if __name__ == "__main__":
    main(sys.argv[1:])
