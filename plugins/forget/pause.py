"""A counterfactual that waits at an interrupt becomes the session's state with its question.

A replay that ends waiting for a human (the session was paused at an approval,
or the counterfactual asks a question of its own) leaves its scratch thread's
head checkpoint with pending interrupt writes. A state update would carry the
values but not the question: the session would no longer wait. So such a
commit writes that checkpoint itself into the session's thread, after the
session's head (its id, written later than any of the session's, stays the
latest), with its pending writes: LangGraph derives the waiting task's id from
the checkpoint id, so the question is the session's, exactly as the replay
left it, and ``Command(resume=...)`` answers it.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from .thread import thread_cfg


def _interrupt_channel() -> str:
    from langgraph.constants import INTERRUPT

    return INTERRUPT


def waiting_head(agent: Any, scratch: str, head: str) -> Any | None:
    """The scratch thread's checkpoint tuple at ``head`` when it waits at an interrupt, else None."""
    saver = getattr(agent, "checkpointer", None)
    if saver is None or not hasattr(saver, "get_tuple"):
        return None
    tup = saver.get_tuple(thread_cfg(scratch, checkpoint_id=head))
    if tup is None or not any(w[1] == _interrupt_channel() for w in tup.pending_writes or ()):
        return None
    return tup


def write_paused(agent: Any, session: str, tup: Any, event_id: str) -> None:
    """Write the waiting checkpoint ``tup`` (``waiting_head``) into ``session``'s thread after its
    head, marked ``unsee_commit``, with its pending writes (module docstring)."""
    saver = agent.checkpointer
    current = saver.get_tuple(thread_cfg(session))
    parent = ((current.config.get("configurable") or {}).get("checkpoint_id")) if current is not None else None
    cfg = thread_cfg(session, checkpoint_id=parent) if parent else thread_cfg(session)
    cfg["configurable"].setdefault("checkpoint_ns", "")
    checkpoint = dict(tup.checkpoint)
    meta = {**(tup.metadata or {}), "unsee_commit": event_id}
    written = saver.put(cfg, checkpoint, meta, dict(checkpoint.get("channel_versions") or {}))
    by_task: dict[str, list[tuple[str, Any]]] = defaultdict(list)
    for task_id, channel, value in tup.pending_writes or ():
        by_task[task_id].append((channel, value))
    for task_id, writes in by_task.items():
        saver.put_writes(written, writes, task_id)
