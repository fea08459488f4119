"""Memory after a fork: the adapter that finds orphaned store items at a run's start and
applies the session's fork policy (the decisions are ``fork_memory``'s pure functions).

The recording middleware calls :meth:`ForkWatch.abandoned` in ``before_agent``,
under the session state's lock: a cheap test (a set difference) of whether the
state the run loaded lost messages the session had live — what time travel and
``update_state`` on an older checkpoint do. Only then does :meth:`ForkWatch.on_fork`
read the session's records and memory-write journal, and for each orphaned
item whose value the store still holds record an :class:`OrphanedMemory`:

- ``flag``: recorded and reported (span events on the run's root span,
  ``Unsee.orphaned_memory``, ``unsee sessions``); the store is not touched;
- ``rollback``: journaled first (action ``rolling_back``), then the item is put
  back to its value before the abandoned write (or deleted) through the same
  ``StoreOverlay.apply`` a forget's commit uses, then marked ``rolled_back``.
  A crash in between leaves the row pending; the next run start of the session
  finishes it (idempotent: an item already back at its old value is only
  marked; one someone else changed since is left alone). It runs inside the
  run's lease: no forget or erasure of the session interleaves with it;
- ``keep``: recorded, not reported.

The journal (``fork_memory`` table) holds ids, seqs and states, never a
namespace, key or value: those are read from the session's store-write journal
in the vault (by the write's seq), where erasure reaches them. It lives in ``<home>/fork_memory.sqlite``
(made on the first fork found) or, on a PostgreSQL store, in the ``unsee``
schema beside the leases.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import astuple, dataclass
from typing import Any

from opentelemetry.trace import Span

from . import faults
from .errors import UnseeError
from .fork_memory import (DEFAULT_FORK_POLICY, FORK_POLICIES, ForkPolicy, LiveOrphan, OrphanedMemory, action_for, live_orphans,
                          orphaned_writes, parse_fork_policy, same_value, write_before)
from .records import ArtifactType
from .session_state import SessionState
from .sqldb import Db, SqliteDb, create_tables
from .store import ProvenanceStore
from .store_schema import connect

log = logging.getLogger("unsee.forks")

FILE = "fork_memory.sqlite"
_COLS = ("session_id", "write_id", "write_seq", "restore_seq", "abandoned_turn", "detected_turn",
         "branch_checkpoint", "policy", "action", "restored", "created_ns", "writer")
# ids, seqs and states only: no namespace or key (they often name a person) and no value; both are
# read back from the session's write journal by seq (``ForkWatch.records``)
_SCHEMA = """
CREATE TABLE IF NOT EXISTS fork_memory (
  session_id TEXT NOT NULL,
  write_id TEXT NOT NULL,
  write_seq INTEGER NOT NULL,
  restore_seq INTEGER NOT NULL,
  abandoned_turn INTEGER NOT NULL,
  detected_turn INTEGER NOT NULL,
  branch_checkpoint TEXT,
  policy TEXT NOT NULL,
  action TEXT NOT NULL,
  restored TEXT,
  created_ns INTEGER NOT NULL,
  PRIMARY KEY (session_id, write_id)
);
CREATE TABLE IF NOT EXISTS fork_policy (
  session_id TEXT PRIMARY KEY,
  policy TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS fork_origin (
  session_id TEXT PRIMARY KEY,
  parent TEXT NOT NULL,
  branch_checkpoint TEXT,
  created_ns INTEGER NOT NULL
);
"""
_TABLES = frozenset({"fork_memory", "fork_policy", "fork_origin"})


@dataclass(frozen=True)
class ForkRow:
    """One row of the ``fork_memory`` journal (``_COLS``, in order)."""

    session_id: str
    write_id: str
    write_seq: int
    restore_seq: int
    abandoned_turn: int
    detected_turn: int
    branch_checkpoint: str | None
    policy: str
    action: str
    restored: str | None
    created_ns: int
    #: the session that made the write when it is not ``session_id`` (a fork into another thread)
    writer: str | None = None


#: span event (one per reported item) and root-span attributes of a run that found a fork
EVENT = "unsee.fork.orphaned_memory"
ATTR_COUNT = "unsee.fork.orphaned_memory"
ATTR_POLICY = "unsee.fork.policy"


class ForkRollbackInterrupted(UnseeError, RuntimeError):
    """A fork rollback failed after it was journaled: the run does not go on with the
    orphaned memory in the store; running the session again finishes the rollback."""

    def __init__(self, session_id: str, cause: BaseException):
        super().__init__(f"rolling back orphaned memory of session {session_id!r} failed ({cause!r}); "
                         "run the session again to finish it")
        self.session_id = session_id


class ForkJournal:
    """The ``fork_memory`` table of one unsee home (opened, and on SQLite made, when first written)."""

    def __init__(self, store: ProvenanceStore):
        self._store = store
        self._db: Db | None = None
        self._own = False  # (a SQLite file of its own, closed with it; PostgreSQL: the store's pool)
        self._lock = threading.RLock()

    def _open(self, create: bool) -> Db | None:
        with self._lock:
            if self._db is not None:
                return self._db
            shared = self._store.shared.lease_db()
            if shared is None:
                path = self._store.home / FILE
                if not create and not path.exists():
                    return None
                db: Db = SqliteDb(connect(path))
                self._own = True
            else:
                db = shared
                if not create and "fork_memory" not in db.tables():
                    return None
            create_tables(db, _SCHEMA, _TABLES, 1, what="fork_memory")
            _add_writer_column(db)
            self._db = db
            return db

    def put(self, rows: Iterable[ForkRow]) -> None:
        """Record items (one transaction); an item already recorded keeps its row."""
        db = self._open(create=True)
        sql = (f"INSERT INTO fork_memory({', '.join(_COLS)}) VALUES ({', '.join('?' * len(_COLS))})"
               " ON CONFLICT(session_id, write_id) DO NOTHING")
        with self._lock, db.transaction():
            for r in rows:
                db.execute(sql, astuple(r))

    def mark(self, session_id: str, write_id: str, action: str, restored: str | None) -> None:
        db = self._open(create=True)
        with self._lock:
            db.execute("UPDATE fork_memory SET action=?, restored=? WHERE session_id=? AND write_id=?",
                       (action, restored, session_id, write_id))

    def rows(self, session_id: str | None = None) -> list[ForkRow]:
        """A session's items (every session's: None), oldest first."""
        db = self._open(create=False)
        if db is None:
            return []
        where, args = ("WHERE session_id=?", (session_id,)) if session_id is not None else ("", ())
        with self._lock:
            found = db.execute(f"SELECT {', '.join(_COLS)} FROM fork_memory {where} ORDER BY created_ns, write_seq",
                               args).fetchall()
        return [ForkRow(*r) for r in found]

    def drop(self, session_id: str) -> int:
        """Forget a session's items, those about its writes, its policy and its fork origin (its
        records are gone: an erasure of the subject). How many items."""
        db = self._open(create=False)
        if db is None:
            return 0
        with self._lock, db.transaction():
            n = db.execute("DELETE FROM fork_memory WHERE session_id=? OR writer=?", (session_id, session_id)).rowcount
            db.execute("DELETE FROM fork_policy WHERE session_id=?", (session_id,))
            db.execute("DELETE FROM fork_origin WHERE session_id=? OR parent=?", (session_id, session_id))
        return n

    # -- per-session policy and fork origin (kept in the home: every process of it sees them) --
    def set_policy(self, session_id: str, policy: str) -> None:
        db = self._open(create=True)
        with self._lock:
            db.execute("INSERT INTO fork_policy(session_id, policy) VALUES (?, ?)"
                       " ON CONFLICT(session_id) DO UPDATE SET policy=excluded.policy", (session_id, policy))

    def policy_of(self, session_id: str) -> str | None:
        db = self._open(create=False)
        if db is None:
            return None
        with self._lock:
            row = db.execute("SELECT policy FROM fork_policy WHERE session_id=?", (session_id,)).fetchone()
        return row[0] if row else None

    def set_origin(self, session_id: str, parent: str, checkpoint: str | None, created_ns: int) -> None:
        """``session_id`` is a thread forked from ``parent``'s (its first run started from state
        ``parent`` recorded); the first origin found is kept."""
        db = self._open(create=True)
        with self._lock:
            db.execute("INSERT INTO fork_origin(session_id, parent, branch_checkpoint, created_ns) VALUES (?, ?, ?, ?)"
                       " ON CONFLICT(session_id) DO NOTHING", (session_id, parent, checkpoint, created_ns))

    def origins(self) -> dict[str, str]:
        """Every forked thread's parent session."""
        db = self._open(create=False)
        if db is None:
            return {}
        with self._lock:
            return dict(db.execute("SELECT session_id, parent FROM fork_origin").fetchall())

    def close(self) -> None:
        with self._lock:
            if self._db is not None and self._own:
                self._db.close()
            self._db = None


class ForkWatch:
    """Fork detection and the fork policy of one recorder (``Recorder.forks``).

    ``default``: the policy of every session without its own (:meth:`set_policy`, kept
    by this process only)."""

    def __init__(self, store: ProvenanceStore, default: ForkPolicy | str = DEFAULT_FORK_POLICY):
        self.store = store
        self.default: ForkPolicy = parse_fork_policy(default)
        self.journal = ForkJournal(store)
        #: failures of the observing part (a journal or records read that failed): logged, counted
        self.failures = 0

    def policy(self, session_id: str) -> ForkPolicy:
        """The session's policy: the one set for it (in this home, by any process), else the default."""
        stored = self.journal.policy_of(session_id)
        return parse_fork_policy(stored) if stored in FORK_POLICIES else self.default

    def set_policy(self, session_id: str, policy: ForkPolicy | str) -> None:
        """Keep ``policy`` for the session in the home (InvalidArgument, before anything is written)."""
        self.journal.set_policy(session_id, parse_fork_policy(policy))

    @staticmethod
    def abandoned(live: dict[str, None], ids: Iterable[str | None]) -> bool:
        """Whether the state a run starts from lacks messages the session had live (cheap)."""
        return bool(live) and not live.keys() <= set(ids)

    # -- the run start ------------------------------------------------------------------
    def on_fork(self, st: SessionState, branch: list[str], stores: Iterable[Any] = (), *, turn: int,
                checkpoint: str | None) -> list[OrphanedMemory]:
        """Find the session's orphaned items for a run whose state holds the artifacts
        ``branch``, apply the policy, and return what the run's span reports. ``stores``: the
        candidates for the session's memory store (the run's, the agent's); the first
        ``RecordingStore`` among them is the one rolled back. Called outside the session
        state's lock (it reads the records). Finding is an observer (a failure is logged and
        counted); a journaled rollback that fails raises ``ForkRollbackInterrupted``
        (``InjectedCrash`` from a test's fault point)."""
        from .memory import RecordingStore

        sid = st.session_id
        store = next((s for s in stores if isinstance(s, RecordingStore)), None)
        policy = self.policy(sid)
        try:
            known = {r.write_id for r in self.journal.rows(sid)}
            journal = self.store.memory_journal.entries(sid)
            orphans = orphaned_writes(self.store.artifacts(sid), branch)
            found = [o for o in live_orphans(orphans, journal) if o.write.id not in known]
            if store is not None:  # only what the store still holds is memory outliving its evidence
                found = [o for o in found if same_value(_value(store, o.namespace, o.key), o.expect)]
            action = action_for(policy)
            if action == "rolling_back" and store is None:
                action = "flagged"  # (no recorded store to put the items back in)
            now = time.time_ns()
            if found:
                self.journal.put([ForkRow(sid, o.write.id, o.write.seq, o.restore_seq, o.write.turn, turn, checkpoint,
                                          policy, action, None, now) for o in found])
            pending = [r for r in self.journal.rows(sid) if r.action == "rolling_back" and r.writer is None]
        except Exception as exc:  # (not the run's business: it goes on with what it has)
            self.failures += 1
            log.warning("finding orphaned memory of session %s failed: %r", sid, exc, exc_info=exc)
            return []
        finished: set[str] = set()
        if pending and store is not None:
            faults.point("fork:journal")
            try:
                finished = self._finish(st, store, journal, pending)
            except UnseeError:
                raise
            except Exception as exc:
                raise ForkRollbackInterrupted(sid, exc) from exc
        # what this run found, and the rollbacks it finished (begun by a run that crashed)
        return [r for r in self._records(sid, self.store.memory_journal.entries(sid))
                if (r.created_ns == now or r.write_id in finished) and r.action != "kept"]

    def on_thread_fork(self, st: SessionState, state_ids: list[str], stores: Iterable[Any] = (), *, turn: int,
                       checkpoint: str | None) -> list[OrphanedMemory]:
        """A session's first run whose state already holds messages another session recorded
        (``update_state`` of a new thread with another's values, ``copy_thread``): a fork into
        another thread. The parent is the session that recorded most of ``state_ids``; its
        writes the new branch does not justify, whose value the store still holds, are recorded
        for this session with ``writer`` the parent — flagged (``keep``: kept), never rolled
        back: they are another session's, and its own branch still justifies them. An observer:
        a failure is logged and counted."""
        from .memory import RecordingStore

        sid = st.session_id
        store = next((s for s in stores if isinstance(s, RecordingStore)), None)
        try:
            held = {s: n for s, n in self.store.sessions_holding(state_ids).items() if s != sid and "~" not in s}
            if not held:
                return []
            parent = max(held, key=lambda s: (held[s], s))
            now = time.time_ns()
            self.journal.set_origin(sid, parent, checkpoint, now)
            known = {r.write_id for r in self.journal.rows(sid)}
            orphans = orphaned_writes(self.store.artifacts(parent), state_ids)
            journal = self.store.memory_journal.entries(parent)
            found = [o for o in live_orphans(orphans, journal) if o.write.id not in known]
            if store is not None:
                found = [o for o in found if same_value(_value(store, o.namespace, o.key), o.expect)]
            if not found:
                return []
            action = "kept" if self.policy(sid) == "keep" else "flagged"
            self.journal.put([ForkRow(sid, o.write.id, o.write.seq, o.restore_seq, o.write.turn, turn, checkpoint,
                                      self.policy(sid), action, None, now, parent) for o in found])
            return [r for r in self._records(sid, []) if r.created_ns == now and r.action != "kept"]
        except Exception as exc:
            self.failures += 1
            log.warning("finding memory orphaned by the fork of session %s failed: %r", sid, exc, exc_info=exc)
            return []

    def _finish(self, st: SessionState, store: Any, journal: list, pending: list[ForkRow]) -> set[str]:
        """Finish the session's journaled rollbacks (idempotent: rerun after a crash); the write
        ids finished. The store items are put back by ``StoreOverlay.apply``, as a forget's
        commit does."""
        from .memory import StoreOverlay, source_key

        sid = st.session_id
        by_seq = {e[0]: e for e in journal}
        done: list[tuple[ForkRow, tuple[str, ...], str, str]] = []
        for r in pending:
            wrote, before = by_seq.get(r.write_seq), by_seq.get(r.restore_seq)
            if wrote is None or before is None:  # the journal was erased since: nothing to restore from
                done.append((r, (), "", "flagged"))
                continue
            ns, key = tuple(wrote[1]), wrote[2]
            held = _value(store, ns, key)
            restore = json.loads(before[3]) if before[3] is not None else None
            if same_value(held, wrote[4]):
                with _namespace_leases(store, ns, key, restore):
                    StoreOverlay({(ns, key): restore}).apply(store.inner)
            elif not same_value(held, before[3]):
                done.append((r, ns, key, "superseded"))  # changed by another writer since: never touched
                continue
            done.append((r, ns, key, "deleted" if restore is None else "previous"))
        faults.point("fork:store")
        for r, _, _, how in done:
            if how in ("previous", "deleted"):
                self.journal.mark(sid, r.write_id, "rolled_back", how)
            else:
                self.journal.mark(sid, r.write_id, how, None)
        # the session's next read of a rolled-back key names the write before the abandoned ones
        ids = {a.seq: a.id for a in self.store.artifacts(sid)}
        with st.lock:
            for r, ns, key, how in done:
                if how not in ("previous", "deleted"):
                    continue
                src = source_key(ns, key)
                prev = write_before(journal, ns, key, r.restore_seq)
                if prev is not None and prev in ids:
                    st.last_write[src] = ids[prev]
                else:
                    st.last_write.pop(src, None)
        return {r.write_id for r, *_ in done}

    # -- reporting ----------------------------------------------------------------------
    @staticmethod
    def report(span: Span | None, found: list[OrphanedMemory], policy: str) -> None:
        """Span events on the run's root span, one per reported item, and a count."""
        if span is None or not found:
            return
        span.set_attribute(ATTR_COUNT, len(found))
        span.set_attribute(ATTR_POLICY, policy)
        for r in found:
            span.add_event(EVENT, {"unsee.memory.namespace": "/".join(r.namespace), "unsee.memory.key": r.key,
                                   "unsee.artifact.id": r.write_id, "unsee.fork.abandoned_turn": r.abandoned_turn,
                                   "unsee.fork.action": r.action, "unsee.fork.checkpoint": r.branch_checkpoint or "",
                                   **({"unsee.fork.writer": r.writer} if r.writer else {})})

    def records(self, session_id: str, *, include_kept: bool = False) -> list[OrphanedMemory]:
        """A session's orphaned items, oldest first (``"kept"`` ones only with ``include_kept``)."""
        return [r for r in self._records(session_id, self.store.memory_journal.entries(session_id))
                if include_kept or r.action != "kept"]

    def _records(self, session_id: str, journal: list) -> list[OrphanedMemory]:
        rows = self.journal.rows(session_id)
        if not rows:
            return []
        from .memory import source_key

        journals = {session_id: {e[0]: e for e in journal or self.store.memory_journal.entries(session_id)}}
        out = []
        readers = None
        for r in rows:
            writer = r.writer or session_id
            if writer not in journals:
                journals[writer] = {e[0]: e for e in self.store.memory_journal.entries(writer)}
            e = journals[writer].get(r.write_seq)
            ns, key = (tuple(e[1]), e[2]) if e is not None else self._source_of(writer, r.write_id)
            if readers is None:
                readers = self._readers(session_id)
            text = self.store.content(writer, r.write_id)
            read_by = tuple(sorted({s for s, src, got in readers if s != writer and src == source_key(ns, key)
                                    and text is not None and got == text}))
            out.append(OrphanedMemory(session_id=r.session_id, namespace=ns, key=key, write_id=r.write_id,
                                      abandoned_turn=r.abandoned_turn, detected_turn=r.detected_turn,
                                      branch_checkpoint=r.branch_checkpoint, policy=r.policy, action=r.action,
                                      restored=r.restored, created_ns=r.created_ns, read_by=read_by,
                                      writer=r.writer))
        return out

    def _readers(self, session_id: str) -> list[tuple[str, str, str | None]]:
        """(session, source key, text read) of every other session's memory reads: who read an
        orphaned value (the cross-session spread a forget follows, plugins/forget/spread.py, by the
        same rule: a read holding the written text). Forget scratch sessions are not readers."""
        out = []
        for info in self.store.sessions():
            other = info.session_id
            if other == session_id or "~" in other:
                continue
            for a in self.store.artifacts(other):
                if a.type == ArtifactType.MEMORY_READ and a.source_ids:
                    out.append((other, a.source_ids[0], self.store.content(other, a.id)))
        return out

    def _source_of(self, session_id: str, write_id: str) -> tuple[tuple[str, ...], str]:
        """(namespace, key) of a write from its artifact's source id (its journal row is gone)."""
        from .memory import parse_source_key

        for a in self.store.artifacts(session_id):
            if a.id == write_id and a.source_ids:
                return parse_source_key(a.source_ids[0])
        return (), ""

    def counts(self) -> dict[str, int]:
        """Per session, the items flagged (orphaned and still reported as in the store)."""
        out: dict[str, int] = {}
        for r in self.journal.rows():
            if r.action == "flagged":
                out[r.session_id] = out.get(r.session_id, 0) + 1
        return out

    def close(self) -> None:
        self.journal.close()


def _add_writer_column(db: Db) -> None:
    """``fork_memory.writer`` (added after the table first shipped): an older home gets it on open."""
    if db.dialect == "sqlite":
        if "writer" not in {r[1] for r in db.execute("PRAGMA table_info(fork_memory)").fetchall()}:
            db.execute("ALTER TABLE fork_memory ADD COLUMN writer TEXT")
    elif not db.execute("SELECT 1 FROM information_schema.columns WHERE table_schema=current_schema()"
                        " AND table_name='fork_memory' AND column_name='writer'").fetchone():
        db.execute("ALTER TABLE fork_memory ADD COLUMN IF NOT EXISTS writer TEXT")


def _namespace_leases(store: Any, namespace: tuple[str, ...], key: str, value: Any):
    """The namespace leases a recorded put holds (when the store takes them): an atomic
    namespace delete never interleaves with a rollback's write either."""
    from langgraph.store.base import PutOp

    hold = getattr(store, "_namespace_leases", None)
    return hold([PutOp(namespace, key, value)], None) if hold is not None else contextlib.nullcontext()


def _value(store: Any, namespace: tuple[str, ...], key: str) -> Any:
    item = store.inner.get(namespace, key)
    return item.value if item is not None else None


__all__ = ["ForkJournal", "ForkRollbackInterrupted", "ForkRow", "ForkWatch", "LiveOrphan", "OrphanedMemory"]
