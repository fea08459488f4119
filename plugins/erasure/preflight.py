"""Whether an erasure could rewrite a thread's history, asked before a forget commits.

A forget erases after its commit; an erasure that then refuses leaves a
committed state over a history that still holds the target. The forget asks
first (``erasure_blockers``) and refuses before anything changes. The answer
is what the history rewrite itself would refuse for: no checkpointer, one that
cannot delete a thread, ``DeltaChannel`` channels on a saver or LangGraph
version unsee cannot read. Checkpoints in namespaces other than the root one
(nested runs': a subgraph's, a subagent's) are no refusal: the rewrite deletes
them (``history.NESTED``).
"""

from __future__ import annotations

from typing import Any

from .history import HistoryNotRewritable, check_rewritable

FIX = "forget with erase=False (--no-erase) to keep the old record, or erase the thread whole (u.erase_subject)"


def erasure_blockers(agent: Any, thread: str) -> list[str]:
    """Why an erasure after a forget could not rewrite ``thread``'s history through ``agent``
    ([] when it can). Reads nothing of the thread; changes nothing."""
    try:
        check_rewritable(agent)
    except HistoryNotRewritable as e:
        return [f"its record could not be erased after the forget ({e}): {FIX}"]
    # (checkpoints of nested runs need no check: a rewrite deletes them, ``history.NESTED``)
    return []


__all__ = ["FIX", "erasure_blockers"]
