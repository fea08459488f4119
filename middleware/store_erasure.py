"""Erasure's operations on the store: a session's stored texts read and rewritten, a data
subject's sessions dropped, checkpoints retargeted, and PostgreSQL's tables compacted.

Used by the erasure plugin (``plugins/erasure``: the records route, a subject's erasure, the
LangGraph route). Each runs with nothing queued and no reader or writer of the store running
in this process (``ProvenanceStore.exclusive``), and is a rewrite for the store's readers.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence

from .sqldb import Db
from .store_files import PROVENANCE_TABLES, VAULT_TABLES
from .store_parts import StoreParts
from .store_schema import TEXT_KEYS


class StoreErasure:
    """The store's erasure operations (``ProvenanceStore.erasure``)."""

    def __init__(self, store: StoreParts):
        self._store = store

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
        with self._store.exclusive() as (db, vault):
            for file, table, cols in self.TEXT_COLUMNS:
                for key, texts in self._texts(vault if file == "vault" else db, table, cols, session_id):
                    out.extend((table, col, key, text) for col, text in zip(cols, texts) if text)
        return out

    def rewrite_texts(self, session_id: str, fix: Callable[[str], str | None]) -> int:
        """Replace each stored text of a session by ``fix(text)`` where that returns a
        new text (None: keep). One transaction per file; returns how many changed."""
        changed = 0
        with self._store.exclusive() as (db, vault):
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

    def erase_sessions(self, session_ids: Iterable[str], namespaces: Iterable[Sequence[str]] = ()) -> tuple[int, int]:
        """A data subject's erasure (plugins/erasure/subject.py): every record of each session
        (artifacts, checkpoints, spans, commit journal, vault content, memory-store journal) and
        every memory-store journal row, of any session, of a namespace in or under
        ``namespaces`` (the old and new values unsee keeps of those items). One transaction per
        file; idempotent. Returns (sessions that had records, journal rows of the namespaces)."""
        ids, prefixes = list(dict.fromkeys(session_ids)), [tuple(ns) for ns in namespaces]
        self._store.flush()
        with self._store._rewriting(*ids), self._store._read_lock:
            found = sum(1 for s in ids if self._store._db.execute(
                "SELECT 1 FROM sessions WHERE session_id=?", (s,)).fetchone())
            with self._store._vault.transaction():
                rows = 0
                for (ns,) in self._store._vault.execute("SELECT DISTINCT namespace FROM store_journal").fetchall():
                    parts = tuple(json.loads(ns))
                    if any(parts[:len(p)] == p for p in prefixes):
                        rows += self._store._vault.execute("DELETE FROM store_journal WHERE namespace=?", (ns,)).rowcount
                for s in ids:
                    for table in ("content", "store_journal"):
                        self._store._vault.execute(f"DELETE FROM {table} WHERE session_id=?", (s,))
            with self._store._db.transaction():
                for s in ids:
                    for table in ("artifacts", "checkpoints", "spans", "commits", "sessions"):
                        self._store._db.execute(f"DELETE FROM {table} WHERE session_id=?", (s,))
        return found, rows

    def retarget_checkpoints(self, session_id: str, thread_prefix: str) -> int:
        """Point the session's checkpoints whose LangGraph checkpoint lived in a thread
        starting with ``thread_prefix`` (a replay's scratch thread) at the session's own
        thread: erasure copies those checkpoints there, ids kept, and removes the scratch thread."""
        self._store.flush()
        with self._store._rewriting(session_id), self._store._read_lock:
            return self._store._db.execute(
                "UPDATE checkpoints SET langgraph_thread_id=? WHERE session_id=?"
                " AND substr(langgraph_thread_id, 1, length(?))=?",
                (session_id, session_id, thread_prefix, thread_prefix)).rowcount

    def compact(self) -> list[str]:
        """PostgreSQL: rewrite unsee's tables (``VACUUM FULL``), so deleted rows leave the
        heap and TOAST files; what the server's WAL, backups and replicas hold is beyond
        reach. SQLite files are scrubbed by erasure itself (WAL and free pages)."""
        if self._store.dialect != "postgresql":
            return []
        with self._store.exclusive() as (db, _):
            for table in sorted(PROVENANCE_TABLES | VAULT_TABLES):
                db.execute(f"VACUUM FULL {table}")
        return ["PostgreSQL: unsee's tables rewritten (VACUUM FULL): deleted rows left the heap and TOAST files"]
