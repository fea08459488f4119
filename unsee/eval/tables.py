"""Rich tables of ``unsee bench`` and ``unsee eval detectors``, from their result dicts.

Pure rendering: no AgentDojo import (``bench.py`` and ``detector_eval.py`` re-export these),
so the tables are tested where the ``eval`` extra is not installed. Every table fits a
100-column terminal: cells wrap (a word longer than its cell folds, never cut with an
ellipsis), and settings every row shares go into the title instead of a column. A log file
(stdout not a terminal) gets 140 columns, so a row stays on one line.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

DEFAULT_ATTACK = "important_instructions"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


#: the widest console a table is measured on (a bounded console caps the measure at its width)
_UNBOUNDED = 10**6


def compact_table(title: str, columns: Sequence[tuple[str, str]], rows: Sequence[Sequence[str]], *,
                  stacked: bool = False) -> Any:
    """A rich Table of short cells: no vertical rules, one space between columns, cells never
    wrapped; ``stacked`` puts each word of a header on a line of its own (rich's own header
    wrapping cuts some headers with an ellipsis instead)."""
    from rich import box
    from rich.table import Table

    t = Table(title=title, box=box.SIMPLE_HEAD, collapse_padding=True, show_edge=False)
    for header, justify in columns:
        t.add_column(header.replace(" ", "\n") if stacked else header, justify=justify, no_wrap=True)
    for row in rows:
        t.add_row(*row)
    return t


def fitted_table(title: str, columns: Sequence[tuple[str, str]], rows: Sequence[Sequence[str]],
                 width: int) -> Any | None:
    """The compact table with one-line headers if it fits ``width`` columns, else with stacked
    headers if that fits; None when neither does."""
    from rich.console import Console

    measure = Console(width=_UNBOUNDED).measure
    for stacked in (False, True):
        t = compact_table(title, columns, rows, stacked=stacked)
        if measure(t).maximum <= width:
            return t
    return None


#: the summary's columns: (header, justify)
SUMMARY_COLUMNS = (("suite", "left"), ("attack", "left"), ("defense", "left"), ("verdict", "left"),
                   ("pairs", "right"), ("utility", "right"), ("attack success", "right"),
                   ("ASR id-sink (pairs)", "right"), ("any-leak", "right"), ("clean utility", "right"),
                   ("forgets (clean)", "right"))
#: the columns a run with reconciliation adds (``unsee bench agentdojo --reconcile``)
#: (after reconciliation: attack success, the share of injected effects still in the environment of
#: those that took effect, utility; compensations done; orphaned calls with no compensator)
RECONCILE_COLUMNS = (("reconcile", "left"), ("ASR after", "right"), ("effect remains (pairs)", "right"),
                     ("utility after", "right"), ("undone", "right"), ("left as is", "right"))
#: the columns that say what ran: when every row has the same value, it goes into the title
_SETTINGS = ("suite", "attack", "defense", "verdict", "reconcile")


def bench_console() -> Any:
    """stdout: the terminal's width; a log file gets 140 columns, so a row stays on one line."""
    from rich.console import Console

    console = Console()
    if not console.is_terminal:
        console = Console(width=max(console.width, 140))
    return console


def _reconciled(r: dict) -> bool:
    return r.get("reconcile", "none") != "none"


def _summary_row(r: dict, reconcile: bool = False) -> tuple[str, ...]:
    """A run's summary cells; ``reconcile``: with the :data:`RECONCILE_COLUMNS` too (``-`` for a
    run without reconciliation)."""
    sm = r["summary"]
    late = r.get("verdict") == "late"
    row = (r["suite"], r.get("attack", DEFAULT_ATTACK), r["defense"], r.get("verdict", "sync"),
           str(sm["pairs"]), _pct(sm["utility"]), _pct(sm["attack_success"]),
           f'{_pct(sm["attack_success_identifier_sink"])} ({sm["identifier_sink_pairs"]})',
           _pct(sm["any_leak"]), _pct(sm["clean_utility"]),
           f'{sm.get("forgets", 0)} ({sm.get("clean_forgets", 0)})' if late else "-")
    if not reconcile:
        return row
    if not _reconciled(r):
        return (*row, "none", "-", "-", "-", "-", "-")
    return (*row, r["reconcile"], _pct(sm.get("attack_success_after_reconcile")),
            f'{_pct(sm.get("effect_remains"))} ({sm.get("effect_pairs", 0)})',
            _pct(sm.get("utility_after_reconcile")), str(sm.get("compensated", 0)),
            str(sum((sm.get("stays") or {}).values())))


def _without_shared(title: str, rows: list[tuple[str, ...]], columns: tuple[tuple[str, str], ...] = SUMMARY_COLUMNS,
                    ) -> tuple[str, list[tuple[str, str]], list[tuple]]:
    """(title, columns, rows) with the settings every row shares moved into the title."""
    shared = [i for i, (name, _) in enumerate(columns)
              if name in _SETTINGS and len({row[i] for row in rows}) == 1]
    settings = ", ".join(f"{columns[i][0]} {rows[0][i]}" for i in shared)
    keep = [i for i in range(len(columns)) if i not in shared]
    return (title + (f": {settings}" if settings else ""), [columns[i] for i in keep],
            [tuple(row[i] for i in keep) for row in rows])


def _fitted_tables(title: str, rows: list[tuple[str, ...]], columns: tuple[tuple[str, str], ...],
                   width: int) -> list[Any]:
    """One table of ``rows`` when it fits ``width``, else one per suite and attack (stacked
    headers where even that is too wide)."""
    whole = fitted_table(*_without_shared(title, rows, columns), width)
    if whole is not None:
        return [whole]
    groups: dict[tuple[str, str], list[tuple[str, ...]]] = {}
    for row in rows:
        groups.setdefault((row[0], row[1]), []).append(row)
    tables = []
    for group in groups.values():
        t, cols, cells = _without_shared(title, group, columns)
        tables.append(fitted_table(t, cols, cells, width) or compact_table(t, cols, cells, stacked=True))
    return tables


#: the reconciliation table's columns, when they do not fit beside the summary's
_RECONCILE_TABLE = (*SUMMARY_COLUMNS[:5], SUMMARY_COLUMNS[6], *RECONCILE_COLUMNS)


def summary_tables(results: list[dict], width: int) -> list[Any]:
    """The summary of bench runs as rich Tables that fit ``width`` columns: one row per run,
    the settings every run shares in the title (fewer columns); when that is still too wide,
    one table per suite and attack. Runs with reconciliation add :data:`RECONCILE_COLUMNS`
    to it; where they do not fit beside the others, they go into a table of their own (with
    the run's attack success before reconciliation), after the summary."""
    models = {r.get("model", "scripted") for r in results}
    title = "AgentDojo (" + ("scripted injection-following agent" if models == {"scripted"}
                             else "local CPU model" if models == {"local"} else "scripted and local agents") + ")"
    if any(_reconciled(r) for r in results):
        rows = [_summary_row(r, True) for r in results]
        whole = fitted_table(*_without_shared(title, rows, SUMMARY_COLUMNS + RECONCILE_COLUMNS), width)
        if whole is not None:
            return [whole]
        keep = [SUMMARY_COLUMNS.index(c) if c in SUMMARY_COLUMNS else len(SUMMARY_COLUMNS) + RECONCILE_COLUMNS.index(c)
                for c in _RECONCILE_TABLE]
        after = [tuple(row[i] for i in keep) for row, r in zip(rows, results) if _reconciled(r)]
        return (_fitted_tables(title, [_summary_row(r) for r in results], SUMMARY_COLUMNS, width)
                + _fitted_tables(title.replace(")", ") after reconciliation", 1), after, _RECONCILE_TABLE, width))
    return _fitted_tables(title, [_summary_row(r) for r in results], SUMMARY_COLUMNS, width)


def stays_lines(results: list[dict]) -> list[str]:
    """One line per run with reconciliation whose orphaned calls some tool could not compensate:
    what stays, by tool (``suite / attack / defense: no compensator, left as is: update_password 16``)."""
    lines = []
    for r in results:
        stays = (r.get("summary") or {}).get("stays") or {}
        if _reconciled(r) and stays:
            what = ", ".join(f"{tool} {n}" for tool, n in stays.items())
            lines.append(f"{r['suite']} / {r.get('attack', DEFAULT_ATTACK)} / {r['defense']}: no compensator, "
                         f"left as is: {what}")
    return lines


def print_summary(results: list[dict], console: Any = None) -> None:
    """The summary tables on ``console`` (default: stdout, see :func:`bench_console`), then what
    stays after reconciliation (:func:`stays_lines`)."""
    console = console or bench_console()
    for t in summary_tables(results, console.width):
        console.print(t)
    for line in stays_lines(results):
        console.print(line, highlight=False)


def print_pairs(result: dict, console: Any = None) -> None:
    """Utility and attack success per (user task, injection task) pair, as a matrix.

    Rows are user tasks; the first column is the run without injection, then
    one column per injection task. A cell reads ``U`` when the user task
    succeeded (``·`` when not), then ``A`` when the attack succeeded (with
    reconciliation: before it, and ``R`` when the attack's effect remains after
    it); ``E`` marks a run that raised (its error is in the JSON rows).
    """
    from rich.console import Console
    from rich.table import Table

    clean = {r["user_task"]: r for r in result["clean"]}
    its = list(dict.fromkeys(r["injection_task"] for r in result["rows"]))
    cells = {(r["user_task"], r["injection_task"]): r for r in result["rows"]}

    def cell(r: dict | None) -> str:
        if r is None:
            return ""
        if r.get("error"):
            return "E"
        return (("U" if r["utility"] else "·") + ("A" if r.get("attack_success") else "")
                + ("R" if r.get("attack_success") and r.get("attack_success_after_reconcile") else ""))

    table = Table(title=f"{result['suite']} / {result.get('attack', DEFAULT_ATTACK)} / {result['defense']} "
                        f"({result.get('verdict', 'sync')}"
                        + (f", reconcile {result['reconcile']})" if _reconciled(result) else ")"))
    table.add_column("user task", overflow="fold")
    table.add_column("clean", justify="center", overflow="fold")
    for it in its:
        table.add_column(it.replace("injection_task_", "i"), justify="center", overflow="fold")
    for ut, r in clean.items():
        table.add_row(ut.replace("user_task_", "u"), cell(r), *(cell(cells.get((ut, it))) for it in its))
    if console is None:
        console = Console()
        if not console.is_terminal:
            console = Console(width=max(console.width, 40 + 5 * len(its)))
    console.print(table)
    console.print("U: user task done, A: attack succeeded, E: the run raised (see the JSON rows)"
                  + ("; R: its effect remains after reconciliation" if _reconciled(result) else ""))


def print_detector_report(result: dict[str, Any], own_suites: tuple[str, ...] = (), console: Any = None) -> None:
    """Recall per attack and suite, false-positive rates and cost, as rich tables (cells wrap
    to the terminal's width, never cut; a log file gets 140 columns)."""
    from rich.console import Console
    from rich.table import Table

    pct = _pct
    if console is None:
        console = Console()
        if not console.is_terminal:
            console = Console(width=max(console.width, 140))
    sizes = result["group_sizes"]
    suites = sorted({k.split("/")[0] for k in sizes} - set(own_suites))
    attacks = sorted(result["recall_by_attack"])
    t = Table(title=f"recall of {result['detector']!r} on AgentDojo's injected outputs (min score "
                    f"{result['min_score']})")
    t.add_column("attack", overflow="fold")
    for s in suites:
        t.add_column(s, justify="right", overflow="fold")
    t.add_column("all", justify="right", overflow="fold")
    for a in attacks:
        t.add_row(a, *(f"{pct(result['recall_by_group'].get(f'{s}/{a}'))} ({sizes.get(f'{s}/{a}', 0)})"
                       for s in suites), pct(result["recall_by_attack"][a]))
    if attacks:
        console.print(t)
    cases = (f"; --cases: false positives {pct(result['cases_false_positive_rate'])} of "
             f"{result['cases_negatives']}, recall {pct(result['cases_recall'])} of {result['cases_positives']}"
             if result["cases_negatives"] or result["cases_positives"] else "")
    console.print(
        f"recall {pct(result['recall'])} of {result['positives']} injected outputs; false positives "
        f"{pct(result['false_positive_rate'])} of {result['negatives']} clean outputs; hard cases: false "
        f"positives {pct(result['hard_false_positive_rate'])} of {result['hard_negatives']}, recall "
        f"{pct(result['hard_recall'])} of {result['hard_positives']}{cases}; {result['ms_per_1000']:.0f} ms per 1 000 "
        f"outputs ({result['outputs']} in {result['seconds']:.1f} s)")


#: how ``print_corpora_table`` names each corpus of a result's ``corpora``
CORPUS_LABELS = {"agentdojo": "AgentDojo", "hard-cases": "hard cases (dev set)", "heldout-1": "held-out 1",
                 "heldout-2": "held-out 2", "heldout-3": "held-out 3", "heldout-4": "held-out 4", "cases": "--cases"}


def print_corpora_table(results: Sequence[dict[str, Any]], console: Any = None) -> None:
    """One table for every detector evaluated: a row per (detector, corpus) with recall (caught
    of positives), false positives (flagged of negatives) and the detector's milliseconds per
    1 000 of that corpus's outputs; the detector's name on its first row only. Nothing is
    printed when no result has a corpus."""
    from rich.console import Console
    from rich.table import Table

    if console is None:
        console = Console()
        if not console.is_terminal:
            console = Console(width=max(console.width, 140))
    rows = []
    for r in results:
        for i, (name, c) in enumerate(r.get("corpora", {}).items()):
            rows.append((r["detector"] if i == 0 else "", CORPUS_LABELS.get(name, name),
                         f"{_pct(c['recall'])} ({c['caught']} of {c['positives']})" if c["positives"] else "-",
                         f"{_pct(c['false_positive_rate'])} ({c['flagged']} of {c['negatives']})"
                         if c["negatives"] else "-",
                         f"{c['ms_per_1000']:,.0f}".replace(",", " ")))
    if not rows:
        return
    scores = sorted({r["min_score"] for r in results})
    t = Table(title=f"recall and false positives per corpus (min score {', '.join(map(str, scores))})")
    for header, justify in (("detector", "left"), ("corpus", "left"), ("recall", "right"),
                            ("false positives", "right"), ("ms per 1 000", "right")):
        t.add_column(header, justify=justify, overflow="fold")
    for row in rows:
        t.add_row(*row)
    console.print(t)
