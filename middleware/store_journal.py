"""The memory-store write journal: every recorded put and delete of a session, with old and new values.

The store's writer appends it (``Batch.journal``); a forget reads it to undo a session's writes
after the fork point and replaces it with its replay's (:meth:`MemoryJournal.replace`).
"""

from __future__ import annotations

import json

from .store_parts import StoreParts

#: one memory-store write: (seq, namespace, key, old JSON or None, new JSON or None)
JournalEntry = tuple[int, tuple[str, ...], str, str | None, str | None]


class MemoryJournal:
    """The store's memory-store write journal (``ProvenanceStore.memory_journal``)."""

    def __init__(self, store: StoreParts):
        self._store = store

    def entries(self, session_id: str, since_seq: int = 0) -> list[JournalEntry]:
        """Memory-store writes of a session from ``since_seq`` on, in order."""
        self._store.flush()
        with self._store._read_lock:
            rows = self._store._vault.execute(
                "SELECT seq, namespace, key, old_value, new_value FROM store_journal"
                " WHERE session_id=? AND seq>=? ORDER BY seq", (session_id, since_seq),
            ).fetchall()
        return [(r[0], tuple(json.loads(r[1])), r[2], r[3], r[4]) for r in rows]

    def replace(self, session_id: str, scratch_id: str, since_seq: int) -> None:
        """The session's journal from ``since_seq`` on becomes the scratch session's."""
        self._store.flush()
        with self._store._read_lock:
            v = self._store._vault
            with v.transaction():
                v.execute("DELETE FROM store_journal WHERE session_id=? AND seq>=?", (session_id, since_seq))
                v.execute("DELETE FROM store_journal WHERE session_id=? AND seq<?", (scratch_id, since_seq))
                v.execute("UPDATE store_journal SET session_id=? WHERE session_id=?", (session_id, scratch_id))
