"""A thread's history rewritten in place on an SQL saver: the suffix only, one transaction.

:func:`~unsee.plugins.erasure.history.stage_rewrite` + ``swap_in`` work through
the saver API, so every checkpoint of the thread is decoded, re-encoded and
written twice, and the thread is partial during the swap. On a plain SQL saver
(``SqliteSaver`` here, ``PostgresSaver`` in ``history_pg.py``) the same new
history (:func:`~.history.plan_rewrite` decides it) is reached by row
operations in ONE transaction:

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
What rows to write is saver-neutral (:func:`plan_rows`); each executor lists
its light tuples and runs its own SQL. An encrypted saver
(``keys.EncryptingSaver``) is not handled here: its whole history is
re-encrypted under a new key, which needs the API path.
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

from unsee.middleware.checkpointers import driver_for, driver_or_generic

from .history import (HistoryNotRewritable, Holds, RewritePlan, _holds, _id, _materialize, _parent, config_of,
                      copied_metadata, plan_rewrite)

__all__ = ["AfterFix", "InPlaceRewrite", "RowCopy", "RowPlan", "light_tuple", "plan_rows", "rewrite_sqlite",
           "sqlite_saver_conn"]

#: ``holds_row(thread, checkpoint_id)``: whether a checkpoint's stored rows hold the target (None: unknown)
HoldsRow = Callable[[str, str], bool | None]


def sqlite_saver_conn(saver: Any) -> sqlite3.Connection | None:
    """The connection of a saver whose SQLite driver is ``sql_rewritable`` (its own tables,
    values as its serde wrote them), else None (any other saver, an encrypting wrapper
    included: the API path)."""
    driver = driver_or_generic(saver)
    return driver.connection if driver.engine == "sqlite" and driver.sql_rewritable() else None


@dataclass
class InPlaceRewrite:
    """What an in-place rewrite did: checkpoints kept in place, row-copied, deleted, the
    values it had to encode again (the re-parented delta checkpoints; on SQLite also a copy
    whose id was taken), and on a saver with blob rows (PostgreSQL) the blobs copied/deleted."""

    kept: int
    suffix: int
    dropped: int
    reencoded: int
    blobs_copied: int | None = None
    blobs_deleted: int | None = None

    def note(self) -> str:
        """The erasure's note: what was kept, copied, deleted and re-encoded."""
        blobs = ("" if self.blobs_copied is None else
                 f"; {self.blobs_copied} value blobs row-copied, {self.blobs_deleted} no checkpoint references deleted")
        return (f"history rewritten in place: {self.kept} checkpoints kept untouched, {self.suffix} counterfactual "
                f"ones row-copied, {self.dropped} deleted ({self.reencoded} values re-encoded){blobs}")


@dataclass
class RowCopy:
    """One counterfactual checkpoint to copy into the thread."""

    old: str
    new: str
    parent: str | None
    #: the metadata to store (rebuilt: marker, steps shifted, the scratch thread's name dropped)
    metadata: dict
    #: the checkpoint to encode (``id`` = ``new``) where its delta values were rebuilt; None: the stored row
    checkpoint: dict | None
    source: CheckpointTuple


@dataclass
class AfterFix:
    """The first turn kept after the commit: its new parent, and its rebuilt delta values if any."""

    checkpoint_id: str
    parent: str | None
    checkpoint: dict | None
    metadata: dict | None


@dataclass
class RowPlan:
    """What an in-place rewrite writes (:func:`plan_rows`), the same for every SQL saver."""

    plan: RewritePlan
    dropped: list[str]
    copies: list[RowCopy]
    after_fix: AfterFix | None
    #: a light tuple -> the whole one (``saver.get_tuple``; a whole one is returned as is)
    load: Callable[[CheckpointTuple], CheckpointTuple]

    @property
    def kept(self) -> int:
        return len(self.plan.kept_ids)

    @property
    def reencoded(self) -> int:
        """The checkpoints whose delta values were rebuilt (encoded again)."""
        return (sum(1 for c in self.copies if c.checkpoint is not None)
                + bool(self.after_fix and self.after_fix.checkpoint is not None))


def light_tuple(thread: str, checkpoint_id: str, parent: str | None, metadata: dict | None,
                checkpoint: dict | None = None) -> CheckpointTuple:
    """A checkpoint as listed without decoding its values (``pending_writes`` None marks it light)."""
    ckpt = {"id": checkpoint_id, "channel_values": {}, "channel_versions": {}, **(checkpoint or {})}
    return CheckpointTuple(config_of(thread, checkpoint_id), ckpt, metadata or {},
                           config_of(thread, parent) if parent else None, None)


def plan_rows(saver: BaseCheckpointSaver, thread: str, tuples: list[CheckpointTuple],
              scratch: list[CheckpointTuple] | None, *, fork_checkpoint_id: str | None, suffix_thread: str,
              holds_target: Holds, marker: dict, continue_after: Callable[[dict], bool] | None,
              specs: dict[str, BaseChannel] | None, holds_row: HoldsRow | None = None) -> RowPlan:
    """The rows an in-place rewrite of ``thread`` writes; nothing is written here.

    ``tuples``: ``thread``'s root checkpoints, oldest first, light (:func:`light_tuple`);
    ``scratch``: ``suffix_thread``'s, light, or None (then listed whole through the
    saver: decoded). Only the checkpoints :func:`~.history.plan_rewrite` asks about
    are loaded: side-branch candidates, the suffix (unless ``holds_row`` judges it),
    the turns after the commit, the re-parented ones on a delta graph. The new
    history is ``stage_rewrite``'s, except that checkpoints before the fork keep their
    metadata (no marker: they were not rewritten). Encoding happens here, outside
    the executor's transaction. Raises :class:`HistoryNotRewritable` as ``stage_rewrite``."""
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
    # (a dropped checkpoint's id is free again: the rewrite deletes it before it inserts; a copy
    # keeps its id where it can, which the pending writes' task ids derive from: a commit that
    # left the session waiting at an interrupt holds the scratch head under its own id)
    taken = {_id(t) for t in tuples if _id(t) in kept}
    copies: list[RowCopy] = []
    ids: dict[str, str] = {}
    for t in plan.suffix:
        old = _id(t)
        new = old if old not in taken else str(uuid6(clock_seq=len(taken)))
        taken.add(new)
        ids[old] = new
        parent = plan.parents[old] if old in plan.parents else ids.get(_parent(t) or "")
        meta = copied_metadata(t.metadata, scrub=suffix_thread, rename_to=thread, meta_update=marker,
                               step_shift=plan.shift)
        ckpt = None
        if old in plan.materialize:
            ckpt = {**load(t).checkpoint, "id": new}
            _materialize(ckpt, meta, plan.materialize[old], specs or {})
        copies.append(RowCopy(old, new, parent, get_checkpoint_metadata(config_of(thread, parent), meta), ckpt, t))
    after_fix = None
    if plan.after:
        a0 = plan.after[0]
        ckpt = meta = None
        if _id(a0) in plan.materialize:
            ckpt, meta = dict(a0.checkpoint), dict(a0.metadata or {})
            _materialize(ckpt, meta, plan.materialize[_id(a0)], specs or {})
        after_fix = AfterFix(_id(a0), ids.get(plan.head or "", plan.head), ckpt, meta)
    return RowPlan(plan, dropped, copies, after_fix, load)


def _light(conn: sqlite3.Connection, thread: str) -> list[CheckpointTuple]:
    """``thread``'s root checkpoints, oldest first, with ids, parents and metadata only."""
    rows = conn.execute("SELECT checkpoint_id, parent_checkpoint_id, metadata FROM checkpoints "
                        "WHERE thread_id = ? AND checkpoint_ns = '' ORDER BY checkpoint_id", (thread,)).fetchall()
    return [light_tuple(thread, cid, parent, json.loads(meta) if meta is not None else {})
            for cid, parent, meta in rows]


def _json(meta: dict) -> bytes:
    return json.dumps(meta, ensure_ascii=False).encode("utf-8", "ignore")


def rewrite_sqlite(saver: BaseCheckpointSaver, thread: str, *, fork_checkpoint_id: str | None, suffix_thread: str,
                   holds_target: Holds, marker: dict, continue_after: Callable[[dict], bool] | None,
                   specs: dict[str, BaseChannel] | None, points: Callable[[str], None] = lambda name: None,
                   holds_row: HoldsRow | None = None) -> InPlaceRewrite:
    """``thread`` becomes its clean prefix + ``suffix_thread``'s counterfactual, in one transaction.

    The rows are :func:`plan_rows`'. ``points(name)`` is called inside the transaction
    after the deletes ("erase:history:staged") and after the copies
    ("erase:history:swapping"): an exception there rolls everything back. Raises
    :class:`HistoryNotRewritable` (nothing written) as ``stage_rewrite``; the saver must
    be a plain SqliteSaver (:func:`sqlite_saver_conn`). Hold the session's lock.

    ``holds_row(thread, checkpoint_id)``: whether a checkpoint's stored rows hold the
    target (``row_audit.sqlite_checkpoint_holds``: judged from their bytes, an opaque row
    decoded); given, the scratch thread is listed without decoding it. Not given, every
    checked checkpoint is decoded."""
    conn = sqlite_saver_conn(saver)
    if conn is None:
        raise HistoryNotRewritable(f"{type(saver).__name__} is not a plain SqliteSaver")
    lock = driver_for(saver).lock
    with lock:
        tuples = _light(conn, thread)
        scratch = _light(conn, suffix_thread) if holds_row is not None else None
    rows = plan_rows(saver, thread, tuples, scratch, fork_checkpoint_id=fork_checkpoint_id,
                     suffix_thread=suffix_thread, holds_target=holds_target, marker=marker,
                     continue_after=continue_after, specs=specs, holds_row=holds_row)
    serde = saver.serde
    # (a checkpoint blob holds its id: a copy under a new id is encoded again too)
    inserts = [(c.new, c.parent, c.old, _json(c.metadata),
                serde.dumps_typed(c.checkpoint) if c.checkpoint is not None else
                serde.dumps_typed({**rows.load(c.source).checkpoint, "id": c.new}) if c.new != c.old else None)
               for c in rows.copies]
    fix = rows.after_fix
    after_blob = serde.dumps_typed(fix.checkpoint) if fix is not None and fix.checkpoint is not None else None

    with lock:
        if conn.in_transaction:
            conn.commit()  # (the saver commits after each call; nothing of ours is pending)
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.executemany("DELETE FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = '' AND checkpoint_id = ?",
                             [(thread, cid) for cid in rows.dropped])
            conn.executemany("DELETE FROM writes WHERE thread_id = ? AND checkpoint_ns = '' AND checkpoint_id = ?",
                             [(thread, cid) for cid in rows.dropped])
            # the working checkpoints of nested runs (``history.NESTED``): every one, old world's and
            # counterfactual's alike
            conn.execute("DELETE FROM checkpoints WHERE thread_id = ? AND checkpoint_ns != ''", (thread,))
            conn.execute("DELETE FROM writes WHERE thread_id = ? AND checkpoint_ns != ''", (thread,))
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
            if fix is not None:
                conn.execute("UPDATE checkpoints SET parent_checkpoint_id = ? WHERE thread_id = ? "
                             "AND checkpoint_ns = '' AND checkpoint_id = ?", (fix.parent, thread, fix.checkpoint_id))
                if after_blob is not None:
                    conn.execute("UPDATE checkpoints SET type = ?, checkpoint = ?, metadata = ? WHERE thread_id = ? "
                                 "AND checkpoint_ns = '' AND checkpoint_id = ?",
                                 (after_blob[0], after_blob[1], _json(fix.metadata or {}), thread, fix.checkpoint_id))
            points("erase:history:swapping")
            conn.commit()
        except BaseException:
            conn.rollback()
            raise
    reencoded = sum(1 for *_, blob in inserts if blob is not None) + (after_blob is not None)
    return InPlaceRewrite(kept=rows.kept, suffix=len(rows.copies), dropped=len(rows.dropped), reencoded=reencoded)
