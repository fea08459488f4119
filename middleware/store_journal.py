"""Forking and replacing sessions, and the commit journal that makes a replacement roll forward.

What the forget operator does to the records: fork a session's clean prefix
into a scratch session, copy-on-write (:meth:`SessionReplacement.clone_prefix`), journal a
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

from .semconv import DESCRIBING_SCOPES, KEPT_SCOPES
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
        """Make session ``dst`` a fork of ``src`` at ``before_seq``, replacing whatever ``dst`` held.

        Copy-on-write: nothing is copied. ``dst`` reads ``src``'s artifacts and
        checkpoints with seq < ``before_seq`` (and their content) as its own
        (:meth:`fork_of`; the store's readers follow it) and records its own
        from there, so a fork costs the same at turn 20 and turn 400. ``src``
        must not change below ``before_seq`` while the fork lives (the forget
        holds the session)."""
        self.flush()
        now = time.time_ns()
        with self._read_lock:
            db, vault = self._db, self._vault
            with vault.transaction():
                vault.execute("DELETE FROM content WHERE session_id=?", (dst,))
            with db.transaction():
                for table in ("artifacts", "checkpoints", "spans", "sessions"):
                    db.execute(f"DELETE FROM {table} WHERE session_id=?", (dst,))
                db.execute(
                    "INSERT INTO sessions(session_id, created_ns, updated_ns, tokenizer, meta)"
                    " SELECT ?, ?, ?, tokenizer, ? FROM sessions WHERE session_id=?",
                    (dst, now, now, json.dumps({"scratch_of": src, "fork_seq": int(before_seq)}), src),
                )

    def fork_of(self, session_id: str) -> tuple[str, int] | None:
        """(source session, fork seq) when ``session_id`` is a fork made by :meth:`clone_prefix`
        (its records below the fork seq are the source's), else None. Reads what is written
        (no flush: a fork's row is written synchronously)."""
        with self._read_lock:
            row = self._db.execute("SELECT meta FROM sessions WHERE session_id=?", (session_id,)).fetchone()
        if not row or not row[0] or "fork_seq" not in row[0]:
            return None
        meta = json.loads(row[0])
        src, at = meta.get("scratch_of"), meta.get("fork_seq")
        return (src, int(at)) if isinstance(src, str) and isinstance(at, int) else None

    def fork_records(self, scratch_id: str) -> tuple[list[tuple[str, str]], list[str]]:
        """(the artifacts a fork recorded itself, as (id, type) in seq order; the ids among them its
        source session's prefix already gives to another artifact). Only the fork's own rows are
        read (the suffix), and the clash is one indexed lookup per row: what a commit checks before
        it makes the fork's records the session's (a clash would break that replacement)."""
        self.flush()
        with self._read_lock:
            fork = self.fork_of(scratch_id)
            own = [(r[0], r[1]) for r in self._db.execute(
                "SELECT id, type FROM artifacts WHERE session_id=? ORDER BY seq", (scratch_id,)).fetchall()]
            if fork is None:
                return own, []
            clash = [r[0] for r in self._db.execute(
                "SELECT s.id FROM artifacts s WHERE s.session_id=? AND EXISTS (SELECT 1 FROM artifacts p "
                "WHERE p.session_id=? AND p.id=s.id AND p.seq<?) ORDER BY s.seq",
                (scratch_id, fork[0], fork[1])).fetchall()]
        return own, clash

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

        ``scratch_id`` is a fork of the session (:meth:`clone_prefix`): the records the
        session holds from the fork seq on are replaced by the fork's own, so the work
        is the suffix's, not the session's. Idempotent: a retry after a crash between
        the two files finishes the job (the vault step upserts, then drops what no
        record of the new suffix names; neither depends on whether it ran before).
        """
        self.flush()
        with self._read_lock:
            db, vault = self._db, self._vault
            fork = self.fork_of(scratch_id)
            if fork is None and db.execute("SELECT 1 FROM artifacts WHERE session_id=? LIMIT 1",
                                           (scratch_id,)).fetchone():
                fork = (session_id, 0)  # a full copy made before forks were copy-on-write: replace it all
            if fork is None:  # the db step ran (the fork's row goes with it): only the journal is left
                db.execute("UPDATE commits SET state='done' WHERE event_id=?", (event_id,))
                self._incomplete.pop(session_id, None)
                return
            at = fork[1]
            old = {r[0] for r in db.execute("SELECT id FROM artifacts WHERE session_id=? AND seq>=?",
                                            (session_id, at))}
            new = {r[0] for r in db.execute("SELECT id FROM artifacts WHERE session_id=?", (scratch_id,))}
            with vault.transaction():
                vault.execute(
                    "INSERT INTO content(session_id, artifact_id, content) SELECT ?, artifact_id, content"
                    " FROM content WHERE session_id=? ON CONFLICT(session_id, artifact_id)"
                    " DO UPDATE SET content=excluded.content", (session_id, scratch_id))
                vault.execute("DELETE FROM content WHERE session_id=?", (scratch_id,))
                # the ids travel as values: the vault may be another file (SQLite) or the same database
                vault.executemany("DELETE FROM content WHERE session_id=? AND artifact_id=?",
                                  [(session_id, i) for i in sorted(old - new)])
            with db.transaction():
                db.execute("DELETE FROM artifacts WHERE session_id=? AND seq>=?", (session_id, at))
                db.execute("DELETE FROM checkpoints WHERE session_id=? AND seq>=?", (session_id, at))
                # (traces that describe the session stay: a forget's, a late verdict's; semconv)
                db.execute(
                    "DELETE FROM spans WHERE session_id=? AND start_ns>=? AND NOT (scope IN ({}) OR"
                    " (scope IN ({}) AND parent_span_id IS NULL))".format(
                        ",".join("?" * len(KEPT_SCOPES)), ",".join("?" * len(DESCRIBING_SCOPES))),
                    (session_id, since_ns, *KEPT_SCOPES, *DESCRIBING_SCOPES))
                for table in ("artifacts", "checkpoints", "spans"):
                    db.execute(f"UPDATE {table} SET session_id=? WHERE session_id=?", (session_id, scratch_id))
                db.execute("DELETE FROM sessions WHERE session_id=?", (scratch_id,))
                # a replay from the empty state (B5) replaced the whole record: a run that died
                # before its records were written no longer matters (its mark goes)
                db.execute(
                    "UPDATE sessions SET updated_ns=?, incomplete=0, failures=0,"
                    " meta=CASE WHEN ?=0 THEN '{}' ELSE meta END WHERE session_id=?",
                    (time.time_ns(), at, session_id),
                )
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
