"""Rich renderings of a forget plan and report (CLI and demo).

Panels fit their content (``expand=False``): piped output has no width limit,
so ids and values are never cut, and a panel must not fill that width. Free
text (notes, tool arguments and results) wraps at :data:`TEXT_WIDTH` columns
even there, so a panel stays about a terminal wide (a local model's arguments
and notes are long); on a narrower terminal every cell wraps, and a word
longer than its cell (an id, a path) folds onto the next line instead of
being cut with an ellipsis.
"""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.constrain import Constrain
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from unsee.plugins.forget import ForgetPlan, ForgetReport, SideEffect


#: the widest a cell of free text grows (panels about a terminal wide, also when piped)
TEXT_WIDTH = 64


def _prose(text: str) -> RenderableType:
    """Free text in a grid cell: at most TEXT_WIDTH wide, wrapped on words."""
    return Constrain(Text(text, overflow="fold"), TEXT_WIDTH)


def _grid() -> Table:
    """A label/value grid: labels never wrap; values wrap, and fold an over-long id or path."""
    t = Table.grid(padding=(0, 2))
    t.add_column(no_wrap=True)
    t.add_column(overflow="fold")
    return t


def _effects(title: str, effects: list[SideEffect]) -> Table | None:
    if not effects:
        return None
    t = Table(title=title, title_justify="left")
    for col in ("tool", "status"):
        t.add_column(col, overflow="fold")
    for col in ("arguments", "result"):  # free text: wrapped, never cut (the record holds the whole)
        t.add_column(col, overflow="fold", max_width=TEXT_WIDTH // 2)
    for e in effects:
        t.add_row(e.tool, e.status, str(e.args), (e.result or "-")[:60])
    return t


def render_plan(p: ForgetPlan) -> Panel:
    t = _grid()
    t.add_row("strategy", p.strategy)
    t.add_row("tau (entry step)", f"{p.tau} via {p.entry_type} {p.entry_artifact} ({', '.join(p.entry_sources)})")
    t.add_row("taint closure |I(z)|", str(len(p.closure)))
    t.add_row("checkpoint", f"{p.checkpoint_id} ({p.checkpoint_kind}, turn {p.checkpoint_turn})" if p.checkpoint_id
              else "none: replay from an empty state")
    t.add_row("turns to replay", _prose(", ".join(map(str, p.turns_to_replay))))
    t.add_row("transitions to replay", str(p.transitions_to_replay))
    t.add_row("model turns decoded / by prefill", f"{len(p.model_turns_to_decode)} / {len(p.model_turns_to_rematerialise)}")
    if p.assumed_external:
        t.add_row("assumed external", _prose(", ".join(p.assumed_external) + " (no effect declared: never run "
                                             "again by a replay)"))
    parts = [t]
    risk = _effects("side effects that may be orphaned", p.side_effects_at_risk)
    if risk is not None:
        parts.append(risk)
    return Panel(Group(*parts), title=f"forget plan for {p.session_id} (dry run: nothing changed)",
                 expand=False)


def render_report(r: ForgetReport) -> Panel:
    t = _grid()
    t.add_row("strategy", r.strategy)
    t.add_row("tau / |I(z)|", f"{r.tau} / {r.closure_size}")
    t.add_row("checkpoint", f"{r.checkpoint_id} ({r.checkpoint_kind})" if r.checkpoint_id else "none")
    t.add_row("transitions replayed", str(r.transitions_replayed))
    t.add_row("model turns decoded / re-materialised", f"{r.model_turns_decoded} / {r.model_turns_rematerialised}")
    t.add_row("tool calls from record / executed", f"{r.tool_calls_from_record} / {r.tool_calls_executed}")
    t.add_row("tokens prefilled / decoded / reused", f"{r.tokens_prefilled} / {r.tokens_decoded} / {r.tokens_reused}")
    t.add_row("wall time", f"{r.wall_time_s:.2f} s")
    t.add_row("committed", "yes" if r.committed else "no")
    if r.receipt is not None:
        t.add_row("record erased", _prose(("yes: no copy in this forget's scope" if r.also_held_by
                                           else "yes: no copy on any route") if r.erased_clean
                                          else "NO: copies remain in this forget's scope (see the receipt)"))
        t.add_row("signed receipt", r.receipt)  # its own row: a path, unbroken when the width allows
    for session, n in r.also_held_by.items():
        t.add_row("also held by", _prose(f"session {session}: {n} {'copy' if n == 1 else 'copies'}, not in this "
                                         "forget's scope (its own forget erases them)"))
    for other in r.also_forgotten:
        t.add_row("also forgotten in", _prose(
            f"{other.session_id} (committed: {'yes' if other.committed else 'no'}"
            + (f", record erased: {'yes' if other.erased_clean else 'NO'}" if other.receipt else "") + ")"))
    for other in r.other_sessions:
        t.add_row("also reached (not forgotten)", _prose(f"{other} — forget there too: --all-sessions / scope='all'"))
    if r.assumed_external:  # (undeclared tools: never fired twice, never replayed)
        t.add_row("assumed external", _prose(", ".join(r.assumed_external) + " (no effect declared: never run "
                                             "again by a replay; declare one to replay them)"))
    for n in r.notes:
        t.add_row("note", _prose(n))
    for e in r.errors:  # (after the commit: the forget stands, this part did not finish)
        t.add_row(f"failed after the commit: {e.step}", _prose(f"{e.error}: {e.message}"))
    parts = [t]
    for title, effects in (("orphaned side effects (fired in the original world only)", r.orphaned_side_effects),
                           ("deferred side effects (wanted by the counterfactual, not executed)",
                            r.deferred_side_effects)):
        tab = _effects(title, effects)
        if tab is not None:
            parts.append(tab)
    if r.reconciliation is not None and getattr(r.reconciliation, "items", None):
        parts.append(reconciliation_table(r.reconciliation))
    return Panel(Group(*parts), title=f"forget report for {r.session_id}", expand=False)


#: what each action of a reconciliation plan means, in words
_DOES = {"compensate": "undo", "run": "run", "report": "by hand"}


def reconciliation_table(plan) -> Table:
    """A reconciliation plan (``ReconcilePlan``): one row per item, what runs and its state."""
    t = Table(title=f"reconciliation of the world (event {plan.event_id}: unsee reconcile {plan.event_id})",
              title_justify="left")
    for col in ("item", "action", "state"):
        t.add_column(col, overflow="fold")
    t.add_column("what", overflow="fold", max_width=TEXT_WIDTH)
    for i in plan.items:
        args = ", ".join(f"{k}={v!r}" for k, v in sorted(i.args.items()))
        if i.action == "compensate":
            what = f"{i.compensator} undoes {i.tool}({args})"
        elif i.action == "run":
            what = f"{i.tool}({args}), wanted by the counterfactual"
        else:
            what = i.why or f"{i.tool}({args})"
        t.add_row(i.key.removeprefix("rec-")[:8], _DOES[i.action], i.state, what)
    return t
