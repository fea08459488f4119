"""The commit journal: a forget's commit is journalled before its first write, then rolled forward.

A commit (``plugins/forget``) writes a ``started`` row (:meth:`CommitJournal.begin`) before it
replaces a session's records (``SessionRewrites.replace_session``, which marks it ``done``); a
commit found ``started`` after a crash is finished by a retry.
"""

from __future__ import annotations

import time

from .store_parts import StoreParts
from .store_schema import COMMIT_UPSERT


class CommitJournal:
    """The store's commit journal (``ProvenanceStore.commits``)."""

    def __init__(self, store: StoreParts):
        self._store = store

    def begin(self, event_id: str, session_id: str, scratch_id: str, since_ns: int,
              payload: str | None = None) -> None:
        """Journal a commit before its first write: from here on it is rolled forward."""
        self._store.flush()
        with self._store._read_lock:
            self._store._db.execute(
                COMMIT_UPSERT,
                (event_id, session_id, scratch_id, since_ns, "started", time.time_ns(), payload),
            )

    def state(self, event_id: str) -> str | None:
        rows = self._store._rows("SELECT state FROM commits WHERE event_id=?", (event_id,))
        return rows[0][0] if rows else None

    def pending(self, session_id: str) -> list[tuple[str, str, int, str | None]]:
        rows = self._store._rows(
            "SELECT event_id, scratch_id, since_ns, payload FROM commits WHERE session_id=? AND state!='done'",
            (session_id,),
        )
        return [(r[0], r[1], r[2], r[3]) for r in rows]

    def of(self, session_id: str) -> list[tuple[str, str, str, str | None]]:
        """Every commit of a session, oldest first: (event id, scratch id, state, payload)."""
        rows = self._store._rows("SELECT event_id, scratch_id, state, payload FROM commits WHERE session_id=?"
                                 " ORDER BY created_ns", (session_id,))
        return [(r[0], r[1], r[2], r[3]) for r in rows]
