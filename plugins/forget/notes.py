"""What a forget's report says in words: its notes, and its side effects as the report shows them.

Pure functions of what the steps produced (the plan, the replay's outcome, the graph); the
forgetter puts their results on the report.
"""

from __future__ import annotations

from typing import Any

from .plan import ReplayPlan
from .report import SideEffect, StepError
from .sanitize import sanitize, sanitize_value


def masked(effect: SideEffect, target: str, hasher: Any) -> SideEffect:
    """A side effect as the report shows it: the target replaced by its keyed hash
    (the report says where it went, never reprints it)."""
    mark = f"[erased {hasher.hash(target)}]"
    return effect.model_copy(update={"args": sanitize_value(effect.args, target, mark),
                                     "result": None if effect.result is None else sanitize(effect.result, target,
                                                                                           mark)})


def unfinished(errors: list[StepError]) -> str:
    return ("committed: the session holds the counterfactual, but the commit's last steps did not finish "
            f"({errors[0].message}); the next forget of this session, or this event again, finishes them "
            "(its record is not erased until then)")


def numerics_differ(model: Any, g: Any, plan: ReplayPlan, session: str) -> str | None:
    """A note when the local model's numerics now (``numerics(session)``: what its logits depend on,
    backend, kernels, versions) differ from those the replayed turns were recorded with: a decoded
    token can then differ from the original run's at a near-tie, and the report says so. None when
    they agree, or no turn recorded any (another model)."""
    numerics = getattr(model, "numerics", None)
    if not callable(numerics):
        return None
    recorded = {str(a.attrs["numerics"]) for t in plan.model_turns
                if t.artifact_id in g and (a := g.get(t.artifact_id)).attrs.get("numerics")}
    if not recorded:
        return None
    try:
        current = str(numerics(session))
    except Exception:  # (an observer: the note is best effort)
        return None
    if not (other := sorted(recorded - {current})):
        return None
    return (f"the local model's numerics differ from those the replayed turns were recorded with "
            f"(recorded {', '.join(other)}; now {current}): a decoded token can differ from the original "
            "run's at a near-tie")


def earlier_sources(g: Any, plan: ReplayPlan, target: str) -> list[str]:
    """Where the record shows ``target`` entered before this forget's entry (kept in the prefix)."""
    out: dict[str, None] = {}
    for a in g.occurrences(target):
        if a.is_observation and a.seq < plan.entry.seq:
            out[f"{a.source_ids[0] if a.source_ids else a.type.value} ({a.id}, turn {a.turn})"] = None
    return list(out)


def human_notes(plan: ReplayPlan, outcome: Any) -> list[str]:
    """What the report says of the human decisions the replay met (``given.py``)."""
    notes = []
    if outcome.unasked:
        notes.append(f"the counterfactual asked no question where the session recorded {len(outcome.unasked)} "
                     f"human decision(s) ({', '.join(outcome.unasked)}): not given")
    if outcome.stopped_at is not None:
        left = [r.artifact_id for r in plan.runs if r.artifact_id not in outcome.given
                and r.artifact_id not in outcome.unasked and r.turn >= outcome.stopped_at]
        notes.append(f"the counterfactual asks a question of its own at recorded turn {outcome.stopped_at}, which no "
                     "recorded decision answered: the session now waits for a human there (awaiting_human), and "
                     f"the {len(left)} recorded input(s) after it were not given")
    elif outcome.awaiting:
        notes.append("the session waits for a human at the counterfactual's question, as it waited before the forget")
    return notes
