"""The provenance store and content vault: SQLite under the unsee home, or PostgreSQL.

``provenance.sqlite`` holds sessions, artifacts, checkpoints and the spans
they came from (for export). ``vault.sqlite`` holds payload text keyed by
artifact id, in its own file so it can be erased without touching structure.

:class:`ProvenanceStore` (here: opening and reading) is assembled from
:mod:`.store_schema` (tables, row mapping), :mod:`.store_writer` (the batching
writer thread: recording never puts a SQLite commit on the agent's hot path;
``flush()`` waits until everything submitted is durable, readers call it
first; a failed write is logged, counted and marks the session incomplete)
and :mod:`.store_journal` (forking and replacing sessions, with the commit
journal that rolls a replacement forward).

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
import secrets
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from .errors import SessionNotFound, StoreDamaged
from .records import Artifact, Checkpoint, SessionInfo
from .sqldb import Db, PostgresDb, SqliteDb, create_tables, open_pool, redact_url, stored_version
from .store_files import PROVENANCE_TABLES, STORE_VERSION, VAULT_TABLES, _vault_has_content, check_db, ensure_home
from .store_journal import SessionReplacement
from .store_schema import (SCHEMA, TEXT_KEYS, VAULT_SCHEMA, SpanRow, artifact_from_row, checkpoint_from_row, connect,
                           span_from_row)
from .store_writer import Batch, BatchWriter

__all__ = ["Batch", "ProvenanceStore", "SpanRow"]


class ProvenanceStore(BatchWriter, SessionReplacement):
    """Provenance tables + vault, with a batching writer thread.

    ``url``: a ``postgresql://`` URL puts the tables in that database (schema
    ``unsee``) instead of the two SQLite files under ``home``; the home still
    holds what is local to a machine (hash key when none is stored, receipts).
    """

    def __init__(self, home: Path, url: str | None = None):
        self.home = ensure_home(Path(home))
        self.url = url
        self.pool: Any = None
        if url:
            self.path = self.vault_path = None
            self._open_postgres(url)
        else:
            self._open_sqlite()
        self._read_lock = threading.RLock()
        self._start_writer()

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

    def lease_db(self) -> Db | None:
        """Where a shared store keeps the session leases (None: SQLite, whose leases have
        their own file under the home, apart from the batching writer's connections)."""
        return PostgresDb(self.pool) if self.pool is not None else None

    def shared_key(self, name: str) -> bytes | None:
        """A random 32-byte key kept in a shared store under ``name``, made by whichever
        process asks first (PostgreSQL: every machine on the store hashes alike); None on
        SQLite, whose keys are files of the home."""
        if self.pool is None:
            return None
        self._db.execute("INSERT INTO unsee_meta VALUES (?, ?) ON CONFLICT(key) DO NOTHING",
                         (name, secrets.token_hex(32)))
        return bytes.fromhex(self._db.execute("SELECT value FROM unsee_meta WHERE key=?", (name,)).fetchone()[0])

    # -- reading ----------------------------------------------------------
    def _rows(self, sql: str, args: Iterable[Any] = ()) -> list[tuple]:
        self.flush()
        with self._read_lock:
            return self._db.execute(sql, tuple(args)).fetchall()

    def has_session(self, session_id: str, flush: bool = True) -> bool:
        """Whether a session is recorded. ``flush=False`` sees only what is already
        written (enough for sessions of other processes; no wait on the writer)."""
        if not flush:
            with self._read_lock:
                return bool(self._db.execute(
                    "SELECT 1 FROM sessions WHERE session_id=?", (session_id,)).fetchone())
        return bool(self._rows("SELECT 1 FROM sessions WHERE session_id=?", (session_id,)))

    def require(self, session_id: str) -> None:
        if not self.has_session(session_id):
            raise SessionNotFound(session_id)

    def sessions(self) -> list[SessionInfo]:
        rows = self._rows(
            "SELECT s.session_id, s.created_ns, s.updated_ns, s.incomplete, s.failures, s.tokenizer,"
            " (SELECT COUNT(*) FROM artifacts a WHERE a.session_id=s.session_id),"
            " (SELECT COUNT(*) FROM checkpoints c WHERE c.session_id=s.session_id),"
            " (SELECT COALESCE(MAX(turn),0) FROM artifacts a WHERE a.session_id=s.session_id)"
            " FROM sessions s ORDER BY s.created_ns"
        )
        return [
            SessionInfo(
                session_id=r[0], created_ns=r[1], updated_ns=r[2],
                incomplete=bool(r[3]) or r[0] in self._incomplete,
                failures=max(r[4], self._incomplete.get(r[0], 0)), tokenizer=r[5],
                artifacts=r[6], checkpoints=r[7], turns=r[8],
            )
            for r in rows
        ]

    def session(self, session_id: str) -> SessionInfo:
        for s in self.sessions():
            if s.session_id == session_id:
                return s
        raise SessionNotFound(session_id)

    def artifacts(self, session_id: str) -> list[Artifact]:
        rows = self._rows(
            "SELECT * FROM artifacts WHERE session_id=? ORDER BY seq", (session_id,)
        )
        return [artifact_from_row(r) for r in rows]

    def checkpoints(self, session_id: str) -> list[Checkpoint]:
        rows = self._rows(
            "SELECT * FROM checkpoints WHERE session_id=? ORDER BY seq", (session_id,)
        )
        return [checkpoint_from_row(r) for r in rows]

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
        return row[0] if row else None

    def contents(self, session_id: str) -> dict[str, str]:
        self.flush()
        with self._read_lock:
            rows = self._vault.execute(
                "SELECT artifact_id, content FROM content WHERE session_id=?", (session_id,)
            ).fetchall()
        return dict(rows)

    # -- erasure ---------------------------------------------------------
    @contextlib.contextmanager
    def exclusive(self) -> Iterator[tuple[Db, Db]]:
        """(provenance, vault) databases with nothing queued and no reader or writer of this
        store running in this process: for maintenance such as erasure's scrubs."""
        self.flush()
        with self._read_lock:
            yield self._db, self._vault

    def files(self) -> list:
        """The two database files this store owns (their -wal/-shm siblings go with them);
        none on PostgreSQL."""
        return [p for p in (self.path, self.vault_path) if p is not None]

    def compact(self) -> list[str]:
        """PostgreSQL: rewrite unsee's tables (``VACUUM FULL``), so deleted rows leave the
        heap and TOAST files; what the server's WAL, backups and replicas hold is beyond
        reach. SQLite files are scrubbed by erasure itself (WAL and free pages)."""
        if self.dialect != "postgresql":
            return []
        with self.exclusive() as (db, _):
            for table in sorted(PROVENANCE_TABLES | VAULT_TABLES):
                db.execute(f"VACUUM FULL {table}")
        return ["PostgreSQL: unsee's tables rewritten (VACUUM FULL): deleted rows left the heap and TOAST files"]

    def sessions_like(self, prefix: str) -> list[str]:
        """Recorded session ids starting with ``prefix`` (e.g. a session's scratch sessions)."""
        rows = self._rows("SELECT session_id FROM sessions WHERE substr(session_id, 1, length(?))=?",
                          (prefix, prefix))
        return [r[0] for r in rows]

    #: (file, table, text columns) that can hold payload text of a session
    TEXT_COLUMNS = (("vault", "content", ("content",)), ("vault", "store_journal", ("old_value", "new_value")),
                    ("db", "spans", ("attributes", "events", "status_description")), ("db", "commits", ("payload",)))

    def _texts(self, conn: Db, table: str, cols: tuple[str, ...], session_id: str) -> list[tuple]:
        keys = TEXT_KEYS[table]
        return [(r[:len(keys)], r[len(keys):]) for r in conn.execute(
            f"SELECT {', '.join(keys + cols)} FROM {table} WHERE session_id=?", (session_id,)).fetchall()]

    def session_texts(self, session_id: str) -> list[tuple[str, str, tuple, str]]:
        """Every stored text of a session: (table, column, primary key, text)."""
        out = []
        with self.exclusive() as (db, vault):
            for file, table, cols in self.TEXT_COLUMNS:
                for key, texts in self._texts(vault if file == "vault" else db, table, cols, session_id):
                    out.extend((table, col, key, text) for col, text in zip(cols, texts) if text)
        return out

    def rewrite_texts(self, session_id: str, fix: Callable[[str], str | None]) -> int:
        """Replace each stored text of a session by ``fix(text)`` where that returns a
        new text (None: keep). One transaction per file; returns how many changed."""
        changed = 0
        with self.exclusive() as (db, vault):
            for conn, file in ((vault, "vault"), (db, "db")):
                with conn.transaction():
                    for f, table, cols in self.TEXT_COLUMNS:
                        if f != file:
                            continue
                        where = " AND ".join(f"{k}=?" for k in TEXT_KEYS[table])
                        for key, texts in self._texts(conn, table, cols, session_id):
                            for col, text in zip(cols, texts):
                                new = fix(text) if text else None
                                if new is not None and new != text:
                                    conn.execute(f"UPDATE {table} SET {col}=? WHERE {where}", (new, *key))
                                    changed += 1
        return changed

    def retarget_checkpoints(self, session_id: str, thread_prefix: str) -> int:
        """Point the session's checkpoints whose LangGraph checkpoint lived in a thread
        starting with ``thread_prefix`` (a replay's scratch thread) at the session's own
        thread: erasure copies those checkpoints there, ids kept, and removes the scratch thread."""
        self.flush()
        with self._read_lock:
            return self._db.execute(
                "UPDATE checkpoints SET langgraph_thread_id=? WHERE session_id=?"
                " AND substr(langgraph_thread_id, 1, length(?))=?",
                (session_id, session_id, thread_prefix, thread_prefix)).rowcount

    def close(self) -> None:
        if self._closed:
            return
        self._stop_writer()
        with self._read_lock:
            self._db.close()
            self._vault.close()
            if self.pool is not None:
                self.pool.close()
