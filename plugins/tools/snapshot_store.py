"""Local-backend snapshots kept in the shared PostgreSQL store (no OCI registry configured).

The local sandbox backend hands each snapshot, as a tarball, to a
``snapshot_store`` (``unsee.sandbox``'s ``SnapshotStore`` protocol: ``put``,
``get``, ``delete``) and records the reference it gets back as the snapshot's
``remote``; a worker on another machine restores the snapshot from there.
:class:`StoreSnapshotStore` keeps those tarballs in a table of unsee's schema
(``env_snapshot_blobs``, ``bytea``), so with ``Unsee(store="postgresql://...",
sandbox="local")`` nothing a forget needs stays on one machine.

References look like ``store:<32 hex>`` (never an OCI reference: no ``@``).
Erasure reads them (``files``: the tar's members) and deletes them, then
rewrites the table (``compact``: ``VACUUM FULL``: a deleted row's bytes leave the
heap and TOAST files; what the server wrote to its WAL, archives and replicas
is beyond reach and named so).
"""

from __future__ import annotations

import io
import tarfile
import time
import uuid
from collections.abc import Iterator
from typing import Any

from unsee.sandbox import StoredItemNotFound

__all__ = ["PREFIX", "StoreSnapshotStore", "is_store_ref"]

#: how a reference of this store begins
PREFIX = "store:"

BLOB_SCHEMA = """
CREATE TABLE IF NOT EXISTS env_snapshot_blobs (
    ref TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    size INTEGER NOT NULL,
    made_ns INTEGER NOT NULL,
    data BYTEA NOT NULL
)
"""
BLOB_TABLES = frozenset({"env_snapshot_blobs"})
BLOB_VERSION = 1


def is_store_ref(ref: str) -> bool:
    return isinstance(ref, str) and ref.startswith(PREFIX) and "@" not in ref


class StoreSnapshotStore:
    """Snapshot tarballs in ``unsee.env_snapshot_blobs`` (``db``: a ``middleware.sqldb`` Db on
    the store's pool). Satisfies ``unsee.sandbox``'s ``SnapshotStore`` protocol."""

    table = "env_snapshot_blobs"

    def __init__(self, db: Any):
        from unsee.middleware.sqldb import create_tables

        if db.dialect != "postgresql":
            raise ValueError("StoreSnapshotStore keeps snapshots in a PostgreSQL store")
        self.db = db
        if not BLOB_TABLES <= db.tables():
            create_tables(db, BLOB_SCHEMA, BLOB_TABLES, BLOB_VERSION, what="environment_blobs")

    def __repr__(self) -> str:
        return f"StoreSnapshotStore(unsee.{self.table})"

    def put(self, name: str, data: bytes) -> str:
        """Keep ``data`` (a snapshot's tarball); its reference."""
        ref = PREFIX + uuid.uuid4().hex
        self.db.execute(f"INSERT INTO {self.table} (ref, name, size, made_ns, data) VALUES (?, ?, ?, ?, ?)",
                        (ref, str(name), len(data), time.time_ns(), bytes(data)))
        return ref

    def get(self, ref: str) -> bytes:
        """The tarball; ``StoredItemNotFound``-style ``KeyError`` when it is gone."""
        row = self.db.execute(f"SELECT data FROM {self.table} WHERE ref=?", (ref,)).fetchone()
        if row is None:
            raise KeyError(f"snapshot {ref!r} is not in the store (deleted, or never put)")
        return bytes(row[0])

    def delete(self, ref: str) -> bool:
        """Delete one tarball; True if it was there."""
        return self.db.execute(f"DELETE FROM {self.table} WHERE ref=?", (ref,)).rowcount > 0

    def has(self, ref: str) -> bool:
        return self.db.execute(f"SELECT 1 FROM {self.table} WHERE ref=?", (ref,)).fetchone() is not None

    def refs_of(self, env_id: str) -> list[str]:
        """Every tarball an environment put here (the backend names them ``<env_id>-<seq>``),
        listed or not in the catalog: a process that died between ``put`` and writing the
        catalog's row left one only this finds."""
        prefix = f"{env_id}-"
        rows = self.db.execute(f"SELECT ref FROM {self.table} WHERE substr(name, 1, ?) = ? ORDER BY made_ns",
                               (len(prefix), prefix)).fetchall()
        return [r[0] for r in rows]

    def present(self, refs: list[str]) -> set[str]:
        """Those of ``refs`` the store still holds (one query per 500)."""
        found: set[str] = set()
        for i in range(0, len(refs), 500):
            chunk = list(refs[i:i + 500])
            marks = ",".join("?" * len(chunk))
            found |= {r[0] for r in self.db.execute(f"SELECT ref FROM {self.table} WHERE ref IN ({marks})",
                                                    chunk).fetchall()}
        return found

    def files(self, ref: str, item: Any = None) -> Iterator[tuple[str, bytes]]:
        """``(path, content)`` of every regular file in the tarball (plain or gzip).
        ``StoredItemNotFound`` (with ``item``) when it is gone."""
        row = self.db.execute(f"SELECT data FROM {self.table} WHERE ref=?", (ref,)).fetchone()
        if row is None:
            raise StoredItemNotFound(item if item is not None else ref)
        with tarfile.open(fileobj=io.BytesIO(bytes(row[0])), mode="r:*") as tf:
            for m in tf:
                if not m.isfile():
                    continue
                f = tf.extractfile(m)
                yield m.name.lstrip("/").removeprefix("./"), f.read() if f else b""

    def compact(self) -> str:
        """Rewrite the table so deleted tarballs leave its files (a note for the receipt)."""
        self.db.execute(f"VACUUM FULL {self.table}")
        return f"PostgreSQL: unsee.{self.table} rewritten (VACUUM FULL): deleted snapshots left the heap"
