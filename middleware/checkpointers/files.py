"""The SQLite file behind a connection: a sqlite3 one, or the aiosqlite one of an async saver or store."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

__all__ = ["async_main_file", "main_file"]


def main_file(conn: Any) -> Path | None:
    """The file behind a sqlite3 connection (None: in memory, closed, or not SQLite)."""
    if not isinstance(conn, sqlite3.Connection):
        return None
    try:
        rows = conn.execute("PRAGMA database_list").fetchall()
    except sqlite3.Error:
        return None
    for _seq, name, file in rows:
        if name == "main":
            return Path(file) if file else None
    return None


def async_main_file(owner: Any) -> Path | None:
    """The file behind the aiosqlite connection of an async saver or store (``owner.conn`` with
    ``owner.loop``), asked on the owner's own loop (the connection belongs to its worker
    thread). None for anything else, an in-memory database, or when called from that loop's
    thread (which would wait on itself; the owner's own sync API refuses that too)."""
    conn, loop = getattr(owner, "conn", None), getattr(owner, "loop", None)
    if conn is None or loop is None or type(conn).__module__.split(".")[0] != "aiosqlite":
        return None
    try:
        if asyncio.get_running_loop() is loop:
            return None
    except RuntimeError:
        pass

    async def ask() -> list:
        async with conn.execute("PRAGMA database_list") as cur:
            return list(await cur.fetchall())

    try:
        rows = asyncio.run_coroutine_threadsafe(ask(), loop).result(timeout=30)
    except Exception:  # a closed connection or loop: no file to scan or scrub
        return None
    return next((Path(file) for _seq, name, file in rows if name == "main" and file), None)
