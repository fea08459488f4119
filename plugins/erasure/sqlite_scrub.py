"""Remove the bytes that outlive a row delete in SQLite.

``DELETE`` only unlinks a row: its bytes stay in the freed page of the
database file and, in WAL mode, in every WAL frame that held the page until
a checkpoint truncates the log. :func:`scrub` makes them go: secure_delete
(later deletes overwrite with zeros), a TRUNCATE checkpoint, VACUUM (rebuilds
the file without free pages), and a second TRUNCATE checkpoint (VACUUM in WAL
mode writes the whole new database into the WAL). A checkpoint another
connection blocks is reported, never assumed done.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from unsee.middleware.checkpointers.files import async_main_file, main_file
from unsee.middleware.errors import InvalidArgument

__all__ = ["Checkpoint", "ScrubResult", "async_main_file", "enable_secure_delete", "main_file", "scrub",
           "scrub_file", "scrub_owned"]


@dataclass(frozen=True)
class Checkpoint:
    """The answer of ``PRAGMA wal_checkpoint(TRUNCATE)``: (busy, log frames, checkpointed frames)."""

    busy: int
    log: int
    checkpointed: int

    @property
    def complete(self) -> bool:
        """No reader blocked it and every frame went into the database file (-1/-1: not in WAL mode)."""
        return self.busy == 0 and self.log == self.checkpointed


@dataclass(frozen=True)
class ScrubResult:
    """What a scrub did. ``complete`` is False when a step could not run to the end."""

    path: Path | None  # the main database file; None for an in-memory database
    db_bytes_before: int
    db_bytes_after: int
    wal_bytes_after: int
    checkpoint: Checkpoint  # the final checkpoint
    vacuumed: bool
    notes: list[str] = field(default_factory=list)

    @property
    def checkpoint_complete(self) -> bool:
        return self.checkpoint.complete

    @property
    def complete(self) -> bool:
        return self.checkpoint_complete and self.vacuumed


def enable_secure_delete(conn: sqlite3.Connection) -> None:
    """Make later deletes on ``conn`` overwrite freed content with zeros (a per-connection setting)."""
    conn.execute("PRAGMA secure_delete=ON")


def _size(path: Path | None) -> int:
    try:
        return os.path.getsize(path) if path is not None else 0
    except FileNotFoundError:
        return 0


def _checkpoint(conn: sqlite3.Connection) -> Checkpoint:
    return Checkpoint(*conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone())


def scrub(conn: sqlite3.Connection, *, lock: Any = None, vacuum: bool = True) -> ScrubResult:
    """Scrub the database of ``conn`` so deleted rows leave no bytes in its file or WAL.

    An open transaction on ``conn`` is never committed here (it may be the
    owner's half-done work): the scrub is skipped and the result says so
    (``complete`` False). ``lock`` (a threading Lock/RLock, or None) is held throughout so the
    object that owns ``conn`` does not write in between. Works whatever the
    connection's isolation_level. A reader on another connection can block the
    checkpoint (``checkpoint.busy``) or VACUUM (then ``vacuumed`` is False and
    a note says why): the result reports it and ``complete`` is False.
    """
    if not isinstance(conn, sqlite3.Connection):
        raise InvalidArgument(f"scrub needs a sqlite3.Connection, got {type(conn).__name__}")
    with lock if lock is not None else contextlib.nullcontext():
        path = main_file(conn)
        if conn.in_transaction:
            size = _size(path)
            return ScrubResult(path, size, size, _size(Path(f"{path}-wal") if path else None),
                               Checkpoint(1, -1, -1), False,
                               ["not scrubbed: the connection has an open transaction (its owner's work)"])
        before = _size(path)
        notes: list[str] = []
        enable_secure_delete(conn)
        first = _checkpoint(conn)
        if not first.complete:
            notes.append(f"first checkpoint incomplete (busy={first.busy}, log={first.log}, done={first.checkpointed})")
        vacuumed = False
        if vacuum:
            try:
                conn.execute("VACUUM")
                vacuumed = True
            except sqlite3.OperationalError as exc:  # busy/locked by another connection: report, don't pretend
                notes.append(f"VACUUM failed: {exc}")
        else:
            notes.append("VACUUM skipped: free pages may still hold deleted bytes")
        last = _checkpoint(conn)
        if not last.complete:
            notes.append(
                f"final checkpoint incomplete (busy={last.busy}, log={last.log}, done={last.checkpointed}): "
                "another connection holds a read transaction, the WAL may still hold deleted bytes"
            )
        wal = Path(f"{path}-wal") if path is not None else None
        return ScrubResult(path, before, _size(path), _size(wal), last, vacuumed, notes)


def scrub_file(path: str | os.PathLike, *, vacuum: bool = True, timeout: float = 5.0) -> ScrubResult:
    """Scrub a database file no live object owns: open a connection of its own, scrub, close.

    A missing file raises FileNotFoundError (it is never created); a file that
    is not a SQLite database raises InvalidArgument.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no SQLite database to scrub at {path}")
    # mode=rw: never create an empty database in place of a missing one
    uri = "file:" + urllib.request.pathname2url(str(path.resolve())) + "?mode=rw"
    conn = sqlite3.connect(uri, uri=True, timeout=timeout, isolation_level=None)
    try:
        try:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.DatabaseError as exc:
            raise InvalidArgument(f"{path} is not a usable SQLite database: {exc}") from exc
        return scrub(conn, vacuum=vacuum)
    finally:
        conn.close()


def scrub_owned(conn: Any, path: Path, *, lock: Any = None) -> ScrubResult:
    """Scrub the database at ``path`` that ``conn`` opened: through ``conn`` when it is a sqlite3
    connection, else (an async saver's aiosqlite connection, which belongs to its worker thread)
    through a connection of its own."""
    if isinstance(conn, sqlite3.Connection):
        return scrub(conn, lock=lock)
    return scrub_file(path)
