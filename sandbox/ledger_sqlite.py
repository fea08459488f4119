"""The call ledger's SQLite engine: a file, one connection per thread, WAL, ``synchronous=FULL``,
``BEGIN IMMEDIATE`` around every check-and-claim (``<home>/ledger.sqlite``).

A call being fired holds an exclusive ``flock`` on a lock file of its own
(``<ledger>.locks/<call id>``, removed once its outcome is recorded): the kernel
frees it when the firer dies, so whoever finds the call firing can tell a live
firer on this machine (the lock is held: wait for it) from a dead one (free: in
doubt), as the advisory lock does on PostgreSQL."""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any, Iterator

from .errors import LedgerError
from .ledger_engine import PLANS_SCHEMA, SCHEMA, LedgerEngine, Sql


class SqliteEngine(LedgerEngine):
    """A file: one connection per thread, WAL, ``synchronous=FULL``, ``BEGIN IMMEDIATE``."""

    dialect = "sqlite"
    table = "calls"
    order = "rowid"

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.where = str(self.path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._conns: list[sqlite3.Connection] = []
        self._conns_lock = threading.Lock()
        self._closed = False
        self._conn().executescript(SCHEMA + PLANS_SCHEMA)

    def _conn(self) -> sqlite3.Connection:
        if self._closed:
            raise LedgerError(f"ledger {self.where} is closed")
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("PRAGMA busy_timeout=30000")
            conn.execute("PRAGMA secure_delete=ON")  # redacted text is zeroed, not left in free pages
            self._local.conn = conn
            with self._conns_lock:
                self._conns.append(conn)
        return conn

    @contextlib.contextmanager
    def tx(self) -> Iterator[Sql]:
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield Sql(conn, self.table, False)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        else:
            conn.execute("COMMIT")

    @contextlib.contextmanager
    def read(self, hold: Any = None) -> Iterator[Sql]:
        yield Sql(self._conn(), self.table, False)

    # -- a live firer, told from a dead one --------------------------------------------------
    def _lock_file(self, cid: str) -> int:
        folder = self.path.with_name(self.path.name + ".locks")
        folder.mkdir(exist_ok=True)
        return os.open(folder / cid, os.O_RDWR | os.O_CREAT, 0o600)

    def hold(self, cid: str) -> Any:
        fd = self._lock_file(cid)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # (blocks while another live process fires this call)
        except BaseException:
            os.close(fd)
            raise
        return fd, cid

    def release(self, hold: Any) -> None:
        if hold is None:
            return
        fd, cid = hold
        with contextlib.suppress(OSError):  # (the outcome is recorded: nobody needs the file)
            os.unlink(self.path.with_name(self.path.name + ".locks") / cid)
        os.close(fd)  # (closing frees the lock)

    def vacuum(self) -> bool:
        conn = self._conn()
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute("VACUUM")
        busy, log, done = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        return busy == 0 and log == done

    def integrity_ok(self) -> bool:
        row = self._conn().execute("PRAGMA integrity_check").fetchone()
        return bool(row) and row[0] == "ok"

    def close(self) -> None:
        self._closed = True
        with self._conns_lock:
            for conn in self._conns:
                with contextlib.suppress(sqlite3.Error):
                    conn.close()
            self._conns.clear()
