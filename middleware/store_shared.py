"""What every process on a shared (PostgreSQL) store shares besides the records: keys and leases.

On SQLite both are files of the home instead (``keys``: the hash key file; ``leases.sqlite``),
so these answer None there and the caller falls back to the home.
"""

from __future__ import annotations

import secrets

from .sqldb import Db, PostgresDb
from .store_parts import StoreParts


class SharedState:
    """The store's shared keys and lease database (``ProvenanceStore.shared``)."""

    def __init__(self, store: StoreParts):
        self._store = store

    def lease_db(self) -> Db | None:
        """Where a shared store keeps the session leases (None: SQLite, whose leases have
        their own file under the home, apart from the batching writer's connections)."""
        return PostgresDb(self._store.pool) if self._store.pool is not None else None

    def key(self, name: str) -> bytes | None:
        """A random 32-byte key kept in a shared store under ``name``, made by whichever
        process asks first (PostgreSQL: every machine on the store hashes alike); None on
        SQLite, whose keys are files of the home."""
        if self._store.pool is None:
            return None
        db = self._store._db
        db.execute("INSERT INTO unsee_meta VALUES (?, ?) ON CONFLICT(key) DO NOTHING", (name, secrets.token_hex(32)))
        return bytes.fromhex(db.execute("SELECT value FROM unsee_meta WHERE key=?", (name,)).fetchone()[0])
