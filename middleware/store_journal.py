"""Forking and replacing sessions, and the commit journal that makes a replacement roll forward.

What the forget operator does to the records: copy a session's clean prefix
into a scratch session (:meth:`SessionReplacement.clone_prefix`), journal a
commit before its first write (:meth:`~SessionReplacement.begin_commit`), make
the scratch session's records the session's (:meth:`~SessionReplacement.replace_session`,
idempotent, so a crashed commit is finished by a retry), and edit or drop
content. The memory-store write journal (``store_journal``) is read and
replaced here too.
"""

from __future__ import annotations

import json
import threading
import time

from .sqldb import Db
from .store_schema import ARTIFACT_COLS, CHECKPOINT_COLS, COMMIT_UPSERT, CONTENT_UPSERT

#: one memory-store write: (seq, namespace, key, old JSON or None, new JSON or None)
JournalEntry = tuple[int, tuple[str, ...], str, str | None, str | None]


class SessionReplacement:
    """The forking and replacing half of :class:`~unsee.middleware.store.ProvenanceStore` (a mixin).

    Every method first waits for the writer (``flush``, or the store's
    ``_rows``, which flushes) so it sees every recorded batch.
    """

    _db: Db
    _vault: Db
    _read_lock: threading.RLock
    _incomplete: dict[str, int]

    def clone_prefix(self, src: str, dst: str, before_seq: int) -> None:
        """Copy ``src``'s artifacts and checkpoints with seq < ``before_seq`` (and their
        content) into session ``dst``, replacing whatever ``dst`` held."""
        self.flush()
        now = time.time_ns()
        with self._read_lock:
            db, vault = self._db, self._vault
            with vault.transaction():
                vault.execute("DELETE FROM content WHERE session_id=?", (dst,))
                vault.execute("INSERT INTO content SELECT ?, artifact_id, content FROM content WHERE session_id=?",
                              (dst, src))
            with db.transaction():
                for table in ("artifacts", "checkpoints", "spans", "sessions"):
                    db.execute(f"DELETE FROM {table} WHERE session_id=?", (dst,))
                db.execute(
                    "INSERT INTO sessions(session_id, created_ns, updated_ns, tokenizer, meta)"
                    " SELECT ?, ?, ?, tokenizer, ? FROM sessions WHERE session_id=?",
                    (dst, now, now, json.dumps({"scratch_of": src}), src),
                )
                cols = ",".join(c for c in ARTIFACT_COLS if c != "session_id")
                db.execute(
                    f"INSERT INTO artifacts(session_id,{cols}) SELECT ?,{cols} FROM artifacts"
                    " WHERE session_id=? AND seq<?", (dst, src, before_seq),
                )
                cols = ",".join(c for c in CHECKPOINT_COLS if c != "session_id")
                db.execute(
                    f"INSERT INTO checkpoints(session_id,{cols}) SELECT ?,{cols} FROM checkpoints"
                    " WHERE session_id=? AND seq<?", (dst, src, before_seq),
                )
            kept = {r[0] for r in db.execute("SELECT id FROM artifacts WHERE session_id=?", (dst,))}
            # the vault may be another file (SQLite) or the same database: the ids travel as values
            dropped = [(dst, r[0]) for r in vault.execute("SELECT artifact_id FROM content WHERE session_id=?", (dst,))
                       if r[0] not in kept]
            with vault.transaction():
                vault.executemany("DELETE FROM content WHERE session_id=? AND artifact_id=?", dropped)

    def begin_commit(self, event_id: str, session_id: str, scratch_id: str, since_ns: int,
                     payload: str | None = None) -> None:
        """Journal a commit before its first write: from here on it is rolled forward."""
        self.flush()
        with self._read_lock:
            self._db.execute(
                COMMIT_UPSERT,
                (event_id, session_id, scratch_id, since_ns, "started", time.time_ns(), payload),
            )

    def commit_state(self, event_id: str) -> str | None:
        rows = self._rows("SELECT state FROM commits WHERE event_id=?", (event_id,))
        return rows[0][0] if rows else None

    def pending_commits(self, session_id: str) -> list[tuple[str, str, int, str | None]]:
        rows = self._rows(
            "SELECT event_id, scratch_id, since_ns, payload FROM commits WHERE session_id=? AND state!='done'",
            (session_id,),
        )
        return [(r[0], r[1], r[2], r[3]) for r in rows]

    def commits_of(self, session_id: str) -> list[tuple[str, str, str, str | None]]:
        """Every commit of a session, oldest first: (event id, scratch id, state, payload)."""
        rows = self._rows("SELECT event_id, scratch_id, state, payload FROM commits WHERE session_id=?"
                          " ORDER BY created_ns", (session_id,))
        return [(r[0], r[1], r[2], r[3]) for r in rows]

    def replace_session(self, session_id: str, scratch_id: str, event_id: str, since_ns: int) -> None:
        """Make ``scratch_id``'s records the records of ``session_id`` (one transaction per file).

        Idempotent: a retry after a crash between the two files finishes the job.
        """
        self.flush()
        with self._read_lock:
            db, vault = self._db, self._vault
            scratch_left = db.execute(
                "SELECT COUNT(*) FROM artifacts WHERE session_id=?", (scratch_id,)
            ).fetchone()[0]
            if scratch_left:
                with vault.transaction():
                    vault.execute("DELETE FROM content WHERE session_id=?", (session_id,))
                    vault.execute("UPDATE content SET session_id=? WHERE session_id=?", (session_id, scratch_id))
                with db.transaction():
                    db.execute("DELETE FROM artifacts WHERE session_id=?", (session_id,))
                    db.execute("DELETE FROM checkpoints WHERE session_id=?", (session_id,))
                    db.execute("DELETE FROM spans WHERE session_id=? AND start_ns>=?", (session_id, since_ns))
                    for table in ("artifacts", "checkpoints", "spans"):
                        db.execute(f"UPDATE {table} SET session_id=? WHERE session_id=?", (session_id, scratch_id))
                    db.execute("DELETE FROM sessions WHERE session_id=?", (scratch_id,))
                    db.execute(
                        "UPDATE sessions SET updated_ns=?, incomplete=0, failures=0 WHERE session_id=?",
                        (time.time_ns(), session_id),
                    )
                    db.execute("UPDATE commits SET state='done' WHERE event_id=?", (event_id,))
            else:
                db.execute("UPDATE commits SET state='done' WHERE event_id=?", (event_id,))
        self._incomplete.pop(session_id, None)

    def drop_session(self, session_id: str) -> None:
        """Remove every record of a (scratch) session."""
        self.flush()
        with self._read_lock:
            self._vault.execute("DELETE FROM content WHERE session_id=?", (session_id,))
            self._vault.execute("DELETE FROM store_journal WHERE session_id=?", (session_id,))
            for table in ("artifacts", "checkpoints", "spans", "sessions"):
                self._db.execute(f"DELETE FROM {table} WHERE session_id=?", (session_id,))

    def store_journal(self, session_id: str, since_seq: int = 0) -> list[JournalEntry]:
        """Memory-store writes of a session from ``since_seq`` on, in order."""
        self.flush()
        with self._read_lock:
            rows = self._vault.execute(
                "SELECT seq, namespace, key, old_value, new_value FROM store_journal"
                " WHERE session_id=? AND seq>=? ORDER BY seq", (session_id, since_seq),
            ).fetchall()
        return [(r[0], tuple(json.loads(r[1])), r[2], r[3], r[4]) for r in rows]

    def replace_journal(self, session_id: str, scratch_id: str, since_seq: int) -> None:
        """The session's journal from ``since_seq`` on becomes the scratch session's."""
        self.flush()
        with self._read_lock:
            v = self._vault
            with v.transaction():
                v.execute("DELETE FROM store_journal WHERE session_id=? AND seq>=?", (session_id, since_seq))
                v.execute("DELETE FROM store_journal WHERE session_id=? AND seq<?", (scratch_id, since_seq))
                v.execute("UPDATE store_journal SET session_id=? WHERE session_id=?", (session_id, scratch_id))

    def set_content(self, session_id: str, artifact_id: str, content: str | None) -> None:
        """Replace (or with None delete) one artifact's content in the vault."""
        self.flush()
        with self._read_lock:
            if content is None:
                self._vault.execute(
                    "DELETE FROM content WHERE session_id=? AND artifact_id=?", (session_id, artifact_id)
                )
            else:
                self._vault.execute(CONTENT_UPSERT, (session_id, artifact_id, content))
