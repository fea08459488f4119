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

The writer shares the interpreter lock with the agent. While the agent runs
Python (a run in progress and no model or tool call waiting: the
``agent_busy`` function given to :meth:`BatchWriter.add_producer`), work done
on the writer thread delays the agent: each time the agent's thread lets the
lock go (a SQLite call, a lock wait) the writer takes it, for up to the
interpreter's switch interval (5 ms). So the writer stops between two tasks
when the agent gets busy and leaves the rest, and the write, to the agent's
next wait, to the end of its runs, or to a flush. An agent that never waits
(a scripted model) hands a backlog over itself: at a model or tool call, when
:meth:`BatchWriter.backlog_due` (``WAKE_AT`` items, or work left for
``BUSY_DELAY_S``), it flushes, and the writer writes while it waits. Work left
for ``HOLD_MAX_S`` is done regardless.

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
#: queued work this old (seconds) is handed over at the agent's next call (``backlog_due``)
BUSY_DELAY_S = 0.25
#: the longest the writer leaves its work to a busy agent before doing it anyway (seconds)
HOLD_MAX_S = 2.0
#: how long after a kick the writer looks whether the agent still waits (seconds)
KICK_GRACE_S = 0.005


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
    #: a span that describes the session without being one of its records (a forget's trace, a
    #: verdict: ``processor.describing_session``): stored with its spans, the session untouched
    describes: bool = False


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
        self._producers: list[Callable[..., None]] = []
        self._after_marks: list[Callable[[], None]] = []
        #: whether the agent is running Python now (the writer then leaves work for later)
        self._agent_busy: Callable[[], bool] = _never
        #: flushes waiting on the writer (they write whatever the agent does)
        self._urgent = 0
        #: since when the writer has left its work to a busy agent (None: it has not)
        self._held_since: float | None = None
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
            for after in self._after_marks:
                _run_callback(after)
            return
        self._queue.append(_AfterWrite(fn))
        self._write_requests += 1  # (written at the writer's next round: a kick, a flush, its timeout)

    def after_marks(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the writer thread after each round of :meth:`after_write` callbacks (and
        flush marks): what they set aside can be done once for all of them."""
        self._after_marks.append(fn)

    def add_producer(self, produce: Callable[..., None], agent_busy: Callable[[], bool] | None = None) -> None:
        """Run ``produce`` (work that submits batches) before each write and in every flush.
        The writer thread calls ``produce(pause)``: it stops early when ``pause()`` says so (the
        rest stays queued); a flush calls ``produce()``, which does everything. ``agent_busy``:
        whether the agent runs Python now (see the module)."""
        self._producers.append(produce)
        if agent_busy is not None:
            self._agent_busy = agent_busy

    def kick(self, write: bool = False) -> None:
        """Have the producers' queued work done now (the caller is about to wait: a model or
        tool call); ``write``: and what is queued written (a run ended)."""
        if write:
            self._write_requests += 1
        self._wake.set()

    def _produce(self, pause: Callable[[], bool] | None = None) -> None:
        for produce in self._producers:
            try:
                produce(pause) if pause is not None else produce()
            except Exception:  # observer: a producer's failure is its own to record
                log.exception("a store producer failed")

    def flush(self, timeout: float = 30.0) -> None:
        """Block until every batch submitted so far is written (or failed)."""
        if self._closed or threading.current_thread() is self._writer or not self._writer.is_alive():
            return
        self._produce()  # (on this thread: what it submits is queued before the mark)
        done = threading.Event()
        self._urgent += 1
        try:
            self._queue.append(done)
            self.kick(write=True)
            if not done.wait(timeout):
                log.warning("store flush timed out with %d items queued", len(self._queue))
        finally:
            self._urgent -= 1

    def _agent_busy_pause(self) -> bool:
        """Stop producing for now (between two tasks): the agent runs Python and nobody flushes."""
        return not self._urgent and self._agent_busy()

    def _held_back(self) -> bool:
        """Leave the work to the agent's next wait: it runs Python now, nobody flushes, the store
        is open, and the work has not been left for ``HOLD_MAX_S`` already."""
        if self._urgent or self._closed or not self._agent_busy():
            return False
        since = self._held_since
        return since is None or time.monotonic() - since < HOLD_MAX_S

    def _hold_back(self) -> bool:
        """:meth:`_held_back`, noting since when the work is left (``backlog_due``)."""
        if not self._held_back():
            return False
        if self._held_since is None:
            self._held_since = time.monotonic()
        return True

    def backlog_due(self) -> bool:
        """Whether an agent that keeps running Python should hand its queued work over now (the
        recorder asks at each model or tool call: it then flushes, and the writer writes while the
        agent waits, instead of both threads taking the interpreter lock in turns)."""
        since = self._held_since
        return since is not None and (len(self._queue) >= WAKE_AT or time.monotonic() - since >= BUSY_DELAY_S)

    def _run(self) -> None:
        q = self._queue
        last, seen = time.monotonic(), 0
        busy = self._agent_busy_pause
        while True:
            kicked = self._wake.wait(IDLE_WRITE_S)
            self._wake.clear()  # (before draining: a hand-over from now on is seen next round)
            if kicked and not self._urgent and not self._closed:
                # A kick says the agent starts to wait on a call; a call that returns at once (a
                # quick tool) leaves the agent busy again: look after a moment, lock released.
                time.sleep(KICK_GRACE_S)
            if self._hold_back():
                continue
            self._produce(busy)
            asked = self._write_requests
            if asked == seen and time.monotonic() - last < IDLE_WRITE_S:
                continue
            if self._hold_back():  # (the agent got busy meanwhile: write at its next wait)
                continue
            self._held_since = None
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
                callbacks = [m for m in marks if isinstance(m, _AfterWrite)]
                for done in callbacks:  # everything queued before each mark is written
                    _run_callback(done.fn)
                if callbacks:
                    for fn in self._after_marks:
                        _run_callback(fn)
                for done in marks:  # (a flush returns after the callbacks queued before it ran)
                    if not isinstance(done, _AfterWrite):
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
                if not b.describes:  # (a lost trace of a forget or a verdict leaves the records whole)
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
            if b.describes:  # (not a record: the session's row, its updated time, stay as they are)
                if b.span is not None:
                    spans.append(span_row(b.span))
                continue
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
                if sessions:
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


def _never() -> bool:
    return False


def _run_callback(fn: Callable[[], None]) -> None:
    try:
        fn()
    except Exception:  # observer: the writer thread must live on
        log.exception("a callback after a store write failed")
