"""The store's batching writer: one background thread, one transaction per batch of batches.

Recording is an observer and must not put SQLite commits on the agent's hot
path: :meth:`BatchWriter.submit` queues a :class:`Batch` (or a thunk the
writer thread turns into one), and the thread writes what is queued in one
transaction per file. ``flush()`` waits until everything submitted so far is
durable; readers call it first. A failed write never raises into the agent:
it is logged, counted, and the session is marked incomplete.

Submitting is a lock-free append that does not wake the writer. The thread
runs the *producers* registered with :meth:`BatchWriter.add_producer` (the
recorder's queued recording work, whose spans become batches) when it is
kicked (:meth:`BatchWriter.kick`: the recorder kicks it as the agent starts
to wait on a model or a tool, so that work overlaps the wait), and writes
what is queued — in one transaction per file, the fewer the better — when a
kick asks for a write (the end of a run), when ``flush()`` does, when
``WAKE_AT`` items are queued, and at the latest ``IDLE_WRITE_S`` after its
last write.

Work that must follow the records (a run's lease is given back only once the run's
records are written: a forget in another process never plans on a partial record) is
queued with :meth:`BatchWriter.after_write`: it runs on the writer thread once
everything queued before it is written.
"""

from __future__ import annotations

import collections
import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from .records import Artifact, Checkpoint
from .sqldb import Db
from .store_schema import CONTENT_UPSERT, JOURNAL_UPSERT, SPAN_UPSERT, SpanRow, artifact_row, checkpoint_row, span_row

log = logging.getLogger("unsee.store")

#: the longest a queued item waits for the writer when nobody hands the queue over (seconds)
IDLE_WRITE_S = 0.05
#: queued items at which a submit wakes the writer itself
WAKE_AT = 256
#: items written in one transaction at most
MAX_BATCH = 512


class _AfterWrite:
    """A queued callback: run once everything queued before it is written (or failed)."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[], None]):
        self.fn = fn


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
        #: batches, thunks, flush marks (Events) and the stop mark (None), in submission order
        self._queue: collections.deque[Batch | Callable[[], Batch | None] | threading.Event | None] = (
            collections.deque())
        self._wake = threading.Event()
        #: write requests so far (a count, not a flag: a request made while the writer is
        #: between reading and clearing a flag would be lost)
        self._write_requests = 0
        self._producers: list[Callable[[], None]] = []
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
        self._queue.append(batch)  # (atomic: no lock, and the writer is not woken for it)
        if len(self._queue) >= WAKE_AT:
            self.kick(write=True)

    def after_write(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the writer thread once everything submitted so far is written (at once,
        on this thread, when the writer is gone). Called on the writer thread (a producer's task),
        it runs after the batches that task's producer round submitted. ``fn`` must not raise; it
        is logged if it does."""
        if self._closed or not self._writer.is_alive():
            _run_callback(fn)
            return
        self._queue.append(_AfterWrite(fn))
        self.kick(write=True)

    def add_producer(self, produce: Callable[[], None]) -> None:
        """Run ``produce`` (work that submits batches) before each write and in every flush."""
        self._producers.append(produce)

    def kick(self, write: bool = False) -> None:
        """Have the producers' queued work done now (the caller is about to wait: a model or
        tool call); ``write``: and what is queued written (a run ended)."""
        if write:
            self._write_requests += 1
        self._wake.set()

    def _produce(self) -> None:
        for produce in self._producers:
            try:
                produce()
            except Exception:  # observer: a producer's failure is its own to record
                log.exception("a store producer failed")

    def flush(self, timeout: float = 30.0) -> None:
        """Block until every batch submitted so far is written (or failed)."""
        if self._closed or threading.current_thread() is self._writer or not self._writer.is_alive():
            return
        self._produce()  # (on this thread: what it submits is queued before the mark)
        done = threading.Event()
        self._queue.append(done)
        self.kick(write=True)
        if not done.wait(timeout):
            log.warning("store flush timed out with %d items queued", len(self._queue))

    def _run(self) -> None:
        q = self._queue
        last, seen = time.monotonic(), 0
        while True:
            self._wake.wait(IDLE_WRITE_S)
            self._wake.clear()  # (before draining: a hand-over from now on is seen next round)
            self._produce()
            asked = self._write_requests
            if asked == seen and time.monotonic() - last < IDLE_WRITE_S:
                continue
            seen, last = asked, time.monotonic()  # (a request from now on is seen next round)
            while q:
                # Drain what is queued: one transaction for many spans.
                items: list = []
                marks: list[threading.Event | _AfterWrite] = []
                stop = False
                while q and len(items) < MAX_BATCH:
                    item = q.popleft()
                    if item is None:
                        stop = True
                        break
                    if isinstance(item, (threading.Event, _AfterWrite)):
                        marks.append(item)
                    else:
                        items.append(item)
                if items:
                    self._write_all(items)
                for done in marks:  # everything queued before each mark is written
                    if isinstance(done, _AfterWrite):
                        _run_callback(done.fn)
                    else:
                        done.set()
                if stop:
                    return

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

    def _write(self, batches: list[Batch]) -> None:
        """One transaction per file for ``batches``, one statement per kind of row.

        Rows keep the batches' order; a commit (``committed=1``) goes after every artifact of
        the group (a tool call's artifact is recorded before its span is committed)."""
        now = time.time_ns()
        #: session -> its last tokenizer (the session upsert keeps the last one given)
        sessions: dict[str, str | None] = {}
        content, journal, artifacts, checkpoints, commits, spans = [], [], [], [], [], []
        for b in batches:
            sid = b.session_id
            if b.tokenizer is not None or sid not in sessions:
                sessions[sid] = b.tokenizer or sessions.get(sid)
            content.extend((sid, aid, text) for aid, text in b.content.items())
            journal.extend((sid, seq, json.dumps(list(ns)), key, old, new) for seq, ns, key, old, new in b.journal)
            artifacts.extend(map(artifact_row, b.artifacts))
            checkpoints.extend(map(checkpoint_row, b.checkpoints))
            commits.extend((sid, aid) for aid in b.commits)
            if b.span is not None:
                spans.append(span_row(b.span))
        with self._read_lock:
            db, vault = self._db, self._vault
            with vault.transaction():
                if content:
                    vault.executemany(CONTENT_UPSERT, content)
                if journal:
                    vault.executemany(JOURNAL_UPSERT, journal)
            with db.transaction():
                db.executemany(
                    "INSERT INTO sessions(session_id, created_ns, updated_ns, tokenizer) VALUES (?,?,?,?)"
                    " ON CONFLICT(session_id) DO UPDATE SET updated_ns=excluded.updated_ns,"
                    " tokenizer=COALESCE(excluded.tokenizer, sessions.tokenizer)",
                    [(sid, now, now, tok) for sid, tok in sessions.items()],
                )
                if artifacts:
                    db.executemany(
                        "INSERT INTO artifacts VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT DO NOTHING",
                        artifacts)
                if checkpoints:
                    db.executemany(
                        "INSERT INTO checkpoints VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT DO NOTHING",
                        checkpoints)
                if commits:
                    db.executemany("UPDATE artifacts SET committed=1 WHERE session_id=? AND id=?", commits)
                if spans:
                    db.executemany(SPAN_UPSERT, spans)

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
        self._queue.append(None)
        self._wake.set()
        self._writer.join(timeout=10)


def _run_callback(fn: Callable[[], None]) -> None:
    try:
        fn()
    except Exception:  # observer: the writer thread must live on
        log.exception("a callback after a store write failed")
