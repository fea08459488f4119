"""One small database interface for unsee's own tables, on SQLite or PostgreSQL.

The store, the vault, the journals and the leases are written once, in the SQL
both engines accept (``?`` placeholders, ``INSERT ... ON CONFLICT``,
``substr``/``length``), against :class:`Db`:

- :class:`SqliteDb` wraps one ``sqlite3`` connection (autocommit; explicit
  transactions), as the embedded default always did;
- :class:`PostgresDb` runs each statement on a connection of a psycopg 3
  pool, or, inside :meth:`Db.transaction`, on the one connection the calling
  thread holds until the transaction ends. The pool checks a connection before
  handing it out, so after a server restart a store goes on with fresh ones.

A statement that could not reach PostgreSQL (server down, connection lost,
pool exhausted) raises :class:`~unsee.middleware.errors.StoreUnavailable`;
its transaction is rolled back by the server, so nothing is half-written.
"""

from __future__ import annotations

import abc
import contextlib
import functools
import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from typing import Any
from urllib.parse import urlsplit

from .errors import InvalidStoreUrl, StoreDriverMissing, StoreUnavailable

#: the PostgreSQL schema unsee's tables live in (beside LangGraph's own ``checkpoints`` table)
PG_SCHEMA = "unsee"


def is_postgres_url(store: str | None) -> bool:
    return bool(store) and str(store).partition("://")[0].lower() in ("postgresql", "postgres")


class Result:
    """Rows of a finished statement (PostgreSQL: fetched before the connection goes back)."""

    def __init__(self, rows: list[tuple], rowcount: int):
        self._rows = rows
        self.rowcount = rowcount

    def fetchall(self) -> list[tuple]:
        return list(self._rows)

    def fetchone(self) -> tuple | None:
        return self._rows[0] if self._rows else None

    def __iter__(self) -> Iterator[tuple]:
        return iter(self._rows)


class Db(abc.ABC):
    """A connection to unsee's tables. One thread at a time runs a transaction on it
    (callers hold their own lock); statements outside a transaction autocommit."""

    #: "sqlite" or "postgresql"
    dialect: str
    #: what a failing statement raises (for callers that tolerate failures, e.g. a heartbeat)
    errors: tuple[type[BaseException], ...]

    @abc.abstractmethod
    def execute(self, sql: str, args: Sequence[Any] = ()) -> Any: ...

    @abc.abstractmethod
    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None: ...

    @abc.abstractmethod
    def transaction(self, lock: str | None = None) -> contextlib.AbstractContextManager[None]:
        """A transaction: committed when the block ends, rolled back when it raises.
        ``lock`` names a table no other writer may touch until the end (SQLite: ``BEGIN
        IMMEDIATE``, the whole file; PostgreSQL: ``LOCK TABLE``), so check-then-write is atomic."""

    @abc.abstractmethod
    def tables(self) -> set[str]: ...

    @abc.abstractmethod
    def close(self) -> None: ...


class SqliteDb(Db):
    dialect = "sqlite"
    errors = (sqlite3.Error,)

    def __init__(self, conn: sqlite3.Connection):
        self.raw = conn

    def execute(self, sql: str, args: Sequence[Any] = ()) -> sqlite3.Cursor:
        return self.raw.execute(sql, tuple(args))

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        self.raw.executemany(sql, rows)

    @contextlib.contextmanager
    def transaction(self, lock: str | None = None) -> Iterator[None]:
        self.raw.execute("BEGIN IMMEDIATE" if lock else "BEGIN")
        try:
            yield
        except BaseException:
            if self.raw.in_transaction:
                self.raw.execute("ROLLBACK")
            raise
        self.raw.execute("COMMIT")

    def tables(self) -> set[str]:
        return {r[0] for r in self.raw.execute("SELECT name FROM sqlite_master WHERE type='table'")}

    def close(self) -> None:
        self.raw.close()


@functools.lru_cache(maxsize=512)
def _pg_sql(sql: str) -> str:
    # our statements have no '?' or '%' inside literals: placeholders are the only ones
    return sql.replace("%", "%%").replace("?", "%s")


class PostgresDb(Db):
    """Statements on a psycopg 3 ``ConnectionPool`` (autocommit connections)."""

    dialect = "postgresql"

    def __init__(self, pool: Any):
        import psycopg

        self.pool = pool
        self.errors = (psycopg.Error, StoreUnavailable)
        self._psycopg = psycopg
        self._local = threading.local()

    @contextlib.contextmanager
    def _unavailable(self) -> Iterator[None]:
        """Connection-level failures become ``StoreUnavailable`` (typed, retryable)."""
        from psycopg_pool import PoolTimeout

        try:
            yield
        except (self._psycopg.OperationalError, self._psycopg.InterfaceError, PoolTimeout) as e:
            raise StoreUnavailable(self.pool.name if hasattr(self.pool, "name") else "postgresql", str(e)) from e

    def _run(self, conn: Any, sql: str, args: Sequence[Any]) -> Result:
        cur = conn.execute(_pg_sql(sql), tuple(args) or None)
        rows = cur.fetchall() if cur.description else []
        return Result([tuple(r) for r in rows], cur.rowcount)

    def execute(self, sql: str, args: Sequence[Any] = ()) -> Result:
        with self._unavailable():
            conn = getattr(self._local, "conn", None)
            if conn is not None:
                return self._run(conn, sql, args)
            with self.pool.connection() as conn:
                return self._run(conn, sql, args)

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        rows = [tuple(r) for r in rows]
        if not rows:
            return
        with self._unavailable():
            conn = getattr(self._local, "conn", None)
            ctx = contextlib.nullcontext(conn) if conn is not None else self.pool.connection()
            with ctx as c:
                with c.cursor() as cur:
                    cur.executemany(_pg_sql(sql), rows)

    @contextlib.contextmanager
    def transaction(self, lock: str | None = None) -> Iterator[None]:
        if getattr(self._local, "conn", None) is not None:
            raise RuntimeError("nested transaction on one PostgresDb")
        with self._unavailable():
            conn = self.pool.getconn()
        try:
            with self._unavailable():
                conn.execute("BEGIN")
                if lock:
                    conn.execute(f"LOCK TABLE {lock} IN SHARE ROW EXCLUSIVE MODE")
            self._local.conn = conn
            try:
                yield
            except BaseException:
                self._local.conn = None
                with contextlib.suppress(Exception):
                    conn.execute("ROLLBACK")
                raise
            self._local.conn = None
            with self._unavailable():
                conn.execute("COMMIT")
        finally:
            self._local.conn = None
            self.pool.putconn(conn)  # a broken connection is discarded by the pool

    def tables(self) -> set[str]:
        rows = self.execute("SELECT table_name FROM information_schema.tables WHERE table_schema=?", (PG_SCHEMA,))
        return {r[0] for r in rows}

    def close(self) -> None:
        pass  # the pool belongs to whoever opened it (``open_pool``)


def open_pool(url: str, *, max_size: int = 8, timeout: float | None = None) -> Any:
    """A psycopg 3 pool on ``url`` whose connections autocommit and see unsee's schema first.

    ``timeout``: seconds a statement waits for a connection (server down: then
    ``StoreUnavailable``); default ``$UNSEE_STORE_TIMEOUT``, else 15. Makes the
    schema if it is missing. ``InvalidStoreUrl`` for a URL psycopg cannot parse;
    ``StoreUnavailable`` when the server cannot be reached within ``timeout`` seconds.
    """
    timeout = timeout if timeout is not None else float(os.environ.get("UNSEE_STORE_TIMEOUT") or 15)
    try:
        import psycopg
        from psycopg_pool import ConnectionPool, PoolTimeout
    except ImportError as e:  # pragma: no cover - the postgres extra is not installed
        raise StoreDriverMissing(url, "PostgreSQL stores need psycopg 3: pip install 'unsee[postgres]'") from e
    try:
        psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError as e:
        raise InvalidStoreUrl(url, str(e)) from e

    # one direct connection first: an unreachable server fails now, not after the pool's retries
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=max(1, int(timeout))) as conn:
            with conn.transaction():
                # one creator at a time: concurrent CREATE ... IF NOT EXISTS can collide in the catalog
                conn.execute("SELECT pg_advisory_xact_lock(hashtext('unsee.schema'))")
                conn.execute(f"CREATE SCHEMA IF NOT EXISTS {PG_SCHEMA}")
    except psycopg.OperationalError as e:
        raise StoreUnavailable(redact_url(url), str(e)) from e

    def configure(conn: Any) -> None:
        conn.execute(f"SET search_path TO {PG_SCHEMA}, public")

    pool = ConnectionPool(url, min_size=1, max_size=max_size, timeout=timeout, open=False,
                          kwargs={"autocommit": True}, configure=configure,
                          check=ConnectionPool.check_connection, name=redact_url(url))
    try:
        pool.open(wait=True, timeout=timeout)
    except PoolTimeout as e:
        pool.close()
        raise StoreUnavailable(redact_url(url), f"no connection within {timeout:g} s") from e
    return pool


def redact_url(url: str) -> str:
    """The URL without its password (for errors, logs and receipts)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url.partition("://")[0] + "://(unparsable URL)"
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(":" + parts.password + "@", ":***@", 1)
    return parts._replace(netloc=netloc).geturl()


def create_tables(db: Db, schema: str, tables: frozenset[str], version: int, *, what: str) -> None:
    """Make ``tables`` from ``schema`` and stamp ``version``, in one transaction (no half-made
    store). SQLite stamps ``PRAGMA user_version``; PostgreSQL a row of ``unsee_meta``, and
    ``INTEGER`` columns become ``BIGINT`` (nanosecond times). ``StoreDamaged``-style checks of
    what is found are the caller's (``store_files``)."""
    if db.dialect == "sqlite":
        conn = db.raw  # type: ignore[attr-defined]
        found = db.tables()
        if conn.execute("PRAGMA user_version").fetchone()[0] == version and tables <= found:
            return
        conn.executescript(f"BEGIN IMMEDIATE;\n{schema}\nPRAGMA user_version={version};\nCOMMIT;")
        return
    statements = [s.strip() for s in schema.replace("INTEGER", "BIGINT").split(";") if s.strip()]
    with db.transaction():
        db.execute("SELECT pg_advisory_xact_lock(hashtext('unsee.schema'))")
        db.execute("CREATE TABLE IF NOT EXISTS unsee_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        for s in statements:
            db.execute(s)
        db.execute("INSERT INTO unsee_meta VALUES (?, ?) ON CONFLICT(key) DO NOTHING", (what, str(version)))


def stored_version(db: Db, what: str) -> int | None:
    """The version stamped for ``what`` (PostgreSQL), or None before the tables are made."""
    if "unsee_meta" not in db.tables():
        return None
    row = db.execute("SELECT value FROM unsee_meta WHERE key=?", (what,)).fetchone()
    return int(row[0]) if row else None
