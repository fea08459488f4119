"""The call ledger: every real tool execution, and an outbox for side effects.

Agent-agnostic: a *call* is (session, tool, arguments); the ledger neither
knows nor cares what an agent is.

Call ids
    ``call_id(session, tool, args, occurrence)`` is a hash of the session, the
    tool name, the canonical JSON of the arguments (sorted keys, no spaces)
    and the occurrence index: the number of identical earlier calls seen by
    this Ledger object (or ``occurrence=`` given explicitly). Re-running the
    same sequence of calls with a new Ledger (a retry after a crash, in a new
    process) produces the same ids, so what already fired is not fired again.

Effects
    ``read`` and ``write`` calls act on the (restorable) sandbox: they always
    run and are recorded (``done``/``failed``).
    ``external`` calls go through the outbox:

    ============  ==========================================
    record        what ``run`` does
    ============  ==========================================
    none          fire, record the result (``fired``)
    done          answered from the ledger (``replayed``)
    pending       fire (it provably never started)
    released      fire (an operator allowed a new attempt)
    fired         ``in_doubt``: NOT fired
    failed        ``failed``: NOT fired again
    ============  ==========================================

    The ledger has no replay mode: a forget's replay de-duplicates external
    calls itself (its replay interceptor answers a call that already fired
    from the recorded session, and defers a new one unless told to execute
    it, which then comes here as a live call).

Crash safety (the documented choice)
    Before firing, the ledger commits ``pending`` (intent), then atomically
    claims the call (``pending -> fired``, committed, fsync'd) and only then
    calls the function; the result is committed as ``done``. A crash after
    the claim leaves ``fired`` without a result: the ledger cannot know whether
    the side effect happened, so a retry reports it (``in_doubt`` /
    :class:`CallInDoubt`) and never fires it again; an operator settles it
    with :meth:`Ledger.resolve`. A crash between ``pending`` and the claim
    left a call that provably never started, so a retry fires it once.
    A function that raises is recorded ``failed`` and not refired either
    (it may have half-happened); ``resolve(..., status="released")`` allows
    a new attempt.

Results are stored as JSON (``pydantic_core.to_jsonable_python``, ``str``
as the fallback); a deduplicated answer is that JSON decoded, so a tuple
comes back as a list.

Concurrency: one SQLite connection per thread, WAL, ``synchronous=FULL``,
``BEGIN IMMEDIATE`` around every check-and-claim. Identical concurrent calls
in one process wait for the one in flight instead of reporting it in doubt.
On SQLite, a call another *process* is firing right now reads as in doubt.

Two engines, one state machine
    ``Ledger(path)`` keeps the rows in a SQLite file (``<home>/ledger.sqlite``);
    ``Ledger.on_postgres(pool)`` keeps them in the table ``unsee.calls`` of a
    PostgreSQL database (a psycopg 3 pool of autocommit connections; a store's
    pool). The decisions above are the same code on both (``Ledger``); an
    engine only says where rows live, how a transaction is taken and how a call
    in flight is held.

PostgreSQL: at most once across processes and machines
    ``call_id`` is the table's primary key; the intent (``pending``) is written
    with ``INSERT ... ON CONFLICT DO NOTHING`` (one row a call), and the claim
    is one conditional ``UPDATE ... WHERE status IN ('pending','released')``
    (it takes the row's lock; a concurrent one re-reads the row after it and
    changes nothing), so one process wins it whatever the number of workers. The winner first takes the session-level
    advisory lock ``pg_advisory_lock(hashtextextended(call_id, 0))`` on a
    connection it keeps until the outcome is committed on it. Whoever reads
    ``fired`` takes that lock before judging: held, a live process is firing
    the call, so it waits and then finds ``done`` (``replayed``) or ``failed``;
    free, the firer died (its connection closed, the server freed the lock:
    SIGKILL, a lost machine once the server notices the dropped connection)
    and the call is in doubt, never fired again, as on SQLite. A call in flight
    holds one connection of the ledger's own small pool (not one of the store's,
    which slow tools would starve) until it is recorded. Server unreachable:
    :class:`LedgerUnavailable` (before the claim: nothing fired). Erasure redacts rows as on SQLite, then
    ``VACUUM FULL`` rewrites the table; the server's WAL, archives, backups and
    replicas keep what they copied before (a receipt names them unreachable).
"""

from __future__ import annotations

import abc
import contextlib
import functools
import hashlib
import json
import sqlite3
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Literal

from pydantic_core import to_jsonable_python

from .errors import ArgumentsNotCanonical, CallFailed, CallInDoubt, LedgerError, LedgerUnavailable

__all__ = [
    "Effect",
    "Status",
    "Disposition",
    "EFFECTS",
    "canonical_json",
    "make_call_id",
    "CallRecord",
    "Outcome",
    "Ledger",
]

#: what a tool does to the world (the one definition; the recording core keeps it as an opaque string)
Effect = Literal["read", "write", "external"]
Status = Literal["pending", "fired", "done", "failed", "released"]
Disposition = Literal["fired", "executed", "replayed", "in_doubt", "failed"]
EFFECTS: tuple[Effect, ...] = ("read", "write", "external")


class _Occurrences:
    """How many identical calls (session, tool, arguments) came before (thread-safe)."""

    def __init__(self) -> None:
        self._counts: Counter[tuple[str, str, str]] = Counter()
        self._lock = threading.Lock()

    def next(self, session: str, tool: str, args_json: str) -> int:
        key = (session, tool, args_json)
        with self._lock:
            n = self._counts[key]
            self._counts[key] = n + 1
            return n


# -- ids --------------------------------------------------------------------


def canonical_json(value: Any) -> str:
    """The canonical JSON of a call's arguments: the one text for argument identity.

    Sorted keys, no whitespace, UTF-8; pydantic models/dataclasses as JSON.
    Equal arguments give equal text, whatever their key order.
    """
    try:
        plain = to_jsonable_python(value)
        return json.dumps(plain, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:  # PydanticSerializationError is a ValueError
        raise ArgumentsNotCanonical(f"arguments are not JSON-serialisable: {exc}") from exc


def make_call_id(session: str, tool: str, args: Any, occurrence: int) -> str:
    """The call id of the ``occurrence``-th identical call (0-based)."""
    return _hash_id(session, tool, canonical_json(args), occurrence)


def _hash_id(session: str, tool: str, args_json: str, occurrence: int) -> str:
    blob = json.dumps([session, tool, args_json, occurrence], separators=(",", ":"), ensure_ascii=False)
    return "call-" + hashlib.sha256(blob.encode("utf-8")).hexdigest()[:32]


# -- records ------------------------------------------------------------------


@dataclass(frozen=True)
class CallRecord:
    call_id: str
    session: str
    tool: str
    args_json: str
    occurrence: int
    effect: Effect
    status: Status
    result_json: str | None
    error: str | None
    attempts: int
    created_at: float
    updated_at: float

    @property
    def args(self) -> Any:
        return json.loads(self.args_json)

    @property
    def result(self) -> Any:
        return None if self.result_json is None else json.loads(self.result_json)


@dataclass(frozen=True)
class Outcome:
    """What ``Ledger.run`` did with a call."""

    call_id: str
    disposition: Disposition
    value: Any = None
    record: CallRecord | None = field(default=None, compare=False)

    def unwrap(self) -> Any:
        """The value; raises :class:`CallInDoubt` / :class:`CallFailed` for in-doubt/failed."""
        if self.disposition == "in_doubt":
            raise CallInDoubt(self.call_id, self.record.tool if self.record else "?")
        if self.disposition == "failed":
            rec = self.record
            raise CallFailed(self.call_id, rec.tool if rec else "?", (rec.error if rec else "") or "")
        return self.value


# -- storage engines ------------------------------------------------------------------
#
# The state machine (``Ledger``) is written once, in SQL both engines accept (``?``
# placeholders, ``{t}`` for the table, ``INSERT ... ON CONFLICT``); an engine says where
# the rows live, how a transaction is taken, and how a call in flight is held.

_SCHEMA = """
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
#: PostgreSQL: the same columns in unsee's schema, plus ``seq`` (insertion order: SQLite's rowid)
PG_SCHEMA = "unsee"
PG_TABLE = f"{PG_SCHEMA}.calls"
#: the version stamped in ``unsee.unsee_meta`` under ``ledger`` (the store's own stamp table)
PG_VERSION = 1


def _pg_ddl() -> list[str]:
    """SQLite's schema in unsee's PostgreSQL schema: the same columns (``REAL`` times as
    ``DOUBLE PRECISION``) plus ``seq``, and the store's stamp table."""
    table, index = [s.strip() for s in _SCHEMA.split(";") if s.strip()]
    table = table.replace(" calls (", f" {PG_TABLE} (", 1).replace(" REAL ", " DOUBLE PRECISION ")
    table = table.rstrip(")").rstrip() + ",\n    seq         BIGINT GENERATED ALWAYS AS IDENTITY\n)"
    return [f"CREATE SCHEMA IF NOT EXISTS {PG_SCHEMA}",
            f"CREATE TABLE IF NOT EXISTS {PG_SCHEMA}.unsee_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
            table, index.replace(" ON calls(", f" ON {PG_TABLE}(", 1)]


_COLS = "call_id, session, tool, args_json, occurrence, effect, status, result_json, error, attempts, created_at, updated_at"
#: the columns an insert writes (``mode`` is constant)
_INSERT = f"INSERT INTO {{t}} AS c ({_COLS}, mode) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,'live')"
#: PostgreSQL: calls one process may have in flight at once (each holds a connection of the
#: ledger's own pool until its outcome is committed; one more waits for a free one)
HOLDERS = 32
#: a call's advisory lock key on PostgreSQL (one per call id; held by whoever fires it)
_PG_LOCK = "hashtextextended(%s, 0)"


class _Sql:
    """One connection inside an engine's transaction (or read): ``execute`` takes the
    shared SQL (``?``, ``{t}``) and returns a DB-API cursor."""

    def __init__(self, conn: Any, table: str, postgres: bool):
        self.conn, self.table, self.postgres = conn, table, postgres

    def execute(self, sql: str, params: Any = ()) -> Any:
        args = tuple(params)
        if self.postgres:
            return self.conn.execute(_sql(sql, self.table, True), args or None)
        return self.conn.execute(_sql(sql, self.table, False), args)


@functools.lru_cache(maxsize=64)
def _sql(sql: str, table: str, postgres: bool) -> str:
    sql = sql.replace("{t}", table)
    # our statements have no '?' or '%' inside literals: placeholders are the only ones
    return sql.replace("%", "%%").replace("?", "%s") if postgres else sql


class _Engine(abc.ABC):
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
    def tx(self) -> contextlib.AbstractContextManager[_Sql]:
        """A write transaction (committed at the end, rolled back when it raises)."""

    @abc.abstractmethod
    def read(self, hold: Any = None) -> contextlib.AbstractContextManager[_Sql]:
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
        """The record of ``cid`` once no other process is firing it (waits for one that is)."""
        with self.read() as c:
            return _get(c, cid)

    @abc.abstractmethod
    def vacuum(self) -> bool: ...

    @abc.abstractmethod
    def integrity_ok(self) -> bool: ...

    def close(self) -> None:
        pass


class _SqliteEngine(_Engine):
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
        self._conn().executescript(_SCHEMA)

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
    def tx(self) -> Iterator[_Sql]:
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield _Sql(conn, self.table, False)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        else:
            conn.execute("COMMIT")

    @contextlib.contextmanager
    def read(self, hold: Any = None) -> Iterator[_Sql]:
        yield _Sql(self._conn(), self.table, False)

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


class _PostgresEngine(_Engine):
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
                    for ddl in _pg_ddl():
                        conn.execute(ddl)
                    conn.execute(f"INSERT INTO {PG_SCHEMA}.unsee_meta VALUES ('ledger', %s) "
                                 "ON CONFLICT(key) DO NOTHING", (str(PG_VERSION),))
                    row = conn.execute(f"SELECT value FROM {PG_SCHEMA}.unsee_meta WHERE key='ledger'").fetchone()
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
    def tx(self) -> Iterator[_Sql]:
        with self._unavailable(), self.pool.connection() as conn, conn.transaction():
            yield _Sql(conn, self.table, True)

    @contextlib.contextmanager
    def read(self, hold: Any = None) -> Iterator[_Sql]:
        with self._unavailable():
            if hold is not None:
                yield _Sql(hold[0], self.table, True)
                return
            with self.pool.connection() as conn:
                yield _Sql(conn, self.table, True)

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

    def settle(self, cid: str) -> "CallRecord | None":
        # the lock is free only when no live process fires the call: read it while holding it
        hold = self.hold(cid)
        try:
            with self.read(hold) as c:
                return _get(c, cid)
        finally:
            self.release(hold)

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


def _get(c: _Sql, cid: str, lock: str = "") -> "CallRecord | None":
    row = c.execute(f"SELECT {_COLS} FROM {{t}} WHERE call_id=?{lock}", (cid,)).fetchone()
    return CallRecord(*row) if row else None


# -- the ledger -----------------------------------------------------------------


class Ledger:
    """A persistent call ledger: a SQLite file at ``path`` (created if missing), or the
    ``unsee.calls`` table of a PostgreSQL store (:meth:`on_postgres`).

    ``path``: the file (None on PostgreSQL); ``where``: where the rows live, in words
    (for errors and receipts; a PostgreSQL URL without its password); ``dialect``:
    ``"sqlite"`` or ``"postgresql"``.
    """

    def __init__(self, path: str | Path):
        self._start(_SqliteEngine(path))

    @classmethod
    def on_postgres(cls, pool: Any) -> "Ledger":
        """The ledger in the ``unsee.calls`` table of the database ``pool`` (a psycopg 3
        ``ConnectionPool`` of autocommit connections) reaches; the table is made if missing.
        The pool stays the caller's (``close()`` leaves it open). A call in flight holds a
        connection to the same server (``pool.conninfo``) of the ledger's own pool, made on
        first use and closed by ``close()``, until its outcome is committed (at most
        ``HOLDERS`` at once). :class:`LedgerUnavailable` when the server cannot be reached."""
        led = cls.__new__(cls)
        led._start(_PostgresEngine(pool))
        return led

    @staticmethod
    def exists_on_postgres(pool: Any) -> bool:
        """Whether the database ``pool`` reaches holds a ledger table (made by any worker)."""
        return _PostgresEngine.exists(pool)

    def _start(self, engine: _Engine) -> None:
        self._engine = engine
        self.path = engine.path
        self.where = engine.where
        self.dialect = engine.dialect
        self._occurrences = _Occurrences()
        self._inflight: dict[str, threading.Event] = {}
        self._inflight_lock = threading.Lock()
        self._closed = False

    def _check_open(self) -> None:
        if self._closed:
            raise LedgerError(f"ledger {self.where} is closed")

    def _conn(self) -> sqlite3.Connection:
        """This thread's SQLite connection (tests and tools that read the file directly)."""
        if not isinstance(self._engine, _SqliteEngine):
            raise LedgerError(f"ledger {self.where} is not a SQLite file")
        return self._engine._conn()

    def close(self) -> None:
        """Close the ledger's own connections (SQLite: the file's; PostgreSQL: those that hold
        calls' locks); the PostgreSQL pool given to :meth:`on_postgres` stays the caller's."""
        if self._closed:
            return
        self._closed = True
        self._engine.close()

    def __enter__(self) -> "Ledger":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Ledger({self.where!r})"

    # -- ids ------------------------------------------------------------------
    def next_call_id(self, session: str, tool: str, args: Any) -> tuple[str, int]:
        """Take the next occurrence index for this call."""
        args_json = canonical_json(args)
        occ = self._occurrences.next(session, tool, args_json)
        return _hash_id(session, tool, args_json, occ), occ

    # -- the main entry point ---------------------------------------------------
    def run(
        self,
        session: str,
        tool: str,
        args: Any,
        fn: Callable[[], Any],
        *,
        effect: Effect = "external",
        occurrence: int | None = None,
    ) -> Outcome:
        """Execute (or not) one call according to its effect and its record.

        ``fn`` takes no arguments (close over the call's arguments). Returns an
        :class:`Outcome`; when ``fn`` itself raises, the error is recorded and
        re-raised.
        """
        if effect not in EFFECTS:
            raise ValueError(f"effect must be one of {EFFECTS}, not {effect!r}")
        self._check_open()
        args_json = canonical_json(args)
        if occurrence is None:
            occurrence = self._occurrences.next(session, tool, args_json)
        cid = _hash_id(session, tool, args_json, occurrence)
        base = dict(call_id=cid, session=session, tool=tool, args_json=args_json,
                    occurrence=occurrence, effect=effect)
        if effect != "external":
            return self._run_local(base, fn)
        while True:
            decision, record, hold = self._decide(base)
            if decision == "wait":
                ev = self._inflight.get(cid)
                if ev is not None:
                    ev.wait()
                continue
            break
        if decision == "replayed":
            return Outcome(cid, "replayed", record.result, record)
        if decision in ("in_doubt", "failed"):
            return Outcome(cid, decision, None, record)
        # decision == "fire": we hold the claim (status fired, committed) and, on
        # PostgreSQL, the call's advisory lock until the outcome is committed
        try:
            value = fn()
        except Exception as exc:
            try:
                self._finish(cid, "failed", None, f"{type(exc).__name__}: {exc}", hold)
            finally:
                self._release(cid, hold)
            raise
        except BaseException:  # interrupted like a crash: stays 'fired' (in doubt)
            self._release(cid, hold)
            raise
        try:
            rec = self._finish(cid, "done", _to_json(value), None, hold)
        finally:
            self._release(cid, hold)
        return Outcome(cid, "fired", value, rec)

    def _release(self, cid: str, hold: Any = None) -> None:
        try:
            self._engine.release(hold)
        finally:
            with self._inflight_lock:
                ev = self._inflight.pop(cid, None)
            if ev is not None:
                ev.set()

    def _decide(self, base: dict[str, Any]) -> tuple[str, CallRecord | None, Any]:
        cid = base["call_id"]
        # statements that commit one by one: a recorded outcome needs no write transaction
        # (nor, on SQLite, the write lock), so one plain read answers a replay
        with self._engine.read() as c:
            rec = _get(c, cid)
            if rec is None:
                now = time.time()
                # the intent, committed before anything fires; the primary key admits one row a call
                added = c.execute(
                    _INSERT + " ON CONFLICT(call_id) DO NOTHING",
                    (cid, base["session"], base["tool"], base["args_json"], base["occurrence"],
                     "external", "pending", None, None, 0, now, now),
                ).rowcount
                if added != 1:  # another thread or process recorded it first
                    rec = _get(c, cid)
        if rec is not None:
            if rec.status == "done":
                return "replayed", rec, None
            if rec.status == "failed":
                return "failed", rec, None
            if rec.status == "fired":
                with self._inflight_lock:
                    if cid in self._inflight:
                        return "wait", rec, None
                # fired by nobody in this process: by a live process elsewhere (PostgreSQL: wait
                # for it, then decide again) or by one that died before recording it (in doubt)
                now_rec = self._engine.settle(cid)
                if now_rec is not None and now_rec.status == "fired":
                    return "in_doubt", now_rec, None
                return "wait", now_rec, None
        return self._claim(cid)

    def _claim(self, cid: str) -> tuple[str, CallRecord | None, Any]:
        """Atomically move pending/released -> fired (committed before firing).

        The call is marked in flight in this process first, and (PostgreSQL) its advisory
        lock taken before the claim commits, so whoever sees ``fired`` while the firer lives
        finds it held and waits instead of calling it in doubt."""
        with self._inflight_lock:
            if cid in self._inflight:
                return "wait", None, None
            self._inflight[cid] = threading.Event()
        hold = None
        try:
            hold = self._engine.hold(cid)
            # one conditional statement (it takes the row's lock): one claimer wins
            claimed = self._engine.one(
                "UPDATE {t} SET status='fired', attempts=attempts+1, updated_at=? "
                "WHERE call_id=? AND status IN ('pending','released')",
                (time.time(), cid), hold,
            ) == 1
        except BaseException:
            self._release(cid, hold)
            raise
        if claimed:
            return "fire", None, hold
        # somebody else changed it between our read and the claim: decide again
        self._release(cid, hold)
        return "wait", None, None

    def _finish(self, cid: str, status: Status, result_json: str | None, error: str | None,
                hold: Any = None) -> CallRecord:
        try:
            return self._set(cid, status, result_json, error, hold)
        except LedgerUnavailable:
            if hold is None:
                raise
            # the firer's own connection was lost (its lock with it): the outcome is still
            # known here, so record it on a fresh connection
            return self._set(cid, status, result_json, error, None)

    def _set(self, cid: str, status: Status, result_json: str | None, error: str | None,
             hold: Any = None) -> CallRecord:
        self._engine.one("UPDATE {t} SET status=?, result_json=?, error=?, updated_at=? WHERE call_id=?",
                         (status, result_json, error, time.time(), cid), hold)
        with self._engine.read(hold) as c:
            rec = _get(c, cid)
        assert rec is not None
        return rec

    def _run_local(self, base: dict[str, Any], fn: Callable[[], Any]) -> Outcome:
        """read/write effects: always execute, and record the execution."""
        try:
            value = fn()
        except Exception as exc:
            self._upsert(base, "failed", None, f"{type(exc).__name__}: {exc}")
            raise
        rec = self._upsert(base, "done", _to_json(value), None)
        return Outcome(base["call_id"], "executed", value, rec)

    def _upsert(self, base: dict[str, Any], status: Status, result_json: str | None, error: str | None) -> CallRecord:
        now = time.time()
        with self._engine.tx() as c:
            c.execute(
                f"{_INSERT} "
                "ON CONFLICT(call_id) DO UPDATE SET status=excluded.status, result_json=excluded.result_json, "
                "error=excluded.error, attempts=c.attempts+1, updated_at=excluded.updated_at",
                (base["call_id"], base["session"], base["tool"], base["args_json"], base["occurrence"],
                 base["effect"], status, result_json, error, 1, now, now),
            )
            rec = _get(c, base["call_id"])
        assert rec is not None
        return rec

    # -- queries and operator actions ---------------------------------------------
    def get(self, call_id: str) -> CallRecord | None:
        self._check_open()
        with self._engine.read() as c:
            return _get(c, call_id)

    def calls(
        self,
        *,
        session: str | None = None,
        status: Status | None = None,
        tool: str | None = None,
        effect: Effect | None = None,
    ) -> list[CallRecord]:
        """Records matching every given filter, oldest first."""
        self._check_open()
        where, params = [], []
        for col, val in (("session", session), ("status", status), ("tool", tool), ("effect", effect)):
            if val is not None:
                where.append(f"{col}=?")
                params.append(val)
        sql = f"SELECT {_COLS} FROM {{t}}" + (" WHERE " + " AND ".join(where) if where else "")
        sql += f" ORDER BY created_at, {self._engine.order}"
        with self._engine.read() as c:
            return [CallRecord(*r) for r in c.execute(sql, params).fetchall()]

    def resolve(
        self,
        call_id: str,
        *,
        status: Literal["done", "failed", "released"],
        result: Any = None,
        error: str | None = None,
    ) -> CallRecord:
        """Settle an in-doubt (or failed) call: record what really happened,
        or ``released`` to allow one new attempt."""
        if status not in ("done", "failed", "released"):
            raise ValueError("status must be done, failed or released")
        self._check_open()
        with self._engine.tx() as c:
            rec = _get(c, call_id, self._engine.for_update)
            if rec is None:
                raise LedgerError(f"no such call: {call_id}")
            c.execute(
                "UPDATE {t} SET status=?, result_json=?, error=?, updated_at=? WHERE call_id=?",
                (status, _to_json(result) if status == "done" else None, error, time.time(), call_id),
            )
            rec = _get(c, call_id)
        assert rec is not None
        return rec

    def delete(self, *, session: str | None = None, call_ids: list[str] | None = None) -> int:
        """Delete records (erasure); returns how many. Run ``vacuum()`` afterwards to drop
        old copies from the file (SQLite: WAL and free pages; PostgreSQL: the table rewritten)."""
        if session is None and not call_ids:
            raise ValueError("give a session or call ids")
        self._check_open()
        with self._engine.tx() as c:
            n = 0
            if session is not None:
                n += c.execute("DELETE FROM {t} WHERE session=?", (session,)).rowcount
            for cid in call_ids or []:
                n += c.execute("DELETE FROM {t} WHERE call_id=?", (cid,)).rowcount
        return n

    def redact(self, select: Callable[[CallRecord], bool], digest: Callable[[str], str],
               *, session: str | None = None) -> list[str]:
        """Drop the text of the calls ``select`` picks, keep the fact that they were made.

        Each picked record keeps its id, session, tool, effect, status, occurrence
        and times; its arguments, result and error become ``{"erased": digest(text)}``
        (a keyed hash the caller supplies), so a later identical call is still
        recognised by its id (never fired twice) but its text is gone. Already
        redacted records are left as they are. Returns the ids redacted. Run
        ``vacuum()`` afterwards to drop old copies (SQLite: the WAL; PostgreSQL:
        the old row versions).
        """
        self._check_open()
        done = []
        with self._engine.tx() as c:
            rows = c.execute(f"SELECT {_COLS} FROM {{t}}" + (" WHERE session=?" if session else "")
                             + self._engine.for_update, (session,) if session else ()).fetchall()
            for rec in map(lambda r: CallRecord(*r), rows):
                if _is_redacted(rec.args_json) or not select(rec):
                    continue
                c.execute(
                    "UPDATE {t} SET args_json=?, result_json=?, error=? WHERE call_id=?",
                    (_redacted(rec.args_json, digest), None if rec.result_json is None
                     else _redacted(rec.result_json, digest),
                     None if rec.error is None else "erased " + digest(rec.error), rec.call_id))
                done.append(rec.call_id)
        return done

    def vacuum(self) -> bool:
        """Drop old copies of deleted and redacted text. SQLite: checkpoint and truncate the WAL,
        then VACUUM (drops free pages); True when the final truncation was complete (False:
        another connection's reader kept old frames in the WAL). PostgreSQL: ``VACUUM FULL``
        of the table (True); the server's WAL, archives, backups and replicas are beyond reach."""
        self._check_open()
        return self._engine.vacuum()

    def integrity_ok(self) -> bool:
        """SQLite: ``PRAGMA integrity_check``; PostgreSQL: the table's indexes are valid."""
        self._check_open()
        return self._engine.integrity_ok()


def _redacted(text: str, digest: Callable[[str], str]) -> str:
    return json.dumps({"erased": digest(text)}, sort_keys=True)


def _is_redacted(args_json: str) -> bool:
    return args_json.startswith('{"erased": ')


def _to_json(value: Any) -> str:
    return json.dumps(to_jsonable_python(value, fallback=str), ensure_ascii=False, sort_keys=True)
