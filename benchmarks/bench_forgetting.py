"""Recomputed tokens of forgetting: B7 against B5 and B5' on the ``support`` and ``windowed`` suites,
and B7's cost against the suffix length.

Episodes (scripted stand-in; tau after 0-8 filler turns, 0-6 filler turns
after its consequences, or the first turn when the target is a memory item)
are forgotten with B5, B5' and B7 (``unsee.eval.forgetting``: tokens
counted as a prefix KV cache spends them). ``support`` is a conversational
agent: every turn after tau reads a context derived from the target, so B7
saves the prefix only, as B5' does. ``windowed`` runs the same episodes behind
a one-turn context window: later turns are independent of the target and B7
re-materialises them, which is what provenance buys over B5'. Printed per
suite: recomputed tokens (prefill + decode) B7/B5 and B7/B5' ("Forgetting Without
Restarting: Execution-State Unlearning for Stateful LLM Agents": 133/1235 = 0.108 and
about 1/1.5), then a least-squares line of B7's tokens against the number of turns after
tau, with its R^2.

    python -m benchmarks.bench_forgetting [--episodes 12] [--seed 0]
"""

from __future__ import annotations

import argparse


def suite_line(suite: str, episodes: int, seed: int) -> None:
    import numpy as np

    from unsee.core import Unsee
    from unsee.eval import metrics
    from unsee.eval.forgetting import run_forgetting
    from unsee.eval.suites import generate

    eps = generate(suite, episodes, seed)
    result = run_forgetting(eps, ["B5", "B5'", "B7"], unsee=Unsee)
    rows = {r.strategy: r for r in result.rows}
    b5, b5p, b7 = rows["B5"], rows["B5'"], rows["B7"]
    print(f"{suite}, {len(eps)} episodes, seed {seed}: recomputed tokens per episode "
          f"B5 {b5.tokens:.0f}, B5' {b5p.tokens:.0f}, B7 {b7.tokens:.0f}")
    print(f"  B7/B5  {metrics.ratio(b7, b5):.3f}   (paper: 0.108)")
    print(f"  B7/B5' {metrics.ratio(b7, b5p):.3f}   (paper: about 0.67)")
    suffix = {e.id: len(e.turns) - 1 - e.tau_turn for e in eps}
    pts = [(suffix[r.measure.episode], r.measure.tokens_prefill + r.measure.tokens_decode)
           for r in result.runs if r.measure.strategy == "B7"]
    x, y = np.array([p[0] for p in pts], float), np.array([p[1] for p in pts], float)
    if len(set(x)) > 1:
        slope, icept = np.polyfit(x, y, 1)
        r2 = 1 - ((y - (slope * x + icept)) ** 2).sum() / ((y - y.mean()) ** 2).sum()
        print(f"  B7 tokens = {slope:.1f} x turns after tau + {icept:.1f}   R^2 {r2:.3f}  "
              f"(suffix lengths {sorted(set(int(v) for v in x))})")
    else:
        print("  B7 cost against suffix length: one suffix length only; more episodes needed")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=12)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv if argv is not None else [])
    for suite in ("support", "windowed"):
        suite_line(suite, args.episodes, args.seed)


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
