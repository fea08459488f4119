"""The output of ``unsee eval forgetting``: the table in the paper's layout and the PNG plot."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from . import metrics
from .forgetting import ForgettingResult


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def print_table(result: ForgettingResult, console: Any = None) -> None:
    """The paper's layout: strategies x metrics (any-leak per channel, then the summary metrics)."""
    from rich.console import Console
    from rich.table import Table

    if console is None:
        console = Console()
        if not console.is_terminal:
            console.width = 240  # piped: a whole row per line
    oracle = ", oracle (B3, B6 also redact the excluded option)" if result.oracle else ""
    t = Table(title=f"forgetting: suite {result.suite}, model {result.model}, seed {result.seed}, "
                    f"{len(result.episodes)} episodes{oracle}")
    t.add_column("strategy")
    for c in metrics.CHANNELS:
        t.add_column(c.replace("_", " "), justify="right")
    for col in ("any leak", "CAD", "agree B5", "Leak@probes", "Leak@5", "residue", "tokens", "p vs B0", "p vs B5"):
        t.add_column(col, justify="right")
    for row in result.rows:
        p = result.significance.get(row.strategy, {})
        t.add_row(row.strategy, *(_pct(row.any_leak.get(c)) for c in metrics.CHANNELS),
                  _pct(row.any_leak_overall), _pct(row.cad), _pct(row.agreement), _pct(row.leak_at_probes),
                  _pct(row.leak_at_5), "-" if row.residue is None else f"{row.residue:+.2f}",
                  f"{row.tokens:.0f}", _pct(p.get("B0")), _pct(p.get("B5")))
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
