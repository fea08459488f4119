"""What a role of the provenance store works on (:class:`StoreParts`).

The store's roles (:mod:`.store_rewrites`, :mod:`.store_commits`, :mod:`.store_journal`,
:mod:`.store_erasure`, :mod:`.store_run_marks`, :mod:`.store_shared`) are small classes
the store composes; each holds the store and reaches its databases through this protocol,
so a role never imports the store (no import circle) and names exactly what it uses.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from contextlib import AbstractContextManager
from typing import Any, Protocol

from .sqldb import Db


class StoreParts(Protocol):
    """The provenance store as its roles see it."""

    #: the provenance database and the vault (the same database on PostgreSQL)
    _db: Db
    _vault: Db
    #: held around every read and write of this process (the writer holds it while it writes)
    _read_lock: threading.RLock
    #: session -> recording failures this process saw (the writer's; a replacement clears it)
    _incomplete: dict[str, int]
    #: the PostgreSQL pool (None: SQLite)
    pool: Any

    @property
    def dialect(self) -> str: ...

    def flush(self, timeout: float = 30.0) -> None:
        """Wait until everything submitted to the writer is written."""

    def _rows(self, sql: str, args: Iterable[Any] = ()) -> list[tuple]:
        """Rows of ``sql`` after a flush."""

    def _rewriting(self, *sessions: str) -> AbstractContextManager[None]:
        """Around a change of recorded records other than the writer's appends (readers' stamps)."""

    def exclusive(self) -> AbstractContextManager[tuple[Db, Db]]:
        """(provenance, vault) with nothing queued and no reader or writer running."""
