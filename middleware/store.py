"""SQLite provenance store and content vault under the unsee home.

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
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from .errors import SessionNotFound, StoreDamaged
from .records import Artifact, Checkpoint, SessionInfo
from .store_files import PROVENANCE_TABLES, VAULT_TABLES, _vault_has_content, check_db, ensure_home
from .store_journal import SessionReplacement
from .store_schema import (SCHEMA, VAULT_SCHEMA, SpanRow, artifact_from_row, checkpoint_from_row, connect,
                           create_schema, span_from_row)
from .store_writer import Batch, BatchWriter

__all__ = ["Batch", "ProvenanceStore", "SpanRow"]


class ProvenanceStore(BatchWriter, SessionReplacement):
    """Provenance tables + vault, with a batching writer thread."""

    def __init__(self, home: Path):
        self.home = ensure_home(Path(home))
        self.path = self.home / "provenance.sqlite"
        self.vault_path = self.home / "vault.sqlite"
        # Check both files before either is written: a damaged store is an error, never rebuilt.
        has_db = check_db(self.path, PROVENANCE_TABLES)
        check_db(self.vault_path, VAULT_TABLES)
        if not has_db and self.path.exists() and _vault_has_content(self.vault_path):
            raise StoreDamaged(self.path, f"empty, but {self.vault_path.name} holds recorded content")
        self._db = connect(self.path)
        try:
            create_schema(self._db, SCHEMA, PROVENANCE_TABLES)
            self._vault = connect(self.vault_path)
        except BaseException:
            self._db.close()
            raise
        try:
            create_schema(self._vault, VAULT_SCHEMA, VAULT_TABLES)
        except BaseException:
            self._db.close()
            self._vault.close()
            raise
        self._read_lock = threading.RLock()
        self._start_writer()

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
    def exclusive(self) -> Iterator[tuple[sqlite3.Connection, sqlite3.Connection]]:
        """(provenance, vault) connections with nothing queued and no reader or writer
        of this store running: for maintenance such as erasure's WAL truncation and VACUUM."""
        self.flush()
        with self._read_lock:
            yield self._db, self._vault

    def files(self) -> list:
        """The two database files this store owns (their -wal/-shm siblings go with them)."""
        return [self.path, self.vault_path]

    def sessions_like(self, prefix: str) -> list[str]:
        """Recorded session ids starting with ``prefix`` (e.g. a session's scratch sessions)."""
        rows = self._rows("SELECT session_id FROM sessions WHERE substr(session_id, 1, ?)=?",
                          (len(prefix), prefix))
        return [r[0] for r in rows]

    #: (file, table, text columns) that can hold payload text of a session
    TEXT_COLUMNS = (("vault", "content", ("content",)), ("vault", "store_journal", ("old_value", "new_value")),
                    ("db", "spans", ("attributes", "events", "status_description")), ("db", "commits", ("payload",)))

    def session_texts(self, session_id: str) -> list[tuple[str, str, int, str]]:
        """Every stored text of a session: (table, column, rowid, text)."""
        out = []
        with self.exclusive() as (db, vault):
            for file, table, cols in self.TEXT_COLUMNS:
                conn = vault if file == "vault" else db
                for row in conn.execute(f"SELECT rowid, {', '.join(cols)} FROM {table} WHERE session_id=?",
                                        (session_id,)).fetchall():
                    for col, text in zip(cols, row[1:]):
                        if text:
                            out.append((table, col, row[0], text))
        return out

    def rewrite_texts(self, session_id: str, fix: Callable[[str], str | None]) -> int:
        """Replace each stored text of a session by ``fix(text)`` where that returns a
        new text (None: keep). One transaction per file; returns how many changed."""
        changed = 0
        with self.exclusive() as (db, vault):
            for conn, file in ((vault, "vault"), (db, "db")):
                conn.execute("BEGIN")
                try:
                    for f, table, cols in self.TEXT_COLUMNS:
                        if f != file:
                            continue
                        rows = conn.execute(f"SELECT rowid, {', '.join(cols)} FROM {table} WHERE session_id=?",
                                            (session_id,)).fetchall()
                        for row in rows:
                            for col, text in zip(cols, row[1:]):
                                new = fix(text) if text else None
                                if new is not None and new != text:
                                    conn.execute(f"UPDATE {table} SET {col}=? WHERE rowid=?", (new, row[0]))
                                    changed += 1
                    conn.execute("COMMIT")
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
        return changed

    def retarget_checkpoints(self, session_id: str, thread_prefix: str) -> int:
        """Point the session's checkpoints whose LangGraph checkpoint lived in a thread
        starting with ``thread_prefix`` (a replay's scratch thread) at the session's own
        thread: erasure copies those checkpoints there, ids kept, and removes the scratch thread."""
        self.flush()
        with self._read_lock:
            return self._db.execute(
                "UPDATE checkpoints SET langgraph_thread_id=? WHERE session_id=?"
                " AND substr(langgraph_thread_id, 1, ?)=?",
                (session_id, session_id, len(thread_prefix), thread_prefix)).rowcount

    def close(self) -> None:
        if self._closed:
            return
        self._stop_writer()
        with self._read_lock:
            self._db.close()
            self._vault.close()
