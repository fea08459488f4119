"""The erase step of a revocation event: after a committed replay, erase the record.

A forget rebuilds the state; the record (checkpoint history, memory store,
unsee's files, ledger, sandbox snapshots) still holds the target. This step
hands the session to the erasure plugin, through its package face, and puts
what it verified on the report (the signed receipt's path, whether the audit
after it found no copy). An erasure that cannot finish now, for whatever
reason, is said on the report (``errors``, ``erased_clean`` False), never
raised and never hidden, and never undoes the committed forget.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from unsee.middleware.errors import InjectedCrash

from .report import ForgetReport, StepError
from .strategy import Strategy


def needs_erasure(report: ForgetReport, erase: bool) -> bool:
    """Only a committed replay leaves a counterfactual history to erase toward (and only once its
    commit finished: an unfinished one's records are still being replaced)."""
    return (erase and report.committed and Strategy.parse(report.strategy).spec.replays
            and not any(e.step == "commit" for e in report.errors))


def erase_record(erasure: Any, flush: Callable[[], None], report: ForgetReport, session: str, event: Any,
                 agent: Callable[[], Any]) -> tuple[ForgetReport, Any]:
    """``report`` with the erasure's receipt and verdict, and the erasure's result (its routes'
    times, for the forget's trace; None when it failed). ``erasure``: the erasure plugin's
    ``ErasureContext``; ``agent()``: the agent whose checkpointer and store are rewritten. Never
    raises (the forget is committed): a failure is the report's, with ``erased_clean`` False."""
    from unsee.plugins.erasure import Eraser, NotForgotten

    try:
        flush()  # the replay's spans are records the erasure reads and rewrites
        result = Eraser(erasure).erase(session, event, agent=agent())
    except InjectedCrash:  # (a test's simulated death of the process: nothing returns)
        raise
    except NotForgotten as e:
        # the records still hold the target (the state did not: the commit checked it)
        return _not_erased(report, e, "record not erased: the session's records still hold the target"), None
    except Exception as e:  # (an erasure interrupted part-way is journaled: running it again finishes it)
        return _not_erased(report, e, f"record not erased yet: {type(e).__name__}: {e}"), None
    notes = list(report.notes)
    if not result.clean:  # said on the report (the CLI exits 1), never only in the receipt
        gaps = list(getattr(result.after, "incomplete", ()) or ())
        if result.after.copies or not gaps:
            notes.append(f"record NOT erased clean: {result.after.copies} copies remain in this forget's scope "
                         f"(see the receipt {result.path})")
        for gap in gaps:
            notes.append(f"record NOT verified clean: the audit after the erasure is incomplete ({gap})")
    return report.model_copy(update={"receipt": str(result.path), "erased_clean": result.clean, "notes": notes,
                                     "also_held_by": result.after.other_sessions}), result


def _not_erased(report: ForgetReport, exc: Exception, note: str) -> ForgetReport:
    return report.model_copy(update={"erased_clean": False, "notes": [*report.notes, " ".join(note.split())],
                                     "errors": [*report.errors, StepError.of("erase", exc)]})
