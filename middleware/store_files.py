"""Checks of the store's files before anything opens them for writing.

A damaged file (truncated, garbled, another program's database) is
``StoreDamaged`` naming it, never rebuilt as an empty store; a home that is a
file is ``HomeNotADirectory``. Everything here only reads.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from urllib.parse import quote

from .errors import HomeNotADirectory, StoreDamaged

#: ``PRAGMA user_version`` of both files once their schema is made (0: made before versions, or empty)
STORE_VERSION = 1
PROVENANCE_TABLES = frozenset({"sessions", "artifacts", "checkpoints", "spans", "commits"})
VAULT_TABLES = frozenset({"content", "store_journal"})
_SQLITE_MAGIC = b"SQLite format 3\x00"


def check_home(home: Path) -> Path:
    """``home`` unchanged, or ``HomeNotADirectory`` when it (or the nearest folder above
    it that exists) is not a directory. Creates nothing."""
    home = Path(home)
    for p in (home, *home.parents):
        if p.exists() or p.is_symlink():
            if not p.is_dir():
                raise HomeNotADirectory(home, p)
            break
    return home


def ensure_home(home: Path) -> Path:
    """Make the home directory (and its parents); a file in the way is ``HomeNotADirectory``."""
    home = check_home(home)
    try:
        home.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as e:
        raise HomeNotADirectory(home, e.filename or home) from e
    return home


def check_db(path: Path, tables: frozenset[str]) -> bool:
    """Refuse a damaged store file before anything writes to it (``StoreDamaged``).

    Returns whether the file holds a store already (False: absent, empty, or an
    SQLite file with no tables yet, which an interrupted creation leaves).
    Damage: not a regular file; not an SQLite file; shorter than its header
    says (truncated); ``PRAGMA quick_check`` fails; a schema version of another
    program or a newer unsee; tables of another program, or ours missing.
    Only reads: the check connection is read-only (and immutable when no WAL
    is pending), so the file's bytes stay as they were.
    """
    path = Path(path)
    if not path.exists() and not path.is_symlink():
        return False
    if not path.is_file():
        raise StoreDamaged(path, "not a regular file")
    size = path.stat().st_size
    if size == 0:
        return False
    with open(path, "rb") as f:
        head = f.read(100)
    if len(head) < 100 or not head.startswith(_SQLITE_MAGIC):
        raise StoreDamaged(path, "not an SQLite database file")
    page_size = int.from_bytes(head[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    if page_size < 512 or page_size & (page_size - 1):
        raise StoreDamaged(path, "garbled header: bad page size")
    wal_pending = _wal_pending(path)
    if not wal_pending:  # a pending WAL may legitimately hold pages past the file's end
        pages = int.from_bytes(head[28:32], "big")
        header_valid = pages > 0 and head[24:28] == head[92:96]
        if size % page_size or (header_valid and size < pages * page_size):
            expected = f" of {pages * page_size}" if header_valid else ""
            raise StoreDamaged(path, f"truncated: {size} bytes{expected}")
    try:
        conn = connect_ro(path)
    except sqlite3.Error as e:
        raise StoreDamaged(path, str(e)) from e
    try:
        problem = conn.execute("PRAGMA quick_check(1)").fetchone()[0]
        if problem != "ok":
            raise StoreDamaged(path, "integrity check: " + " ".join(str(problem).split()))
        found = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        version = conn.execute("PRAGMA user_version").fetchone()[0]
    except sqlite3.DatabaseError as e:
        if isinstance(e, StoreDamaged):
            raise
        raise StoreDamaged(path, str(e)) from e
    finally:
        conn.close()
    found = {t for t in found if not t.startswith("sqlite_")}
    if version > STORE_VERSION:
        raise StoreDamaged(path, f"schema version {version}: written by a newer unsee or another program")
    if not found:
        return False
    if not found & tables or found - tables:
        raise StoreDamaged(path, "an SQLite database that is not an unsee store (tables: "
                           + ", ".join(sorted(found)) + ")")
    if version == STORE_VERSION and tables - found:
        raise StoreDamaged(path, "tables missing: " + ", ".join(sorted(tables - found)))
    return True


def _wal_pending(path: Path) -> bool:
    wal = path.with_name(path.name + "-wal")
    return wal.exists() and wal.stat().st_size > 0


def connect_ro(path: Path) -> sqlite3.Connection:
    """A connection that cannot write the file or create files beside it (immutable unless
    a WAL is pending, whose pages must be read; its -shm is there already then)."""
    uri = f"file:{quote(str(path.resolve()))}?mode=ro" + ("" if _wal_pending(path) else "&immutable=1")
    return sqlite3.connect(uri, uri=True, check_same_thread=False)


def _vault_has_content(path: Path) -> bool:
    if not path.exists() or path.stat().st_size == 0:
        return False
    conn = connect_ro(path)
    try:
        return conn.execute("SELECT EXISTS(SELECT 1 FROM content)").fetchone()[0] == 1
    except sqlite3.DatabaseError:
        return False
    finally:
        conn.close()
