"""Byte-level scans: how many copies of a target's forms files and blobs still hold.

The audit trusts bytes, not an API: a row deleted through SQL can live on in
a free page or the WAL, so files are read raw and counted with
:class:`~unsee.plugins.erasure.forms.FormCounter` (one copy counted once).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from unsee.middleware.hashing import sha256_file  # noqa: F401 (the erasure's name for it)
from unsee.plugins.erasure.forms import Form, FormCounter

CHUNK = 1 << 20
SQLITE_SIBLINGS = ("-wal", "-shm", "-journal")


@dataclass
class FileHit:
    """Copies of the target found in one file (or in-memory blob named ``path``), per form name."""

    path: Path
    copies: int
    forms: dict[str, int]


@dataclass
class ScanResult:
    """A tree scan: files holding copies, files that could not be read, and how many were read."""

    hits: list[FileHit] = field(default_factory=list)
    unreadable: list[Path] = field(default_factory=list)
    files_scanned: int = 0

    @property
    def copies(self) -> int:
        return sum(h.copies for h in self.hits)


def _hit(path: str | os.PathLike, counter: FormCounter) -> FileHit:
    counts = counter.close()
    return FileHit(Path(path), sum(counts.values()), counts)


def scan_bytes(name: str | os.PathLike, data: bytes, forms: Iterable[Form]) -> FileHit:
    """Scan an in-memory blob (a tar member, a value read from a store); ``name`` labels the hit."""
    counter = FormCounter(forms)
    counter.feed(bytes(data))
    return _hit(name, counter)


def scan_file(path: str | os.PathLike, forms: Iterable[Form], *, chunk_size: int = CHUNK) -> FileHit:
    """Scan one file in chunks of ``chunk_size`` bytes.

    The counter keeps the longest match length of the forms as overlap between
    chunks, so a copy that spans a chunk boundary is found, and counted once:
    the result equals a scan of the whole file in one blob. OSError (missing,
    unreadable) propagates.
    """
    if chunk_size < 1:
        raise ValueError("chunk_size must be positive")
    counter = FormCounter(forms)
    with open(path, "rb") as f:
        while chunk := f.read(chunk_size):
            counter.feed(chunk)
    return _hit(path, counter)


def scan_tree(root: str | os.PathLike, forms: Iterable[Form], *, follow_symlinks: bool = False) -> ScanResult:
    """Scan every regular file under ``root`` (or ``root`` itself when it is a file).

    Sockets, fifos and devices are skipped (reading them blocks or never ends);
    symlinks are skipped unless ``follow_symlinks``, and then each directory and
    file is visited once (a link loop or two links to one file are no double
    count). Files and directories that cannot be read are listed in
    ``unreadable`` instead of failing the scan. ``hits`` holds only files with
    copies. A missing ``root`` raises FileNotFoundError.
    """
    forms = tuple(forms)
    root = Path(root)
    result = ScanResult()
    if not os.path.lexists(root):
        raise FileNotFoundError(f"nothing to scan: {root} does not exist")
    seen: set[tuple[int, int]] = set()

    def visit(path: Path) -> None:
        try:
            st = os.stat(path, follow_symlinks=follow_symlinks)
        except FileNotFoundError:
            return  # a dangling link, or removed since listed: no bytes to hold a copy
        except OSError:
            result.unreadable.append(path)
            return
        if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) in seen:
            return
        seen.add((st.st_dev, st.st_ino))
        try:
            hit = scan_file(path, forms)
        except OSError:
            result.unreadable.append(path)
            return
        result.files_scanned += 1
        if hit.copies:
            result.hits.append(hit)

    if not root.is_dir() or (root.is_symlink() and not follow_symlinks):
        visit(root)
        return result
    walked: set[tuple[int, int]] = set()
    for dirpath, dirnames, filenames in os.walk(
        root, followlinks=follow_symlinks, onerror=lambda e: result.unreadable.append(Path(e.filename))
    ):
        try:
            st = os.stat(dirpath)
        except OSError:
            result.unreadable.append(Path(dirpath))
            dirnames[:] = []
            continue
        if (st.st_dev, st.st_ino) in walked:  # reached again through a followed link: a loop or an alias
            dirnames[:] = []
            continue
        walked.add((st.st_dev, st.st_ino))
        dirnames.sort()
        # Without followlinks, os.walk lists links to directories in dirnames but does not enter them.
        for name in sorted(filenames):
            visit(Path(dirpath) / name)
    return result


def sqlite_files(db_path: str | os.PathLike) -> list[Path]:
    """The SQLite database file and those of its ``-wal``, ``-shm``, ``-journal`` siblings that exist."""
    db = Path(db_path)
    return [p for p in [db, *(Path(f"{db}{suffix}") for suffix in SQLITE_SIBLINGS)] if p.exists()]


