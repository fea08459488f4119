"""The call ledger's SQLite engine: a file, one connection per thread, WAL, ``synchronous=FULL``,
``BEGIN IMMEDIATE`` around every check-and-claim (``<home>/ledger.sqlite``)."""

from __future__ import annotations

import contextlib
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
