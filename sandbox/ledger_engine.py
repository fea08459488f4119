"""Where the call ledger keeps its rows: the engine port and the SQL both engines share.

The state machine (:class:`~.ledger.Ledger`) is written once, in SQL both engines accept
(``?`` placeholders, ``{t}`` for the table, ``INSERT ... ON CONFLICT``); an engine
(:class:`LedgerEngine`: :mod:`.ledger_sqlite`, :mod:`.ledger_postgres`) says where the rows
live, how a transaction is taken, and how a call in flight is held.
"""

from __future__ import annotations

import abc
import contextlib
import functools
from pathlib import Path
from typing import Any

from .ledger_states import CallRecord

#: the calls table (SQLite's; :func:`~.ledger_postgres.pg_ddl` makes PostgreSQL's from it)
SCHEMA = """
CREATE TABLE IF NOT EXISTS calls (
    call_id     TEXT PRIMARY KEY,
    session     TEXT NOT NULL,
    tool        TEXT NOT NULL,
    args_json   TEXT NOT NULL,
    occurrence  INTEGER NOT NULL,
    effect      TEXT NOT NULL,
    status      TEXT NOT NULL,
    result_json TEXT,
    error       TEXT,
    mode        TEXT NOT NULL,  -- always 'live' (kept for ledger files written by earlier versions)
    attempts    INTEGER NOT NULL DEFAULT 0,
    created_at  REAL NOT NULL,
    updated_at  REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS calls_session ON calls(session, status);
"""
#: the reconciliation plans (one per forget event: what to compensate, run or report; no target
#: text), kept beside the calls they act on so one transaction engine serves both
PLANS_SCHEMA = """
CREATE TABLE IF NOT EXISTS plans (
    event_id    TEXT PRIMARY KEY,
    session     TEXT NOT NULL,
    plan_json   TEXT NOT NULL,
    created_at  REAL NOT NULL,
    updated_at  REAL NOT NULL
);
"""
#: a record's columns, in the order of :class:`~.ledger_states.CallRecord`'s fields
COLUMNS = "call_id, session, tool, args_json, occurrence, effect, status, result_json, error, attempts, created_at, updated_at"
#: the columns an insert writes (``mode`` is constant)
INSERT = f"INSERT INTO {{t}} AS c ({COLUMNS}, mode) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,'live')"


class Sql:
    """One connection inside an engine's transaction (or read): ``execute`` takes the
    shared SQL (``?``, ``{t}``) and returns a DB-API cursor."""

    def __init__(self, conn: Any, table: str, postgres: bool, plans: str = "plans"):
        self.conn, self.table, self.postgres, self.plans = conn, table, postgres, plans

    def execute(self, sql: str, params: Any = ()) -> Any:
        args = tuple(params)
        if self.postgres:
            return self.conn.execute(_sql(sql, self.table, True, self.plans), args or None)
        return self.conn.execute(_sql(sql, self.table, False, self.plans), args)


@functools.lru_cache(maxsize=64)
def _sql(sql: str, table: str, postgres: bool, plans: str = "plans") -> str:
    sql = sql.replace("{t}", table).replace("{p}", plans)
    # our statements have no '?' or '%' inside literals: placeholders are the only ones
    return sql.replace("%", "%%").replace("?", "%s") if postgres else sql


class LedgerEngine(abc.ABC):
    """Where a :class:`Ledger` keeps its rows."""

    dialect: str
    path: Path | None
    where: str
    table: str
    #: appended to a read inside a transaction that is followed by a write of that row
    for_update: str = ""
    #: ``calls()``'s tie-break after ``created_at`` (insertion order)
    order: str

    @abc.abstractmethod
    def tx(self) -> contextlib.AbstractContextManager[Sql]:
        """A write transaction (committed at the end, rolled back when it raises)."""

    @abc.abstractmethod
    def read(self, hold: Any = None) -> contextlib.AbstractContextManager[Sql]:
        """Statements outside a transaction (each commits by itself); on ``hold`` if given."""

    def one(self, sql: str, params: Any, hold: Any = None) -> int:
        """One statement, atomic and committed by itself; how many rows it changed."""
        with self.read(hold) as c:
            return c.execute(sql, params).rowcount

    def hold(self, cid: str) -> Any:
        """Taken before a call is claimed, released after its outcome is committed: while a
        live process fires ``cid`` it holds this (None: nothing beyond this process)."""
        return None

    def release(self, hold: Any) -> None:
        pass

    def settle(self, cid: str) -> "CallRecord | None":
        """The record of ``cid`` once no other process is firing it: read while holding what a
        firer holds (so a live one is waited for; a dead one's hold the system has freed)."""
        hold = self.hold(cid)
        try:
            with self.read(hold) as c:
                return get_record(c, cid)
        finally:
            self.release(hold)

    @abc.abstractmethod
    def vacuum(self) -> bool: ...

    @abc.abstractmethod
    def integrity_ok(self) -> bool: ...

    def close(self) -> None:
        pass


def get_record(c: Sql, cid: str, lock: str = "") -> "CallRecord | None":
    row = c.execute(f"SELECT {COLUMNS} FROM {{t}} WHERE call_id=?{lock}", (cid,)).fetchone()
    return CallRecord(*row) if row else None

