"""The output of ``unsee eval forgetting``: the table in the layout of "Forgetting Without
Restarting: Execution-State Unlearning for Stateful LLM Agents" and the PNG plot."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from . import metrics
from .forgetting import ForgettingResult
from .tables import compact_table, fitted_table


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


#: the summary metrics' columns, after the any-leak per channel
SUMMARY = ("any leak", "CAD", "agree B5", "Leak@probes", "Leak@5", "residue", "tokens", "p vs B0", "p vs B5")


def _cells(result: ForgettingResult, row: metrics.StrategyRow) -> dict[str, str]:
    p = result.significance.get(row.strategy, {})
    return {**{c: _pct(row.any_leak.get(c)) for c in metrics.CHANNELS},
            "any leak": _pct(row.any_leak_overall), "CAD": _pct(row.cad), "agree B5": _pct(row.agreement),
            "Leak@probes": _pct(row.leak_at_probes), "Leak@5": _pct(row.leak_at_5),
            "residue": "-" if row.residue is None else f"{row.residue:+.2f}",
            "tokens": f"{row.tokens:.0f}", "p vs B0": _pct(p.get("B0")), "p vs B5": _pct(p.get("B5"))}


def forgetting_tables(result: ForgettingResult, width: int) -> list[Any]:
    """The article's layout (strategies x any-leak per channel, then the summary metrics) as one
    rich Table when it fits ``width`` columns, else as two (any-leak per channel; the summary
    metrics), each with the strategy column: 19 columns never fit a 100-column terminal."""
    oracle = ", oracle (B3, B6 also redact the excluded option)" if result.oracle else ""
    title = (f"forgetting: suite {result.suite}, model {result.model}, seed {result.seed}, "
             f"{len(result.episodes)} episodes{oracle}")
    cells = [(row.strategy, _cells(result, row)) for row in result.rows]

    def parts(cols: tuple[str, ...], title: str) -> tuple[str, list[tuple[str, str]], list[tuple[str, ...]]]:
        return (title, [("strategy", "left"), *((c.replace("_", " "), "right") for c in cols)],
                [(strategy, *(by[c] for c in cols)) for strategy, by in cells])

    whole = fitted_table(*parts((*metrics.CHANNELS, *SUMMARY), title), width)
    if whole is not None:
        return [whole]
    halves = (parts((*metrics.CHANNELS, "any leak"), f"{title}: any leak per channel"),
              parts(SUMMARY[1:], f"{title}: summary"))
    return [fitted_table(*half, width) or compact_table(*half, stacked=True) for half in halves]


def print_table(result: ForgettingResult, console: Any = None) -> None:
    """The article's layout: strategies x metrics (any-leak per channel, then the summary metrics),
    in two tables when one does not fit the console's width."""
    from rich.console import Console

    if console is None:
        console = Console()
        if not console.is_terminal:
            console.width = 240  # piped: a whole row per line
    for t in forgetting_tables(result, console.width):
        console.print(t)
    rows = {r.strategy: r for r in result.rows}
    for a, b in (("B7", "B5"), ("B7", "B5'")):
        if a in rows and b in rows and rows[b].tokens:
            console.print(f"recomputed tokens {a}/{b}: {metrics.ratio(rows[a], rows[b]):.3f}")


def plot(result: ForgettingResult, path: Path) -> None:
    """A PNG: any-leak and Leak@probes per strategy (bars), recomputed tokens per strategy
    (needs matplotlib: the ``bench`` extra)."""
    import matplotlib

    matplotlib.use("Agg")  # no display
    import matplotlib.pyplot as plt

    codes = [r.strategy for r in result.rows]
    x = range(len(codes))
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    a.bar([i - 0.2 for i in x], [r.any_leak_overall for r in result.rows], 0.4, label="any leak")
    a.bar([i + 0.2 for i in x], [r.leak_at_probes or 0 for r in result.rows], 0.4, label="Leak@probes")
    a.set_xticks(list(x), codes)
    a.set_ylim(0, 1.05)
    a.set_title(f"leaks ({result.suite}, {result.model}, {len(result.episodes)} episodes)")
    a.legend()
    b.bar(list(x), [r.tokens for r in result.rows])
    b.set_xticks(list(x), codes)
    b.set_title("recomputed tokens per episode (prefill + decode)")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
