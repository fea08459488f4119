"""Rewrites of a session's records: forks, the replacement a commit makes, drops and content edits.

What the forget operator does to the records: fork a session's clean prefix into a scratch
session, copy-on-write (:meth:`SessionRewrites.clone_prefix`), make the scratch session's
records the session's (:meth:`~SessionRewrites.replace_session`, idempotent, so a crashed
commit is finished by a retry, journalled first: :mod:`.store_commits`), drop a scratch
session and edit or drop content. Each is a rewrite for the store's readers: the store's
epoch moves before and after it (``ProvenanceStore.records_since``).
"""

from __future__ import annotations

import json
import time

from .semconv import DESCRIBING_SCOPES, KEPT_SCOPES
from .store_parts import StoreParts
from .store_schema import CONTENT_UPSERT


class SessionRewrites:
    """The store's forks and rewrites of a session (``ProvenanceStore.rewrites``).

    Every method first waits for the writer (``flush``) so it sees every recorded batch.
    """

    def __init__(self, store: StoreParts):
        self._store = store

    def clone_prefix(self, src: str, dst: str, before_seq: int) -> None:
        """Make session ``dst`` a fork of ``src`` at ``before_seq``, replacing whatever ``dst`` held.

        Copy-on-write: nothing is copied. ``dst`` reads ``src``'s artifacts and
        checkpoints with seq < ``before_seq`` (and their content) as its own
        (:meth:`fork_of`; the store's readers follow it) and records its own
        from there, so a fork costs the same at turn 20 and turn 400. ``src``
        must not change below ``before_seq`` while the fork lives (the forget
        holds the session)."""
        with self._store._rewriting(dst):
            self._store.flush()
            now = time.time_ns()
            with self._store._read_lock:
                db, vault = self._store._db, self._store._vault
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
        with self._store._read_lock:
            row = self._store._db.execute("SELECT meta FROM sessions WHERE session_id=?", (session_id,)).fetchone()
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
        self._store.flush()
        with self._store._read_lock:
            fork = self.fork_of(scratch_id)
            own = [(r[0], r[1]) for r in self._store._db.execute(
                "SELECT id, type FROM artifacts WHERE session_id=? ORDER BY seq", (scratch_id,)).fetchall()]
            if fork is None:
                return own, []
            clash = [r[0] for r in self._store._db.execute(
                "SELECT s.id FROM artifacts s WHERE s.session_id=? AND EXISTS (SELECT 1 FROM artifacts p "
                "WHERE p.session_id=? AND p.id=s.id AND p.seq<?) ORDER BY s.seq",
                (scratch_id, fork[0], fork[1])).fetchall()]
        return own, clash

    def replace_session(self, session_id: str, scratch_id: str, event_id: str, since_ns: int) -> None:
        """Make ``scratch_id``'s records the records of ``session_id`` (one transaction per file).

        ``scratch_id`` is a fork of the session (:meth:`clone_prefix`): the records the
        session holds from the fork seq on are replaced by the fork's own, so the work
        is the suffix's, not the session's. Idempotent: a retry after a crash between
        the two files finishes the job (the vault step upserts, then drops what no
        record of the new suffix names; neither depends on whether it ran before).
        """
        with self._store._rewriting(session_id, scratch_id):
            self._store.flush()
            with self._store._read_lock:
                db, vault = self._store._db, self._store._vault
                fork = self.fork_of(scratch_id)
                if fork is None and db.execute("SELECT 1 FROM artifacts WHERE session_id=? LIMIT 1",
                                               (scratch_id,)).fetchone():
                    fork = (session_id, 0)  # a full copy made before forks were copy-on-write: replace it all
                if fork is None:  # the db step ran (the fork's row goes with it): only the journal is left
                    db.execute("UPDATE commits SET state='done' WHERE event_id=?", (event_id,))
                    self._store._incomplete.pop(session_id, None)
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
            self._store._incomplete.pop(session_id, None)

    def drop_session(self, session_id: str) -> None:
        """Remove every record of a (scratch) session."""
        with self._store._rewriting(session_id):
            self._store.flush()
            with self._store._read_lock:
                self._store._vault.execute("DELETE FROM content WHERE session_id=?", (session_id,))
                self._store._vault.execute("DELETE FROM store_journal WHERE session_id=?", (session_id,))
                for table in ("artifacts", "checkpoints", "spans", "sessions"):
                    self._store._db.execute(f"DELETE FROM {table} WHERE session_id=?", (session_id,))

    def set_content(self, session_id: str, artifact_id: str, content: str | None) -> None:
        """Replace (or with None delete) one artifact's content in the vault."""
        with self._store._rewriting(session_id):
            self._store.flush()
            with self._store._read_lock:
                if content is None:
                    self._store._vault.execute(
                        "DELETE FROM content WHERE session_id=? AND artifact_id=?", (session_id, artifact_id)
                    )
                else:
                    self._store._vault.execute(CONTENT_UPSERT, (session_id, artifact_id, content))
