"""The store's batching writer: one background thread, one transaction per batch of batches.

Recording is an observer and must not put SQLite commits on the agent's hot
path: :meth:`BatchWriter.submit` queues a :class:`Batch` (or a thunk the
writer thread turns into one), and the thread writes what is queued in one
transaction per file. ``flush()`` waits until everything submitted so far is
durable; readers call it first. A failed write never raises into the agent:
it is logged, counted, and the session is marked incomplete.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from .records import Artifact, Checkpoint
from .sqldb import Db
from .store_schema import CONTENT_UPSERT, JOURNAL_UPSERT, SPAN_UPSERT, SpanRow, artifact_row, checkpoint_row, span_row

log = logging.getLogger("unsee.store")


@dataclass
class Batch:
    """What one finished span (or one recorder action) contributes to the store."""

    session_id: str
    artifacts: list[Artifact] = field(default_factory=list)
    checkpoints: list[Checkpoint] = field(default_factory=list)
    commits: list[str] = field(default_factory=list)
    span: SpanRow | None = None
    content: dict[str, str] = field(default_factory=dict)
    tokenizer: str | None = None
    #: memory-store writes: (seq, namespace, key, old JSON or None, new JSON or None)
    journal: list[tuple[int, tuple[str, ...], str, str | None, str | None]] = field(default_factory=list)


class BatchWriter:
    """The writing half of :class:`~unsee.middleware.store.ProvenanceStore` (a mixin).

    The store opens ``_db`` / ``_vault`` and guards them with ``_read_lock``;
    :meth:`_start_writer` starts the thread.
    """

    _db: Db
    _vault: Db
    _read_lock: threading.RLock

    def _start_writer(self) -> None:
        self._queue: queue.Queue[Batch | Callable[[], Batch | None] | None] = queue.Queue()
        self._pending = 0
        self._cond = threading.Condition()
        self.failures = 0
        #: session -> failures seen by this process (refuses forgetting even if the mark could not be written)
        self._incomplete: dict[str, int] = {}
        self._closed = False
        self._writer = threading.Thread(target=self._run, name="unsee-store-writer", daemon=True)
        self._writer.start()

    def submit(self, batch: "Batch | Callable[[], Batch | None]") -> None:
        """Queue a batch, or a thunk the writer thread turns into one (decoding
        finished spans there keeps that work off the agent's thread)."""
        if self._closed:
            if isinstance(batch, Batch):
                self.mark_failure(batch.session_id, "store closed")
            return
        with self._cond:
            self._pending += 1
        self._queue.put(batch)

    def flush(self, timeout: float = 30.0) -> None:
        """Block until every batch submitted so far is written (or failed)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._pending:
                left = deadline - time.monotonic()
                if left <= 0:
                    log.warning("store flush timed out with %d batches pending", self._pending)
                    return
                self._cond.wait(left)

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            batch = [item]
            # Drain what is already queued: one transaction for many spans.
            while len(batch) < 512:
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    self._write_all(batch)
                    return
                batch.append(nxt)
            self._write_all(batch)

    def _write_all(self, items: list) -> None:
        batches: list[Batch] = []
        for item in items:
            if isinstance(item, Batch):
                batches.append(item)
                continue
            try:
                made = item()
            except Exception as exc:
                log.exception("could not decode a span")
                self.failures += 1
                sid = getattr(item, "session_id", None)
                if sid:
                    self.mark_failure(sid, repr(exc))
                continue
            if made is not None:
                batches.append(made)
        try:
            self._write(batches)
        except Exception as exc:  # observer: never propagate, count and mark
            log.exception("provenance write failed")
            for b in batches:
                self.mark_failure(b.session_id, repr(exc))
        finally:
            with self._cond:
                self._pending -= len(items)
                self._cond.notify_all()

    def _write(self, batches: list[Batch]) -> None:
        now = time.time_ns()
        with self._read_lock:
            db, vault = self._db, self._vault
            with vault.transaction():
                for b in batches:
                    for aid, text in b.content.items():
                        vault.execute(CONTENT_UPSERT, (b.session_id, aid, text))
                    for seq, ns, key, old, new in b.journal:
                        vault.execute(JOURNAL_UPSERT, (b.session_id, seq, json.dumps(list(ns)), key, old, new))
            with db.transaction():
                for b in batches:
                    db.execute(
                        "INSERT INTO sessions(session_id, created_ns, updated_ns, tokenizer) VALUES (?,?,?,?)"
                        " ON CONFLICT(session_id) DO UPDATE SET updated_ns=excluded.updated_ns,"
                        " tokenizer=COALESCE(excluded.tokenizer, sessions.tokenizer)",
                        (b.session_id, now, now, b.tokenizer),
                    )
                    for a in b.artifacts:
                        db.execute(
                            "INSERT INTO artifacts VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT DO NOTHING",
                            artifact_row(a),
                        )
                    for c in b.checkpoints:
                        db.execute(
                            "INSERT INTO checkpoints VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT DO NOTHING",
                            checkpoint_row(c),
                        )
                    for aid in b.commits:
                        db.execute(
                            "UPDATE artifacts SET committed=1 WHERE session_id=? AND id=?",
                            (b.session_id, aid),
                        )
                    if b.span is not None:
                        db.execute(SPAN_UPSERT, span_row(b.span))

    def mark_failure(self, session_id: str, why: str) -> None:
        """Count a recording failure and mark the session incomplete (best effort)."""
        self.failures += 1
        self._incomplete[session_id] = self._incomplete.get(session_id, 0) + 1
        log.warning("recording of session %s is incomplete: %s", session_id, why)
        try:
            with self._read_lock:
                now = time.time_ns()
                self._db.execute(
                    "INSERT INTO sessions(session_id, created_ns, updated_ns, incomplete, failures)"
                    " VALUES (?,?,?,1,1) ON CONFLICT(session_id) DO UPDATE SET incomplete=1,"
                    " failures=sessions.failures+1, updated_ns=excluded.updated_ns",
                    (session_id, now, now),
                )
        except Exception:
            # The store itself is what failed; the in-memory mark still refuses forgetting.
            log.exception("could not persist the incomplete mark of %s", session_id)

    def _stop_writer(self) -> None:
        """Write what is queued, then end the thread (the store closes its files after)."""
        self.flush()
        self._closed = True
        self._queue.put(None)
        self._writer.join(timeout=10)
