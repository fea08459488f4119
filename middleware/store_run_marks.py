"""The ``run_died`` mark of a session: a run of it died before its records were all written.

A process that dies holding a session's run lease leaves that lease; whoever finds it
(``RunLeases.reap_dead``) marks the session, so the next forget checks its records against
the agent's state; a forget that found them complete (or replaced them) clears the mark.
The mark is the ``run_died`` key of ``sessions.meta`` (``SessionInfo.run_died``).
"""

from __future__ import annotations

import json
import time

from .store_parts import StoreParts

#: the key of ``sessions.meta`` that says a run of the session died before its records were all written
RUN_DIED = "run_died"


class RunMarks:
    """The store's ``run_died`` marks (``ProvenanceStore.run_marks``): written at once, not
    through the writer."""

    def __init__(self, store: StoreParts):
        self._store = store

    def mark_died(self, session_id: str, owner: str) -> None:
        """Record that ``owner`` died holding a run of ``session_id`` (its records may stop short
        of the agent's state)."""
        now = time.time_ns()
        meta = json.dumps({RUN_DIED: {"owner": owner, "seen_ns": now}})
        with self._store._read_lock:
            self._store._db.execute(
                "INSERT INTO sessions(session_id, created_ns, updated_ns, meta) VALUES (?,?,?,?)"
                " ON CONFLICT(session_id) DO UPDATE SET meta=excluded.meta", (session_id, now, now, meta))

    def clear(self, session_id: str) -> None:
        """The session's records were found complete (or replaced by a full replay's)."""
        with self._store._read_lock:
            self._store._db.execute("UPDATE sessions SET meta='{}' WHERE session_id=?", (session_id,))
