"""A run that started while a forget replaced its session's state must not go on.

The recording middleware takes the session's run lease in ``before_agent``
(``leases.py``). By then LangGraph has loaded the state and written the run's
input checkpoint. If a forget (in any process) committed in between, that
input checkpoint sits on the old, tainted state. ``check_head`` (run only when
a forget ended on the session shortly before, or the run had to wait) finds
out: the state the run loaded was erased, or another writer's checkpoint is
the head, or a forget's commit (``unsee_commit`` in its metadata) is a sibling
of the run's input. Then it puts the forget's state back on top when the
run's own checkpoint is the head (the live state is never the run's stale
checkpoint) and raises ``SessionChanged``: the run fails before it did
anything, and can be run again from the rebuilt state.
"""

from __future__ import annotations

from typing import Any

from .errors import SessionChanged


def _id(t: Any) -> str | None:
    return t.config["configurable"]["checkpoint_id"] if t is not None else None


def _parent(t: Any) -> str | None:
    return ((t.parent_config or {}).get("configurable") or {}).get("checkpoint_id")


def _input_of(saver: Any, mine: Any, limit: int = 16) -> Any:
    """The run's input checkpoint: the nearest ``source="input"`` ancestor (other middlewares'
    before_agent steps may come between it and this one)."""
    t = mine
    for _ in range(limit):
        if t is None or not t.parent_config:
            return None
        t = saver.get_tuple(t.parent_config)
        if t is not None and (t.metadata or {}).get("source") == "input":
            return t
    return None


def check_head(saver: Any, sid: str, lg_ckpt: str | None, *, strict: bool = False) -> None:
    """``strict``: the run certainly overlapped a forget (it waited for it): when the state it
    loaded cannot be established (no checkpointer view, checkpoints not written yet), it does
    not go on. Otherwise (a forget merely ended shortly before) such a run goes on."""
    if lg_ckpt is None or not hasattr(saver, "get_tuple"):
        if strict:
            raise SessionChanged(sid)
        return
    cfg = {"configurable": {"thread_id": sid, "checkpoint_ns": ""}}
    mine = saver.get_tuple({"configurable": {**cfg["configurable"], "checkpoint_id": lg_ckpt}})
    inp = _input_of(saver, mine)
    if inp is None:
        if strict:
            raise SessionChanged(sid)
        return  # not the shape of a run's start (e.g. durability="exit"): nothing to compare
    base = (inp.parent_config or {}).get("configurable", {}).get("checkpoint_id")
    # (read to its end: an async saver's sync list wraps an async generator, which must not be
    # left half-read for the garbage collector to close off its loop)
    newest = next(iter(list(saver.list(cfg, before={"configurable": {"checkpoint_id": _id(inp)}}, limit=1))), None)
    head = saver.get_tuple(cfg)
    base_gone = base is not None and saver.get_tuple({"configurable": {**cfg["configurable"],
                                                                       "checkpoint_id": base}}) is None
    # a forget committed on the state this run loaded: a sibling of our input, marked by the commit
    # (a time-travel run's base is an older checkpoint on purpose: not this shape)
    sibling = (newest is not None and _id(newest) != base and _parent(newest) == base
               and "unsee_commit" in (newest.metadata or {}))
    if _id(head) == lg_ckpt and not base_gone and not sibling:
        return  # the state this run loaded is current
    if newest is not None and _id(head) == lg_ckpt:
        # the forget's commit is older than our input checkpoint: put its state back on top
        from langgraph.checkpoint.base.id import uuid6

        ck = {**newest.checkpoint, "id": str(uuid6())}
        saver.put(newest.config, ck, {**(newest.metadata or {}), "source": "update", "unsee_restored": True},
                  dict(ck.get("channel_versions", {})))
    raise SessionChanged(sid)
