"""The drivers of LangGraph's ``SqliteSaver`` (a sqlite3 connection) and ``AsyncSqliteSaver``
(an aiosqlite connection used from the saver's loop). Tables: ``checkpoints`` (one row a
checkpoint, its values in the ``checkpoint`` blob) and ``writes``."""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from .base import CheckpointerDriver, saver_class
from .files import async_main_file, main_file

__all__ = ["AsyncSqliteDriver", "SqliteDriver"]


class SqliteDriver(CheckpointerDriver):
    kind = "sqlite"
    engine = "sqlite"

    @classmethod
    def saver_type(cls) -> type | None:
        return saver_class("langgraph.checkpoint.sqlite", "SqliteSaver")

    @classmethod
    def open(cls, where: Any = None) -> tuple[Any, Callable[[], None]]:
        """``where``: a file path (a connection is opened, and closed by the closer) or a sqlite3
        connection (the caller's: left open)."""
        if isinstance(where, sqlite3.Connection):
            return cls.saver_type()(where), lambda: None
        conn = sqlite3.connect(str(where), check_same_thread=False)
        return cls.saver_type()(conn), conn.close

    @property
    def connection(self) -> sqlite3.Connection | None:
        conn = getattr(self.saver, "conn", None)
        return conn if isinstance(conn, sqlite3.Connection) else None

    @property
    def lock(self) -> Any:
        return getattr(self.saver, "lock", None)

    def database_file(self) -> Path | None:
        return main_file(self.connection)

    def thread_ids(self, prefix: str = "") -> list[str] | None:
        conn = self.connection
        if conn is None:
            return None
        with self.locked():
            rows = conn.execute("SELECT DISTINCT thread_id FROM checkpoints WHERE substr(thread_id, 1, ?) = ?",
                                (len(prefix), prefix)).fetchall()
        return sorted(r[0] for r in rows)

    def has_checkpoint(self, thread: str, checkpoint_id: str, checkpoint_ns: str = "") -> bool | None:
        if not self.keeps("get_tuple"):
            return None
        with self.saver.cursor(transaction=False) as cur:
            cur.execute("SELECT 1 FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?",
                        (str(thread), checkpoint_ns, checkpoint_id))
            return cur.fetchone() is not None

    def parent_ids(self, thread: str) -> dict[str, str | None] | None:
        if not self.exact():
            return None
        with self.saver.cursor(transaction=False) as cur:
            cur.execute("SELECT checkpoint_id, parent_checkpoint_id FROM checkpoints WHERE thread_id = ? "
                        "AND checkpoint_ns = ''", (str(thread),))
            return {cid: parent for cid, parent in cur.fetchall()}

    def sql_rewritable(self) -> bool:
        return self.connection is not None

    def rows_readable(self) -> bool:
        return self.connection is not None


class AsyncSqliteDriver(CheckpointerDriver):
    """Its connection belongs to the saver's worker thread: no SQL of unsee's runs on it; its file
    is scrubbed through a connection of its own (``database_file``). No :attr:`lock`: the saver's
    is an asyncio lock of its loop, which no other thread can hold."""

    kind = "async-sqlite"
    engine = "sqlite"

    @classmethod
    def saver_type(cls) -> type | None:
        return saver_class("langgraph.checkpoint.sqlite.aio", "AsyncSqliteSaver")

    @classmethod
    async def aopen(cls, where: Any = None) -> tuple[Any, Callable[[], Awaitable[None]]]:
        """``where``: a file path; the aiosqlite connection is made on the running loop."""
        import aiosqlite

        conn = await aiosqlite.connect(str(where))
        return cls.saver_type()(conn), conn.close

    @property
    def connection(self) -> Any:
        return getattr(self.saver, "conn", None)

    def database_file(self) -> Path | None:
        return async_main_file(self.saver)
