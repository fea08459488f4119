"""Run every ``benchmarks/bench_*.py`` module's ``main()`` in turn.

``python -m benchmarks [bench_ifc ...]`` runs them all (or the ones named,
with or without the ``benchmarks.`` prefix) and prints a header per module; a module that fails to
import or whose ``main()`` raises is reported and the others still run.
The exit status is 1 when any module failed.
"""

from __future__ import annotations

import importlib
import sys
import time
import traceback
from pathlib import Path


def modules() -> list[str]:
    here = Path(__file__).resolve().parent
    return sorted(f"{__package__ or 'benchmarks'}.{p.stem}" for p in here.glob("bench_*.py"))


def _qualified(name: str) -> str:
    """``bench_ifc`` or ``benchmarks.bench_ifc`` -> the module's full name."""
    package = __package__ or "benchmarks"
    return name if "." in name else f"{package}.{name}"


def run_all(names: list[str] | None = None) -> int:
    failed = []
    for name in [_qualified(n) for n in names] if names else modules():
        print(f"\n=== {name} " + "=" * max(0, 60 - len(name)), flush=True)
        t0 = time.perf_counter()
        try:
            mod = importlib.import_module(name)
            entry = getattr(mod, "main", None)
            if entry is None:
                raise AttributeError(f"{name} has no main()")
            entry()
        except SystemExit as exc:  # a main() that exits is done; non-zero counts as failure
            if exc.code not in (None, 0):
                failed.append(name)
                print(f"!!! {name} exited with status {exc.code}", flush=True)
        except Exception as exc:  # one broken benchmark must not stop the others
            failed.append(name)
            print(f"!!! {name} failed: {type(exc).__name__}: {exc}", flush=True)
            traceback.print_exc(limit=5, file=sys.stdout)
        print(f"--- {name} done in {time.perf_counter() - t0:.1f} s", flush=True)
    if failed:
        print(f"\n{len(failed)} benchmark module(s) failed: {', '.join(failed)}")
    return 1 if failed else 0


def main() -> int:
    return run_all(sys.argv[1:] or None)


if __name__ == "__main__":
    sys.exit(main())
