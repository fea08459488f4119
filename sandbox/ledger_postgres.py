"""The call ledger's PostgreSQL engine: the table ``unsee.calls`` on a psycopg 3 pool, at most
once across processes and machines (each call in flight holds an advisory lock on its id).

psycopg is imported only when an engine is made: importing this module needs no driver.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Iterator

from .errors import LedgerError, LedgerUnavailable
from .ledger_engine import PLANS_SCHEMA, SCHEMA, LedgerEngine, Sql

#: PostgreSQL: the same columns in unsee's schema, plus ``seq`` (insertion order: SQLite's rowid)
PG_SCHEMA = "unsee"
PG_TABLE = f"{PG_SCHEMA}.calls"
#: the reconciliation plans (SQLite's ``plans``), made by every engine that opens (IF NOT EXISTS):
#: a ledger stamped before the table existed gains it without a new version
PG_PLANS = f"{PG_SCHEMA}.ledger_plans"
#: the version stamped in ``unsee.unsee_meta`` under ``ledger`` (the store's own stamp table)
PG_VERSION = 1


def pg_ddl() -> list[str]:
    """SQLite's schema in unsee's PostgreSQL schema: the same columns (``REAL`` times as
    ``DOUBLE PRECISION``) plus ``seq``, and the store's stamp table."""
    table, index = [s.strip() for s in SCHEMA.split(";") if s.strip()]
    table = table.replace(" calls (", f" {PG_TABLE} (", 1).replace(" REAL ", " DOUBLE PRECISION ")
    table = table.rstrip(")").rstrip() + ",\n    seq         BIGINT GENERATED ALWAYS AS IDENTITY\n)"
    return [f"CREATE SCHEMA IF NOT EXISTS {PG_SCHEMA}",
            f"CREATE TABLE IF NOT EXISTS {PG_SCHEMA}.unsee_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
            table, index.replace(" ON calls(", f" ON {PG_TABLE}(", 1), pg_plans_ddl()]


def pg_plans_ddl() -> str:
    return (PLANS_SCHEMA.strip().rstrip(";").replace(" plans (", f" {PG_PLANS} (", 1)
            .replace(" REAL ", " DOUBLE PRECISION "))


#: PostgreSQL: calls one process may have in flight at once (each holds a connection of the
#: ledger's own pool until its outcome is committed; one more waits for a free one)
HOLDERS = 32
#: a call's advisory lock key on PostgreSQL (one per call id; held by whoever fires it)
_PG_LOCK = "hashtextextended(%s, 0)"


class PostgresEngine(LedgerEngine):
    """The table ``unsee.calls`` on a psycopg 3 ``ConnectionPool`` (autocommit connections).

    A call being fired holds a session-level advisory lock on its id, on a connection it
    keeps for as long as the call is in flight (its claim and its result are committed on
    that connection): the server frees the lock when that connection ends, so a firer that
    died (SIGKILL, lost machine) leaves the lock free. Those connections come from a small
    pool of the ledger's own on the same server (made on first use, none kept open
    beforehand), so slow external calls never starve the store's pool of connections."""

    dialect = "postgresql"
    table = PG_TABLE
    order = "seq"
    for_update = " FOR UPDATE"
    path = None

    def __init__(self, pool: Any):
        import psycopg
        from psycopg_pool import PoolTimeout

        self.pool = pool
        self.where = f"{getattr(pool, 'name', None) or 'postgresql'} ({PG_TABLE})"
        self._lost = (psycopg.OperationalError, psycopg.InterfaceError, PoolTimeout)
        self._holders: Any = None  # the pool of connections that hold calls' locks (made on first use)
        self._holders_lock = threading.Lock()
        self._create()

    def _holder_pool(self) -> Any:
        with self._holders_lock:
            if self._holders is None:
                from psycopg_pool import ConnectionPool

                self._holders = ConnectionPool(
                    self.pool.conninfo, kwargs={**(self.pool.kwargs or {}), "autocommit": True}, min_size=0,
                    max_size=HOLDERS, timeout=self.pool.timeout, check=ConnectionPool.check_connection,
                    name=f"{self.where} call locks", open=True)
            return self._holders

    @contextlib.contextmanager
    def _unavailable(self) -> Iterator[None]:
        """Connection-level failures become :class:`LedgerUnavailable` (typed, retryable)."""
        try:
            yield
        except self._lost as e:
            raise LedgerUnavailable(self.where, str(e)) from e

    def _create(self) -> None:
        """The table, made idempotently: one creator at a time across processes (the advisory
        lock the store's own ``create_tables`` takes), stamped in ``unsee_meta``."""
        with self._unavailable(), self.pool.connection() as conn:
            made = conn.execute("SELECT to_regclass(%s) IS NOT NULL AND to_regclass(%s) IS NOT NULL",
                                (PG_TABLE, f"{PG_SCHEMA}.unsee_meta")).fetchone()[0]
            row = (conn.execute(f"SELECT value FROM {PG_SCHEMA}.unsee_meta WHERE key='ledger'").fetchone()
                   if made else None)
            if row is None:
                with conn.transaction():
                    conn.execute("SELECT pg_advisory_xact_lock(hashtext('unsee.schema'))")
                    for ddl in pg_ddl():
                        conn.execute(ddl)
                    conn.execute(f"INSERT INTO {PG_SCHEMA}.unsee_meta VALUES ('ledger', %s) "
                                 "ON CONFLICT(key) DO NOTHING", (str(PG_VERSION),))
                    row = conn.execute(f"SELECT value FROM {PG_SCHEMA}.unsee_meta WHERE key='ledger'").fetchone()
            if made and not conn.execute("SELECT to_regclass(%s) IS NOT NULL", (PG_PLANS,)).fetchone()[0]:
                with conn.transaction():  # (a ledger made before the plans table existed)
                    conn.execute("SELECT pg_advisory_xact_lock(hashtext('unsee.schema'))")
                    conn.execute(pg_plans_ddl())
        if int(row[0]) > PG_VERSION:
            raise LedgerError(f"ledger {self.where}: schema version {row[0]}, written by a newer unsee")

    @staticmethod
    def exists(pool: Any) -> bool:
        import psycopg
        from psycopg_pool import PoolTimeout

        try:
            with pool.connection() as conn:
                return bool(conn.execute("SELECT to_regclass(%s) IS NOT NULL", (PG_TABLE,)).fetchone()[0])
        except (psycopg.OperationalError, psycopg.InterfaceError, PoolTimeout) as e:
            raise LedgerUnavailable(f"{getattr(pool, 'name', None) or 'postgresql'} ({PG_TABLE})", str(e)) from e

    @contextlib.contextmanager
    def tx(self) -> Iterator[Sql]:
        with self._unavailable(), self.pool.connection() as conn, conn.transaction():
            yield Sql(conn, self.table, True, PG_PLANS)

    @contextlib.contextmanager
    def read(self, hold: Any = None) -> Iterator[Sql]:
        with self._unavailable():
            if hold is not None:
                yield Sql(hold[0], self.table, True, PG_PLANS)
                return
            with self.pool.connection() as conn:
                yield Sql(conn, self.table, True, PG_PLANS)

    def hold(self, cid: str) -> Any:
        # blocks while another process fires this call; it then finds the call recorded
        holders = self._holder_pool()
        with self._unavailable():
            conn = holders.getconn()
        try:
            with self._unavailable():
                conn.execute(f"SELECT pg_advisory_lock({_PG_LOCK})", (cid,))
        except BaseException:
            holders.putconn(conn)
            raise
        return conn, cid

    def release(self, hold: Any) -> None:
        if hold is None:
            return
        conn, cid = hold
        try:
            conn.execute(f"SELECT pg_advisory_unlock({_PG_LOCK})", (cid,))
        except Exception:
            conn.close()  # (a connection that cannot unlock must not go back holding the lock)
        finally:
            self._holders.putconn(conn)  # a closed or broken connection is discarded by the pool

    def vacuum(self) -> bool:
        """Rewrite the table (``VACUUM FULL``): old row versions leave the heap and TOAST files.
        What the server's WAL, archives, backups and replicas hold stays out of reach."""
        with self.read() as c:
            c.execute("VACUUM FULL {t}")
        return True

    def integrity_ok(self) -> bool:
        with self.read() as c:
            row = c.execute("SELECT bool_and(indisvalid AND indisready) FROM pg_index "
                            "WHERE indrelid = to_regclass(?)", (PG_TABLE,)).fetchone()
        return bool(row and row[0])

    def close(self) -> None:
        with self._holders_lock:
            if self._holders is not None:
                self._holders.close()
