"""An atomic namespace delete: every item of a memory-store namespace (and of the namespaces
under it) deleted so that no recorded put interleaves, and the zero verified at that point.

LangGraph's ``BaseStore`` has no ``delete_namespace``; a search-then-delete loop races a
concurrent ``put``, so its "zero" is never a point-in-time fact. Here the delete holds the
``forget`` lease of the namespace (``middleware/leases.py``: ``namespace_keys``; a SQLite
row in ``<home>/leases.sqlite`` or the PostgreSQL ``leases`` table every machine shares),
and every put through unsee's ``RecordingStore`` holds the ``run`` leases of its namespace
and of each prefix around the write. So while the delete runs no recorded put to the
namespace runs, in any process; the delete lists, deletes, lists again and, still holding
the lease, records the moment it saw zero items (``NamespaceDeletion.zero_at_ns``).

Outside the guarantee: writes through the raw store (``store.inner``, another program on
the same database), which take no lease.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from langgraph.store.base import PutOp

from unsee.middleware.leases import namespace_keys

PAGE = 100  # (search() defaults to limit=10 and truncates in silence)


@dataclass(frozen=True)
class NamespaceDeletion:
    namespace: tuple[str, ...]
    deleted: int
    #: items found by a search after the delete, while the lease was still held (0: clean)
    remaining: int
    #: time.time_ns() when the listing found ``remaining`` items, under the lease
    zero_at_ns: int
    #: whether the delete held the namespace's lease (False: no lease table; not atomic)
    atomic: bool

    def note(self, label: str) -> str:
        how = "under its lease (no recorded put interleaved)" if self.atomic else "WITHOUT a lease (not atomic)"
        at = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(self.zero_at_ns / 1e9)) + f".{self.zero_at_ns % 10**9:09d}Z"
        return f"namespace {label}: {self.deleted} items deleted {how}; {self.remaining} left at {at}"


def _sweep(inner: Any, namespace: tuple[str, ...]) -> int:
    deleted = 0
    while True:
        # search() is prefix-scoped: sub-namespaces' items come too; each is deleted by its own
        # namespace (deleting them by ``namespace`` would be a silent no-op and never end)
        batch = inner.search(namespace, limit=PAGE)
        if not batch:
            return deleted
        # a page's deletes in one batch (one transaction of a SQL store)
        inner.batch([PutOp(tuple(item.namespace), item.key, None) for item in batch])
        deleted += len(batch)


def delete_namespace(store: Any, namespace: tuple[str, ...], *, leases: Any, hasher: Any,
                     timeout: float = 300.0) -> NamespaceDeletion:
    """Delete every item under ``namespace`` from ``store`` (a ``RecordingStore`` or the store it
    wraps: the raw store is written, so the deletes are not recorded as a session's writes)."""
    inner = getattr(store, "inner", store)
    namespace = tuple(namespace)
    if leases is None:  # (a context without a lease table: still deleted and verified, said so)
        deleted = _sweep(inner, namespace)
        left = len(inner.search(namespace, limit=PAGE))
        return NamespaceDeletion(namespace, deleted, left, time.time_ns(), atomic=False)
    key = namespace_keys(hasher, namespace)[-1]
    with leases.draining(key, timeout=timeout):  # (new puts wait from here; those in flight end first)
        deleted = _sweep(inner, namespace)
        left = len(inner.search(namespace, limit=PAGE))
        at = time.time_ns()
    return NamespaceDeletion(namespace, deleted, left, at, atomic=True)
