"""A ``PostgresSaver`` thread's history rewritten in place with SQL: the suffix only, one transaction.

The PostgreSQL executor of ``history_sql.py``'s in-place rewrite (its module
docstring says what is kept, copied and deleted; :func:`~.history_sql.plan_rows`
decides the rows). ``PostgresSaver`` keeps a checkpoint in three tables:
``checkpoints`` (a JSONB document with the inline primitive values; a value
in a blob is absent from ``channel_values``, or, for a ``_DeltaSnapshot``,
marked ``true``), ``checkpoint_blobs`` (one row per thread, namespace, channel
and *version*, shared by every checkpoint holding that version) and
``checkpoint_writes``. So, in ONE PostgreSQL transaction:

- the prefix's rows (and kept side branches', and the after-commit turns')
  are neither read for their values nor written — the first after-commit
  turn gets its new parent (and, on a delta graph, its rebuilt values);
- the dropped checkpoints and their writes are deleted, then every blob of
  the thread that no remaining checkpoint references (the target may be in
  one: a dropped checkpoint's message list);
- the counterfactual checkpoints, their writes and the blobs they reference
  are row-copied from the scratch thread (a new id only where the id is
  taken: then the JSONB's ``id`` too, set by the server; metadata rebuilt);
- only the re-parented checkpoints of a ``DeltaChannel`` graph are encoded
  again, as ``PostgresSaver.put`` splits a checkpoint: its document, and a
  blob for each rebuilt value (the other values' blobs stay as stored).

A crash anywhere rolls the transaction back (the thread is the old one; a
rerun starts over). It runs on the saver's own connection and lock
(``_cursor``: a ``Connection`` or a ``ConnectionPool``), as its ``prune``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langgraph.channels.base import BaseChannel
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple

from unsee.middleware.checkpointers import driver_for

from .history import HistoryNotRewritable, Holds, _snapshot_type, postgres_saver
from .history_sql import HoldsRow, InPlaceRewrite, light_tuple, plan_rows

__all__ = ["postgres_saver", "rewrite_postgres"]


_LIGHT = ("SELECT checkpoint_id, parent_checkpoint_id, metadata, checkpoint -> 'channel_versions' AS versions, "
          "checkpoint -> 'channel_values' AS inline FROM checkpoints WHERE thread_id = %s AND checkpoint_ns = '' "
          "ORDER BY checkpoint_id")
_COPY_CHECKPOINT = (
    "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, "
    "metadata) SELECT %s, '', %s, %s, type, jsonb_set(checkpoint, '{id}', to_jsonb(%s::text)), %s FROM checkpoints "
    "WHERE thread_id = %s AND checkpoint_ns = '' AND checkpoint_id = %s "
    "ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE SET parent_checkpoint_id = "
    "EXCLUDED.parent_checkpoint_id, type = EXCLUDED.type, checkpoint = EXCLUDED.checkpoint, "
    "metadata = EXCLUDED.metadata")
_PUT_CHECKPOINT = (
    "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata) "
    "VALUES (%s, '', %s, %s, %s, %s) ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE SET "
    "parent_checkpoint_id = EXCLUDED.parent_checkpoint_id, checkpoint = EXCLUDED.checkpoint, "
    "metadata = EXCLUDED.metadata")
_COPY_WRITES = (
    "INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, "
    "blob) SELECT %s, '', %s, task_id, task_path, idx, channel, type, blob FROM checkpoint_writes "
    "WHERE thread_id = %s AND checkpoint_ns = '' AND checkpoint_id = %s "
    "ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO UPDATE SET task_path = "
    "EXCLUDED.task_path, channel = EXCLUDED.channel, type = EXCLUDED.type, blob = EXCLUDED.blob")
# the blobs of every channel version the copied checkpoints name (a version's blob is shared)
_COPY_BLOBS = (
    "INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob) "
    "SELECT %s, '', b.channel, b.version, b.type, b.blob FROM checkpoint_blobs b "
    "WHERE b.thread_id = %s AND b.checkpoint_ns = '' AND (b.channel, b.version) IN ("
    "SELECT v.key, v.value FROM checkpoints c CROSS JOIN LATERAL jsonb_each_text(c.checkpoint -> 'channel_versions') v "
    "WHERE c.thread_id = %s AND c.checkpoint_ns = '' AND c.checkpoint_id = ANY(%s)) "
    "ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING RETURNING 1")
_PUT_BLOB = (
    "INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob) "
    "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (thread_id, checkpoint_ns, channel, version) "
    "DO UPDATE SET type = EXCLUDED.type, blob = EXCLUDED.blob")
# the referenced versions are collected once (a hash anti-join), not looked up per blob
_DROP_UNREFERENCED_BLOBS = (
    "WITH ref AS MATERIALIZED (SELECT DISTINCT c.checkpoint_ns, v.key AS channel, v.value AS version "
    "FROM checkpoints c CROSS JOIN LATERAL jsonb_each_text(c.checkpoint -> 'channel_versions') v "
    "WHERE c.thread_id = %s) "
    "DELETE FROM checkpoint_blobs b WHERE b.thread_id = %s AND NOT EXISTS (SELECT 1 FROM ref "
    "WHERE ref.checkpoint_ns = b.checkpoint_ns AND ref.channel = b.channel AND ref.version = b.version) RETURNING 1")


def _light(cur: Any, thread: str) -> list[CheckpointTuple]:
    """``thread``'s root checkpoints, oldest first: ids, parents, metadata, channel versions and
    the inline values (primitives, snapshot markers): no blob is read."""
    cur.execute(_LIGHT, (thread,))
    return [light_tuple(thread, r["checkpoint_id"], r["parent_checkpoint_id"], r["metadata"],
                        {"channel_versions": r["versions"] or {}, "channel_values": r["inline"] or {}})
            for r in cur.fetchall()]


def _split(saver: Any, thread: str, ckpt: dict, rebuilt: set[str]) -> tuple[dict, list[tuple]]:
    """(the JSONB document of ``ckpt``, blob rows of its ``rebuilt`` channels) as
    ``PostgresSaver.put`` splits a checkpoint: primitives inline, a ``_DeltaSnapshot`` as a
    ``true`` marker, every other value in a blob of its channel version."""
    snap = _snapshot_type()
    doc = {**ckpt, "channel_values": dict(ckpt.get("channel_values") or {})}
    values = doc["channel_values"]
    blobs = {}
    for k, v in list(values.items()):
        if isinstance(v, snap):
            values[k] = True
        elif v is not None and not isinstance(v, (str, int, float, bool)):
            del values[k]
        else:
            continue
        if k in rebuilt:  # (the other values' blobs are in the table already, as stored)
            blobs[k] = v
    versions = ckpt.get("channel_versions") or {}
    return doc, saver._dump_blobs(thread, "", blobs, {k: versions[k] for k in blobs})


def _meta(meta: dict) -> Any:
    from psycopg.types.json import Jsonb

    return Jsonb({k: v for k, v in meta.items() if k != "writes"})  # (as put: the writes are rows)


def rewrite_postgres(saver: BaseCheckpointSaver, thread: str, *, fork_checkpoint_id: str | None,
                     suffix_thread: str, holds_target: Holds, marker: dict,
                     continue_after: Callable[[dict], bool] | None, specs: dict[str, BaseChannel] | None,
                     points: Callable[[str], None] = lambda name: None,
                     holds_row: HoldsRow | None = None) -> InPlaceRewrite:
    """``thread`` becomes its clean prefix + ``suffix_thread``'s counterfactual, in one transaction.

    As :func:`~.history_sql.rewrite_sqlite` (the same rows, the same fault points
    called inside the transaction: "erase:history:staged" after the deletes,
    "erase:history:swapping" after the copies; an exception there rolls everything
    back), on a saver whose PostgreSQL driver is ``sql_rewritable`` (:func:`postgres_saver`). Raises
    :class:`HistoryNotRewritable` (nothing written) as ``stage_rewrite``; nested runs'
    checkpoints are deleted (``history.NESTED``). ``holds_row``: as ``rewrite_sqlite``'s; not given,
    the scratch thread (the suffix) is listed whole and each checkpoint the plan asks
    about is decoded — the prefix never is. Hold the session's lock."""
    from psycopg.pq import TransactionStatus
    from psycopg.types.json import Jsonb

    if not postgres_saver(saver):
        raise HistoryNotRewritable(f"{type(saver).__name__} is not a plain PostgresSaver")
    driver = driver_for(saver)
    with driver.cursor() as cur:
        tuples = _light(cur, thread)
        scratch = _light(cur, suffix_thread) if holds_row is not None else None
    rows = plan_rows(saver, thread, tuples, scratch, fork_checkpoint_id=fork_checkpoint_id,
                     suffix_thread=suffix_thread, holds_target=holds_target, marker=marker,
                     continue_after=continue_after, specs=specs, holds_row=holds_row)
    # everything encoded before the transaction: the rebuilt checkpoints only
    rebuilt = rows.plan.materialize
    puts, blob_rows = [], []
    for c in rows.copies:
        if c.checkpoint is not None:
            doc, blobs = _split(saver, thread, c.checkpoint, set(rebuilt[c.old]))
            puts.append((thread, c.new, c.parent, Jsonb(doc), _meta(c.metadata)))
            blob_rows += blobs
    copied = [c for c in rows.copies if c.checkpoint is None]
    fix, fix_doc = rows.after_fix, None
    if fix is not None and fix.checkpoint is not None:
        doc, blobs = _split(saver, thread, fix.checkpoint, set(rebuilt[fix.checkpoint_id]))
        fix_doc, blob_rows = Jsonb(doc), blob_rows + blobs

    with driver.cursor(sync_pipeline=True) as cur:  # (as prune: the transaction must not take in what ran before)
        conn = cur.connection
        if not conn.autocommit and conn.info.transaction_status != TransactionStatus.IDLE:
            # (a connection without autocommit is still in the reads above: ours would be a
            # savepoint inside that transaction, never committed by its end)
            conn.commit()
        with conn.transaction():
            cur.execute("DELETE FROM checkpoints WHERE thread_id = %s AND checkpoint_ns = '' "
                        "AND checkpoint_id = ANY(%s)", (thread, rows.dropped))
            cur.execute("DELETE FROM checkpoint_writes WHERE thread_id = %s AND checkpoint_ns = '' "
                        "AND checkpoint_id = ANY(%s)", (thread, rows.dropped))
            # the working checkpoints of nested runs (``history.NESTED``), their writes and values
            for table in ("checkpoints", "checkpoint_writes", "checkpoint_blobs"):
                cur.execute(f"DELETE FROM {table} WHERE thread_id = %s AND checkpoint_ns != ''", (thread,))
            points("erase:history:staged")
            if copied:
                cur.executemany(_COPY_CHECKPOINT, [(thread, c.new, c.parent, c.new, _meta(c.metadata), suffix_thread,
                                                    c.old) for c in copied])
            if puts:
                cur.executemany(_PUT_CHECKPOINT, puts)
            if rows.copies:
                cur.executemany(_COPY_WRITES, [(thread, c.new, suffix_thread, c.old) for c in rows.copies])
                cur.execute(_COPY_BLOBS, (thread, suffix_thread, suffix_thread, [c.old for c in rows.copies]))
                blobs_copied = len(cur.fetchall())
            else:
                blobs_copied = 0
            if fix is not None:
                cur.execute("UPDATE checkpoints SET parent_checkpoint_id = %s WHERE thread_id = %s "
                            "AND checkpoint_ns = '' AND checkpoint_id = %s", (fix.parent, thread, fix.checkpoint_id))
                if fix_doc is not None:
                    cur.execute("UPDATE checkpoints SET checkpoint = %s, metadata = %s WHERE thread_id = %s "
                                "AND checkpoint_ns = '' AND checkpoint_id = %s",
                                (fix_doc, _meta(fix.metadata or {}), thread, fix.checkpoint_id))
            if blob_rows:
                cur.executemany(_PUT_BLOB, blob_rows)
            cur.execute("SELECT count(*) AS n FROM checkpoints WHERE thread_id = %s AND checkpoint_ns = '' "
                        "AND checkpoint_id = ANY(%s)", (thread, [c.new for c in rows.copies]))
            if cur.fetchone()["n"] != len(rows.copies):  # a scratch row vanished meanwhile: roll back
                raise HistoryNotRewritable(f"scratch thread {suffix_thread!r} changed during the rewrite")
            cur.execute(_DROP_UNREFERENCED_BLOBS, (thread, thread))
            blobs_deleted = len(cur.fetchall())
            points("erase:history:swapping")
    return InPlaceRewrite(kept=rows.kept, suffix=len(rows.copies), dropped=len(rows.dropped),
                          reencoded=rows.reencoded, blobs_copied=blobs_copied, blobs_deleted=blobs_deleted)
