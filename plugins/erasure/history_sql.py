"""A SqliteSaver thread's history rewritten in place with SQL: the suffix only, one transaction.

:func:`~unsee.plugins.erasure.history.stage_rewrite` + ``swap_in`` work through
the saver API, so every checkpoint of the thread is decoded, re-encoded and
written twice, and the thread is partial during the swap. On a plain
``SqliteSaver`` the same new history (:func:`~.history.plan_rewrite` decides
it) is reached by row operations in ONE SQLite transaction:

- the clean prefix (and kept side branches, and the turns after the commit)
  stay where they are: never decoded, never rewritten (Lemma 1: both worlds
  share them; the byte-level audit still reads them);
- the dropped checkpoints and their writes are deleted;
- the counterfactual checkpoints and their writes are row-copied from the
  scratch thread (the value blobs as stored; only the metadata is rebuilt);
- the re-parented checkpoints get their new parent, and, on a
  ``DeltaChannel`` graph, their rebuilt delta values (the only blobs decoded
  and encoded again).

A crash anywhere rolls the transaction back: the thread is the old one and a
rerun starts over, so no journal step is needed between stage and swap.
An encrypted saver (``keys.EncryptingSaver``) is not handled here: its whole
history is re-encrypted under a new key, which needs the API path.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from langgraph.channels.base import BaseChannel
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple, get_checkpoint_metadata
from langgraph.checkpoint.base.id import uuid6

from .history import (HistoryNotRewritable, Holds, _holds, _id, _materialize, _parent, config_of, copied_metadata,
                      plan_rewrite)

__all__ = ["InPlaceRewrite", "rewrite_sqlite", "sqlite_saver_conn"]


def sqlite_saver_conn(saver: Any) -> sqlite3.Connection | None:
    """The connection of a plain ``SqliteSaver`` (its own tables, values as its serde wrote
    them), else None (any other saver, an encrypting wrapper included: the API path)."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    if not isinstance(saver, SqliteSaver):
        return None
    conn = getattr(saver, "conn", None)
    return conn if isinstance(conn, sqlite3.Connection) else None


@dataclass
class InPlaceRewrite:
    """What :func:`rewrite_sqlite` did: checkpoints kept in place, row-copied, deleted, and
    the blobs it had to decode (the re-parented delta checkpoints only)."""

    kept: int
    suffix: int
    dropped: int
    reencoded: int


def _light(conn: sqlite3.Connection, thread: str) -> list[CheckpointTuple]:
    """``thread``'s root checkpoints, oldest first, with ids, parents and metadata only."""
    rows = conn.execute("SELECT checkpoint_id, parent_checkpoint_id, metadata FROM checkpoints "
                        "WHERE thread_id = ? AND checkpoint_ns = '' ORDER BY checkpoint_id", (thread,)).fetchall()
    return [CheckpointTuple(config_of(thread, cid), {"id": cid, "channel_values": {}, "channel_versions": {}},
                            json.loads(meta) if meta is not None else {},
                            config_of(thread, parent) if parent else None, None)
            for cid, parent, meta in rows]


def rewrite_sqlite(saver: BaseCheckpointSaver, thread: str, *, fork_checkpoint_id: str | None, suffix_thread: str,
                   holds_target: Holds, marker: dict, continue_after: Callable[[dict], bool] | None,
                   specs: dict[str, BaseChannel] | None, points: Callable[[str], None] = lambda name: None,
                   holds_row: Callable[[str, str], bool | None] | None = None) -> InPlaceRewrite:
    """``thread`` becomes its clean prefix + ``suffix_thread``'s counterfactual, in one transaction.

    The new history is :func:`~.history.stage_rewrite`'s, except that checkpoints
    before the fork keep their metadata (no marker: they were not rewritten).
    ``points(name)`` is called inside the transaction after the deletes
    ("erase:history:staged") and after the copies ("erase:history:swapping"): an
    exception there rolls everything back. Raises :class:`HistoryNotRewritable`
    (nothing written) as ``stage_rewrite``; the saver must be a plain SqliteSaver
    (:func:`sqlite_saver_conn`). Hold the session's lock.

    ``holds_row(thread, checkpoint_id)``: whether a checkpoint's stored rows hold the
    target (``row_audit.sqlite_checkpoint_holds``: judged from their bytes, an opaque row
    decoded); given, the scratch thread is listed without decoding it. Not given, every
    checked checkpoint is decoded."""
    conn = sqlite_saver_conn(saver)
    if conn is None:
        raise HistoryNotRewritable(f"{type(saver).__name__} is not a plain SqliteSaver")
    lock = saver.lock
    with lock:
        if conn.execute("SELECT 1 FROM checkpoints WHERE thread_id = ? AND checkpoint_ns != '' LIMIT 1",
                        (thread,)).fetchone():
            raise HistoryNotRewritable(f"thread {thread!r} has subgraph checkpoints: not rewritten")
        tuples = _light(conn, thread)
        scratch = _light(conn, suffix_thread) if holds_row is not None else None
    if scratch is None:
        scratch = list(reversed(list(saver.list(config_of(suffix_thread)))))

    def load(t: CheckpointTuple) -> CheckpointTuple:
        if t.pending_writes is not None:  # already whole
            return t
        full = saver.get_tuple(t.config)
        if full is None:
            raise HistoryNotRewritable(f"checkpoint {_id(t)} vanished during the rewrite")
        return full

    def holds(t: CheckpointTuple) -> bool:
        if holds_row is not None:
            conf = t.config["configurable"]
            said = holds_row(conf["thread_id"], conf["checkpoint_id"])
            if said is not None:
                return said
        return _holds(load(t), holds_target)

    plan = plan_rewrite(saver, thread, tuples, scratch, fork_checkpoint_id=fork_checkpoint_id,
                        suffix_thread=suffix_thread, holds=holds, holds_value=holds_target,
                        continue_after=continue_after, specs=specs, check_prefix=False, load=load)
    kept = plan.kept_ids
    dropped = [_id(t) for t in tuples if _id(t) not in kept]
    taken = {_id(t) for t in tuples}
    serde = saver.serde

    # everything to write, computed before the transaction (encoding happens outside the lock)
    inserts: list[tuple] = []   # (new id, parent, old id, metadata bytes, (type, blob) or None)
    ids: dict[str, str] = {}
    for t in plan.suffix:
        old = _id(t)
        new = old if old not in taken else str(uuid6(clock_seq=len(taken)))
        taken.add(new)
        ids[old] = new
        parent = plan.parents[old] if old in plan.parents else ids.get(_parent(t) or "")
        meta = copied_metadata(t.metadata, scrub=suffix_thread, rename_to=thread, meta_update=marker,
                               step_shift=plan.shift)
        meta_bytes = json.dumps(get_checkpoint_metadata(config_of(thread, parent), meta),
                                ensure_ascii=False).encode("utf-8", "ignore")
        blob = None
        if new != old or old in plan.materialize:
            ckpt = {**load(t).checkpoint, "id": new}
            if old in plan.materialize:
                _materialize(ckpt, meta, plan.materialize[old], specs or {})
                meta_bytes = json.dumps(get_checkpoint_metadata(config_of(thread, parent), meta),
                                        ensure_ascii=False).encode("utf-8", "ignore")
            blob = serde.dumps_typed(ckpt)
        inserts.append((new, parent, old, meta_bytes, blob))
    after_fix = None  # (id, new parent, (type, blob) or None, metadata bytes or None)
    if plan.after:
        a0 = plan.after[0]
        parent = ids.get(plan.head or "", plan.head)
        blob = meta_bytes = None
        if _id(a0) in plan.materialize:
            ckpt, meta = dict(a0.checkpoint), dict(a0.metadata or {})
            _materialize(ckpt, meta, plan.materialize[_id(a0)], specs or {})
            blob = serde.dumps_typed(ckpt)
            meta_bytes = json.dumps(meta, ensure_ascii=False).encode("utf-8", "ignore")
        after_fix = (_id(a0), parent, blob, meta_bytes)

    with lock:
        if conn.in_transaction:
            conn.commit()  # (the saver commits after each call; nothing of ours is pending)
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.executemany("DELETE FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = '' AND checkpoint_id = ?",
                             [(thread, cid) for cid in dropped])
            conn.executemany("DELETE FROM writes WHERE thread_id = ? AND checkpoint_ns = '' AND checkpoint_id = ?",
                             [(thread, cid) for cid in dropped])
            points("erase:history:staged")
            for new, parent, old, meta_bytes, blob in inserts:
                if blob is None:  # the value blob as stored (its id is unchanged)
                    conn.execute(
                        "INSERT OR REPLACE INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, "
                        "parent_checkpoint_id, type, checkpoint, metadata) SELECT ?, '', ?, ?, type, checkpoint, ? "
                        "FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = '' AND checkpoint_id = ?",
                        (thread, new, parent, meta_bytes, suffix_thread, old))
                else:
                    conn.execute(
                        "INSERT OR REPLACE INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, "
                        "parent_checkpoint_id, type, checkpoint, metadata) VALUES (?, '', ?, ?, ?, ?, ?)",
                        (thread, new, parent, blob[0], blob[1], meta_bytes))
                conn.execute(
                    "INSERT OR REPLACE INTO writes (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, "
                    "channel, type, value) SELECT ?, '', ?, task_id, task_path, idx, channel, type, value "
                    "FROM writes WHERE thread_id = ? AND checkpoint_ns = '' AND checkpoint_id = ?",
                    (thread, new, suffix_thread, old))
            if after_fix is not None:
                cid, parent, blob, meta_bytes = after_fix
                conn.execute("UPDATE checkpoints SET parent_checkpoint_id = ? WHERE thread_id = ? "
                             "AND checkpoint_ns = '' AND checkpoint_id = ?", (parent, thread, cid))
                if blob is not None:
                    conn.execute("UPDATE checkpoints SET type = ?, checkpoint = ?, metadata = ? WHERE thread_id = ? "
                                 "AND checkpoint_ns = '' AND checkpoint_id = ?",
                                 (blob[0], blob[1], meta_bytes, thread, cid))
            points("erase:history:swapping")
            conn.commit()
        except BaseException:
            conn.rollback()
            raise
    reencoded = sum(1 for *_, blob in inserts if blob is not None) + bool(after_fix and after_fix[2] is not None)
    return InPlaceRewrite(kept=len(kept), suffix=len(plan.suffix), dropped=len(dropped), reencoded=reencoded)
