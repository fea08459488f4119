"""The erasure step of a revocation event: after a committed replay, erase the record.

A forget rebuilds the state; the record (checkpoint history, memory store,
unsee's files, ledger, sandbox snapshots) still holds the target. This step
hands the session to the erasure plugin, through its package face, and puts
what it verified on the report (the signed receipt's path, whether the audit
after it found no copy). An erasure that cannot finish now is said on the
report, never hidden, and never undoes the committed forget.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from unsee.middleware.errors import StoreUnavailable

from .report import ForgetReport
from .strategy import Strategy
from .trace import record_erasure


def needs_erasure(report: ForgetReport, erase: bool) -> bool:
    """Only a committed replay leaves a counterfactual history to erase toward."""
    return erase and report.committed and Strategy.parse(report.strategy).spec.replays


def erase_after(erasure: Any, flush: Callable[[], None], report: ForgetReport, session: str, event: Any,
                agent: Any, erase: bool = True) -> ForgetReport:
    """``report`` with the erasure's receipt and verdict (``erasure``: the erasure plugin's
    ``ErasureContext``; ``agent``: the agent whose checkpointer and store are rewritten)."""
    from unsee.plugins.erasure import Eraser, ErasureInterrupted, NotForgotten

    if not needs_erasure(report, erase):
        return report
    try:
        flush()  # the replay's spans are records the erasure reads and rewrites
        result = Eraser(erasure).erase(session, event, agent=agent)
        record_erasure(result)  # (its routes' times, for the forget's trace)
    except NotForgotten:
        # the event named one source; the same text is still in the state through another
        # observation: its copies cannot be told apart, so the record waits for that one's forget
        return report.model_copy(update={"notes": [*report.notes, (
            "record not erased: the target is still in the session through another observation "
            "(forget that one too; the last forget erases the record)")]})
    except (ErasureInterrupted, StoreUnavailable) as e:
        # the forget is committed; its record is not erased yet: said, never hidden
        return report.model_copy(update={"erased_clean": False, "notes": [*report.notes, (
            f"record not erased yet: {e}")]})
    notes = list(report.notes)
    if not result.clean:  # said on the report (the CLI exits 3), never only in the receipt
        notes.append(f"record NOT erased clean: {result.after.copies} copies remain in this forget's scope "
                     f"(see the receipt {result.path})")
    return report.model_copy(update={"receipt": str(result.path), "erased_clean": result.clean, "notes": notes,
                                     "also_held_by": result.after.other_sessions})
