"""The provenance store and content vault: SQLite under the unsee home, or PostgreSQL.

``provenance.sqlite`` holds sessions, artifacts, checkpoints and the spans
they came from (for export). ``vault.sqlite`` holds payload text keyed by
artifact id, in its own file so it can be erased without touching structure.

:class:`ProvenanceStore` (here: opening and reading) uses :mod:`.store_schema`
(tables, row mapping) and :mod:`.store_writer` (the batching writer thread:
recording never puts a SQLite commit on the agent's hot path; ``flush()`` waits
until everything submitted is durable, readers call it first; a failed write is
logged, counted and marks the session incomplete). Its other roles are objects
it composes, each in its own module and reached by an attribute named for it:
``store.rewrites`` (:mod:`.store_rewrites`: forking, replacing and dropping
sessions, editing content), ``store.commits`` (:mod:`.store_commits`: the commit
journal that rolls a replacement forward), ``store.memory_journal``
(:mod:`.store_journal`: the memory-store write journal), ``store.erasure``
(:mod:`.store_erasure`), ``store.run_marks`` (:mod:`.store_run_marks`: sessions a
dead run left) and ``store.shared`` (:mod:`.store_shared`: a shared store's keys
and lease database).

Opening checks both files first, read-only (``check_db``): a damaged file
(truncated, garbled, another program's) is ``StoreDamaged`` naming it, and is
never rebuilt as an empty store. The schema is made in one transaction and
stamped with ``STORE_VERSION`` (``PRAGMA user_version``).

With ``url="postgresql://..."`` the same tables live in that database's
``unsee`` schema (:mod:`.sqldb`: one SQL for both engines, a psycopg 3 pool),
so several processes and machines share one store (docs/deployment.md).
"""

from __future__ import annotations

import contextlib
import itertools
import sqlite3
import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .built_records import BuiltRecords
from .errors import SessionNotFound, StoreDamaged
from .records import Artifact, Checkpoint, SessionInfo
from .sqldb import Db, PostgresDb, SqliteDb, create_tables, open_pool, redact_url, stored_version
from .store_files import PROVENANCE_TABLES, STORE_VERSION, VAULT_TABLES, _vault_has_content, check_db, ensure_home
from .store_commits import CommitJournal
from .store_erasure import StoreErasure
from .store_journal import MemoryJournal
from .store_rewrites import SessionRewrites
from .store_run_marks import RUN_DIED, RunMarks
from .store_shared import SharedState
from .store_schema import (SCHEMA, VAULT_SCHEMA, SpanRow, artifact_from_row, checkpoint_from_row, connect,
                           span_from_row)
from .store_writer import Batch, BatchWriter

__all__ = ["Batch", "ProvenanceStore", "SessionSlice", "SliceMark", "SpanRow"]

#: rewrite epochs, unique in the process (``next`` is atomic: two bumps never read alike)
_EPOCHS = itertools.count(1)
#: ids per ``IN (...)`` list (well under SQLite's and PostgreSQL's parameter limits)
_CHUNK = 500


@dataclass(frozen=True)
class SliceMark:
    """Where a :class:`SessionSlice` read up to (hand it to the next ``records_since``)."""

    artifact_seq: int
    checkpoint_seq: int
    #: SQLite: the tables' largest rowids then (a row written later has a larger one);
    #: PostgreSQL: the session's row counts then
    artifacts_at: int
    checkpoints_at: int


@dataclass(frozen=True)
class SessionSlice:
    """One session's records after a :class:`SliceMark` (:meth:`ProvenanceStore.records_since`).

    ``stamp`` changes whenever records of the session may have been changed other than by
    appending: this process's rewrites (forget forks and commits, dropped sessions, erasure,
    edited content, content recorded again), and on SQLite a commit by any other connection
    to either file. None when such a change ran while the slice was read (do not trust it
    past this read). ``exact``: whether the stamp sees every other process's writes
    (SQLite); on PostgreSQL it sees only the session row (recreated) and its commit journal,
    so a caller also asks the session leases.

    ``artifacts`` / ``checkpoints``: those with seq after the mark's, in seq order, with the
    ``contents`` of those artifacts (of every artifact when read in full); ``appended``:
    whether they are all that was written since the mark (False when a row arrived with a
    seq below the mark's: spans can end out of order); ``committed``: the ids among those
    asked about whose records are committed by now; ``mark``: where this slice read up to.
    """

    stamp: tuple | None
    exact: bool
    appended: bool
    mark: SliceMark
    artifacts: list[Artifact] = field(default_factory=list)
    checkpoints: list[Checkpoint] = field(default_factory=list)
    contents: dict[str, str] = field(default_factory=dict)
    committed: frozenset[str] = frozenset()


class ProvenanceStore(BatchWriter):
    """Provenance tables + vault, with a batching writer thread.

    ``url``: a ``postgresql://`` URL puts the tables in that database (schema
    ``unsee``) instead of the two SQLite files under ``home``; the home still
    holds what is local to a machine (hash key when none is stored, receipts).

    The store's face is reading and the writer; its other roles are objects it composes:
    ``rewrites`` (forks, a commit's replacement, drops, content edits), ``commits`` (the
    commit journal), ``memory_journal`` (memory-store writes), ``erasure`` (erasure's
    operations), ``run_marks`` (sessions a dead run left) and ``shared`` (a shared store's
    keys and lease database).
    """

    def __init__(self, home: Path, url: str | None = None):
        self.home = ensure_home(Path(home))
        self.url = url
        #: the records the recorder put on spans, for the span processor (``built_records``)
        self.built = BuiltRecords()
        self.pool: Any = None  # (a psycopg_pool.ConnectionPool; psycopg is imported only for PostgreSQL)
        if url:
            self.path = self.vault_path = None
            self._open_postgres(url)
        else:
            self._open_sqlite()
        self._read_lock = threading.RLock()
        self._peek_lock = threading.Lock()
        self._peek_db: sqlite3.Connection | None = None  # (opened on first use)
        self._start_writer()
        self.rewrites = SessionRewrites(self)
        self.commits = CommitJournal(self)
        self.memory_journal = MemoryJournal(self)
        self.erasure = StoreErasure(self)
        self.run_marks = RunMarks(self)
        self.shared = SharedState(self)

    def _open_sqlite(self) -> None:
        self.path = self.home / "provenance.sqlite"
        self.vault_path = self.home / "vault.sqlite"
        # Check both files before either is written: a damaged store is an error, never rebuilt.
        has_db = check_db(self.path, PROVENANCE_TABLES)
        check_db(self.vault_path, VAULT_TABLES)
        if not has_db and self.path.exists() and _vault_has_content(self.vault_path):
            raise StoreDamaged(self.path, f"empty, but {self.vault_path.name} holds recorded content")
        self._db: Db = SqliteDb(connect(self.path))
        try:
            create_tables(self._db, SCHEMA, PROVENANCE_TABLES, STORE_VERSION, what="provenance")
            self._vault: Db = SqliteDb(connect(self.vault_path))
        except BaseException:
            self._db.close()
            raise
        try:
            create_tables(self._vault, VAULT_SCHEMA, VAULT_TABLES, STORE_VERSION, what="vault")
        except BaseException:
            self._db.close()
            self._vault.close()
            raise

    def _open_postgres(self, url: str) -> None:
        self.pool = open_pool(url)
        try:
            self._db = self._vault = PostgresDb(self.pool)
            version = stored_version(self._db, "provenance")
            if version is not None and version > STORE_VERSION:
                raise StoreDamaged(redact_url(url), f"schema version {version}: written by a newer unsee")
            found = self._db.tables() & (PROVENANCE_TABLES | VAULT_TABLES)
            if version is None and found:
                raise StoreDamaged(redact_url(url), "unsee tables without a version stamp: "
                                   + ", ".join(sorted(found)))
            create_tables(self._db, SCHEMA + VAULT_SCHEMA, PROVENANCE_TABLES | VAULT_TABLES, STORE_VERSION,
                          what="provenance")
        except BaseException:
            self.pool.close()
            raise

    @property
    def dialect(self) -> str:
        return self._db.dialect

    # -- reading ----------------------------------------------------------
    def _rows(self, sql: str, args: Iterable[Any] = ()) -> list[tuple]:
        self.flush()
        with self._read_lock:
            return self._db.execute(sql, tuple(args)).fetchall()

    def has_session(self, session_id: str, flush: bool = True) -> bool:
        """Whether a session is recorded. ``flush=False`` sees only what is already
        written (enough for sessions of other processes; no wait on the writer)."""
        if not flush:
            return bool(self._peek("SELECT 1 FROM sessions WHERE session_id=?", (session_id,)))
        return bool(self._rows("SELECT 1 FROM sessions WHERE session_id=?", (session_id,)))

    def _peek(self, sql: str, args: tuple) -> list[tuple]:
        """A read of what is already written that does not wait for the writer: the recorder
        asks it when a run starts on a thread this process has not seen (does another process
        hold its records?). SQLite: on a reading connection of its own (WAL: a reader never
        waits for the writer's transaction, which holds ``_read_lock`` while it lasts);
        PostgreSQL: the pool's."""
        if self.path is None:
            return self._db.execute(sql, args).fetchall()
        with self._peek_lock:
            if self._closed:  # (fails as a read of a closed store always did)
                with self._read_lock:
                    return self._db.execute(sql, args).fetchall()
            if self._peek_db is None:
                self._peek_db = connect(self.path)
            cur = self._peek_db.execute(sql, args)
            try:
                return cur.fetchall()  # (all rows: no read transaction stays open after)
            finally:
                cur.close()

    def require(self, session_id: str) -> None:
        if not self.has_session(session_id):
            raise SessionNotFound(session_id)

    def sessions(self, session_id: str | None = None) -> list[SessionInfo]:
        """Every session (``session_id``: that one only, its counts alone computed)."""
        rows = self._rows(
            "SELECT s.session_id, s.created_ns, s.updated_ns, s.incomplete, s.failures, s.tokenizer, s.meta,"
            " (SELECT COUNT(*) FROM artifacts a WHERE a.session_id=s.session_id),"
            " (SELECT COUNT(*) FROM checkpoints c WHERE c.session_id=s.session_id),"
            " (SELECT COALESCE(MAX(turn),0) FROM artifacts a WHERE a.session_id=s.session_id)"
            " FROM sessions s" + ("" if session_id is None else " WHERE s.session_id=?") + " ORDER BY s.created_ns",
            () if session_id is None else (session_id,),
        )
        return [
            SessionInfo(
                session_id=r[0], created_ns=r[1], updated_ns=r[2],
                incomplete=bool(r[3]) or r[0] in self._incomplete,
                failures=max(r[4], self._incomplete.get(r[0], 0)), tokenizer=r[5],
                artifacts=r[7], checkpoints=r[8], turns=r[9], run_died=RUN_DIED in (r[6] or ""),
            )
            for r in rows
        ]

    def session(self, session_id: str) -> SessionInfo:
        for s in self.sessions(session_id):
            if s.session_id == session_id:
                return s
        raise SessionNotFound(session_id)

    def _forked_rows(self, table: str, session_id: str) -> list[tuple]:
        """``table``'s rows of a session in seq order, a fork's source prefix included
        (a replay's scratch session reads its source's records below the fork seq)."""
        rows = self._rows(f"SELECT * FROM {table} WHERE session_id=? ORDER BY seq", (session_id,))
        fork = self.rewrites.fork_of(session_id)
        if fork is None:
            return rows
        src, at = fork
        prefix = self._rows(f"SELECT * FROM {table} WHERE session_id=? AND seq<? ORDER BY seq", (src, at))
        # the rows keep their source's session id in column 0: they are reported as the fork's
        return [(session_id, *r[1:]) for r in prefix] + rows

    def count_artifacts(self, session_id: str, types: Collection[str]) -> int:
        """How many of the session's artifacts (a fork's source prefix included) have one of
        ``types`` (``ArtifactType`` values): a count, not a read of the rows."""
        types = sorted(set(types))
        if not types:
            return 0
        marks = ", ".join("?" * len(types))
        n = self._rows(f"SELECT COUNT(*) FROM artifacts WHERE session_id=? AND type IN ({marks})",
                       (session_id, *types))[0][0]
        if (fork := self.rewrites.fork_of(session_id)) is not None:
            n += self._rows(f"SELECT COUNT(*) FROM artifacts WHERE session_id=? AND seq<? AND type IN ({marks})",
                            (fork[0], fork[1], *types))[0][0]
        return n

    def artifacts(self, session_id: str) -> list[Artifact]:
        return [artifact_from_row(r) for r in self._forked_rows("artifacts", session_id)]

    def checkpoints(self, session_id: str) -> list[Checkpoint]:
        return [checkpoint_from_row(r) for r in self._forked_rows("checkpoints", session_id)]

    def spans(self, session_id: str) -> list[SpanRow]:
        rows = self._rows(
            "SELECT * FROM spans WHERE session_id=? ORDER BY start_ns", (session_id,)
        )
        return [span_from_row(r) for r in rows]

    def content(self, session_id: str, artifact_id: str) -> str | None:
        self.flush()
        with self._read_lock:
            row = self._vault.execute(
                "SELECT content FROM content WHERE session_id=? AND artifact_id=?",
                (session_id, artifact_id),
            ).fetchone()
        if row is None and (fork := self.rewrites.fork_of(session_id)) is not None:
            with self._read_lock:
                below = self._db.execute("SELECT 1 FROM artifacts WHERE session_id=? AND id=? AND seq<?",
                                         (fork[0], artifact_id, fork[1])).fetchone()
            return self.content(fork[0], artifact_id) if below else None
        return row[0] if row else None

    def contents(self, session_id: str) -> dict[str, str]:
        self.flush()
        with self._read_lock:
            rows = self._vault.execute(
                "SELECT artifact_id, content FROM content WHERE session_id=?", (session_id,)
            ).fetchall()
        fork = self.rewrites.fork_of(session_id)
        if fork is None:
            return dict(rows)
        src, at = fork
        with self._read_lock:
            below = {r[0] for r in self._db.execute("SELECT id FROM artifacts WHERE session_id=? AND seq<?",
                                                    (src, at))}
        inherited = {k: v for k, v in self.contents(src).items() if k in below}
        return {**inherited, **dict(rows)}

    # -- incremental reading (graph caches) ---------------------------------
    def records_since(self, session_id: str, since: SliceMark | None = None,
                      uncommitted: Collection[str] = ()) -> SessionSlice:
        """The session's artifacts and checkpoints recorded after ``since`` (None: all of
        them, with every content, as :meth:`contents`), and which of the ``uncommitted``
        artifact ids are committed now; ``SessionNotFound`` when it is not recorded.

        One read of this process's store (nothing of it is written meanwhile); its
        ``stamp`` and ``appended`` tell a cache whether what it read before is still the
        session's (see :class:`SessionSlice`). On SQLite it costs what was written since
        ``since`` (in any session); on PostgreSQL, plus a count of the session's rows.
        A replay's scratch fork (which reads its source's prefix) is read whole, unstamped.
        """
        self.flush()
        low = -(1 << 62)
        with self._read_lock:
            fork = self.rewrites.fork_of(session_id)
            if fork is None:
                before = self._stamp(session_id)
                if before is None:
                    raise SessionNotFound(session_id)
                a_seq = since.artifact_seq if since else low
                c_seq = since.checkpoint_seq if since else low
                arts = [artifact_from_row(r) for r in self._db.execute(
                    "SELECT * FROM artifacts WHERE session_id=? AND seq>? ORDER BY seq", (session_id, a_seq))]
                ckpts = [checkpoint_from_row(r) for r in self._db.execute(
                    "SELECT * FROM checkpoints WHERE session_id=? AND seq>? ORDER BY seq", (session_id, c_seq))]
                if since is None:
                    contents = dict(self._vault.execute(
                        "SELECT artifact_id, content FROM content WHERE session_id=?", (session_id,)).fetchall())
                else:
                    contents = dict(self._in_chunks(
                        self._vault, "SELECT artifact_id, content FROM content WHERE session_id=? AND artifact_id IN",
                        session_id, [a.id for a in arts]))
                committed = frozenset(r[0] for r in self._in_chunks(
                    self._db, "SELECT id FROM artifacts WHERE session_id=? AND committed=1 AND id IN", session_id,
                    list(uncommitted)))
                marks = [self._written_since(t, session_id, since) for t in ("artifacts", "checkpoints")]
                after = self._stamp(session_id)
        if fork is not None:
            self.require(session_id)
            arts, ckpts = self.artifacts(session_id), self.checkpoints(session_id)
            return SessionSlice(stamp=None, exact=self.pool is None, appended=False,
                                mark=SliceMark(low, low, 0, 0), artifacts=arts, checkpoints=ckpts,
                                contents=self.contents(session_id))
        (a_at, a_new), (c_at, c_new) = marks
        if self.pool is None:  # rows written since the mark's rowids
            appended = since is None or (a_new == len(arts) and c_new == len(ckpts))
        else:  # the session's counts then and now
            appended = (a_at == (since.artifacts_at if since else 0) + len(arts)
                        and c_at == (since.checkpoints_at if since else 0) + len(ckpts))
        mark = SliceMark(arts[-1].seq if arts else a_seq, ckpts[-1].seq if ckpts else c_seq, a_at, c_at)
        return SessionSlice(stamp=before if after == before else None, exact=self.pool is None,
                            appended=appended, mark=mark, artifacts=arts, checkpoints=ckpts, contents=contents,
                            committed=committed)

    def _written_since(self, table: str, session_id: str, since: SliceMark | None) -> tuple[int, int]:
        """SQLite: (the table's largest rowid, rows of the session written after ``since``'s);
        PostgreSQL: (the session's row count, 0). Under ``_read_lock``."""
        if self.pool is not None:
            return self._db.execute(f"SELECT COUNT(*) FROM {table} WHERE session_id=?", (session_id,)).fetchone()[0], 0
        top = self._db.execute(f"SELECT MAX(rowid) FROM {table}").fetchone()[0] or 0
        if since is None:
            return top, 0
        at = since.artifacts_at if table == "artifacts" else since.checkpoints_at
        # rowid order: a new row gets a larger rowid than every row there (deletions, which
        # could hand one out again, and VACUUM, which renumbers, move the stamp first);
        # "+session_id" keeps SQLite on the rowid range instead of the session's index
        return top, self._db.execute(f"SELECT COUNT(*) FROM {table} WHERE rowid>? AND +session_id=?",
                                     (at, session_id)).fetchone()[0]

    def _stamp(self, session_id: str) -> tuple | None:
        """What moves when the session's records may have been rewritten, None when it is not
        recorded (under ``_read_lock``). The epoch goes first: a rewrite bumps it before and after."""
        epoch = (self._rewrite_epoch, self.__dict__.get("_session_epochs", {}).get(session_id, 0))
        row = self._db.execute(
            "SELECT created_ns, (SELECT COUNT(*) FROM commits WHERE session_id=?),"
            " (SELECT COUNT(*) FROM commits WHERE session_id=? AND state='done')"
            " FROM sessions WHERE session_id=?", (session_id,) * 3).fetchone()
        if row is None:
            return None
        if self.pool is not None:
            return (epoch, *row)
        # SQLite: moves whenever another connection committed to the file
        return (epoch, *row, self._db.execute("PRAGMA data_version").fetchone()[0],
                self._vault.execute("PRAGMA data_version").fetchone()[0])

    @staticmethod
    def _in_chunks(conn: Db, sql: str, session_id: str, ids: list[str]) -> list[tuple]:
        out: list[tuple] = []
        for k in range(0, len(ids), _CHUNK):
            part = ids[k:k + _CHUNK]
            out += conn.execute(f"{sql} ({','.join('?' * len(part))})", (session_id, *part)).fetchall()
        return out

    #: bumped (to a process-unique value) before and after every change of recorded
    #: records other than the writer appending new ones (see ``records_since``): the store's
    #: for a change that may touch any session, a session's own (``_session_epochs``) for
    #: one that touches that session only
    _rewrite_epoch = 0

    def add_rewrite_listener(self, fn: Callable[[str | None], None]) -> None:
        """Call ``fn(session_id)`` at every rewrite (``None``: any session may have changed),
        e.g. a cache dropping what it holds at once, so erased text does not linger in memory.
        ``fn`` must not block nor take locks that a reader of this store may hold while it
        waits for the store."""
        self.__dict__.setdefault("_rewrite_listeners", []).append(fn)  # (made at first use)

    def _rewrote(self, *sessions: str) -> None:
        if sessions:
            epochs = self.__dict__.setdefault("_session_epochs", {})
            for sid in sessions:
                epochs[sid] = next(_EPOCHS)
        else:
            self._rewrite_epoch = next(_EPOCHS)
        for fn in self.__dict__.get("_rewrite_listeners", ()):
            for sid in sessions or (None,):
                fn(sid)

    @contextlib.contextmanager
    def _rewriting(self, *sessions: str) -> Iterator[None]:
        # before: a reader that overlaps sees the epoch move; after: one that read the old
        # records under the old epoch sees it again once the change is done. ``sessions``:
        # the only sessions the change touches (none named: any of them)
        self._rewrote(*sessions)
        try:
            yield
        finally:
            self._rewrote(*sessions)

    def _write(self, batches: list[Batch]) -> None:
        # The writer appends; content written for an artifact whose record is already stored
        # (the same artifact recorded again) changes what a cached graph holds: a rewrite.
        with self._read_lock:
            try:
                again = self._content_rewrites(batches)
            except Exception:  # (the write itself goes on; not knowing counts as a rewrite)
                again = True
            if again:
                self._rewrote()
            try:
                super()._write(batches)
            finally:
                if again:
                    self._rewrote()

    def _content_rewrites(self, batches: list[Batch]) -> bool:
        ids: dict[str, list[str]] = {}
        for b in batches:
            if b.content:
                ids.setdefault(b.session_id, []).extend(b.content)
        recorded: set[tuple[str, str]] = {(b.session_id, a.id) for b in batches for a in b.artifacts}
        for sid, aids in ids.items():
            left = [a for a in dict.fromkeys(aids) if (sid, a) not in recorded]
            if left and self._in_chunks(self._db, "SELECT id FROM artifacts WHERE session_id=? AND id IN", sid, left):
                return True
        return False

    # -- maintenance -----------------------------------------------------
    @contextlib.contextmanager
    def exclusive(self) -> Iterator[tuple[Db, Db]]:
        """(provenance, vault) databases with nothing queued and no reader or writer of this
        store running in this process: for maintenance such as erasure's scrubs."""
        self.flush()
        with self._rewriting(), self._read_lock:  # (what is done with them is a rewrite)
            yield self._db, self._vault

    def files(self) -> list:
        """The two database files this store owns (their -wal/-shm siblings go with them);
        none on PostgreSQL."""
        return [p for p in (self.path, self.vault_path) if p is not None]

    def sessions_holding(self, artifact_ids: Sequence[str]) -> dict[str, int]:
        """Per session, how many of ``artifact_ids`` it recorded. A message's artifact id comes
        from its LangGraph id, not its thread, so a thread whose state was copied from another's
        holds that session's ids (``fork_watch``). No index on ids alone: asked only at a
        session's first run, and only when its state already holds model turns."""
        ids = sorted(set(artifact_ids))
        out: dict[str, int] = {}
        for i in range(0, len(ids), 500):  # (SQLite's bound-parameter limit)
            chunk = ids[i:i + 500]
            for sid, n in self._rows(f"SELECT session_id, COUNT(*) FROM artifacts WHERE id IN "
                                     f"({', '.join('?' * len(chunk))}) GROUP BY session_id", chunk):
                out[sid] = out.get(sid, 0) + n
        return out

    def sessions_like(self, prefix: str) -> list[str]:
        """Recorded session ids starting with ``prefix`` (e.g. a session's scratch sessions)."""
        rows = self._rows("SELECT session_id FROM sessions WHERE substr(session_id, 1, length(?))=?",
                          (prefix, prefix))
        return [r[0] for r in rows]

    def close(self) -> None:
        if self._closed:
            return
        self._stop_writer()
        with self._peek_lock:
            if self._peek_db is not None:
                self._peek_db.close()
                self._peek_db = None
        with self._read_lock:
            self._db.close()
            self._vault.close()
            if self.pool is not None:
                self.pool.close()
