"""Session leases: a forget and a run on the same session never interleave, in any process.

A lease is a row ``(session, owner, kind, expires)`` in ``<home>/leases.sqlite``
(its own file: taken and released synchronously, never through the batching
writer), or in the ``leases`` table of the PostgreSQL store
(``Unsee(store="postgresql://...")``), which every machine on it shares.
``kind`` is ``run`` (the recording middleware holds one per session while
the agent runs there; runs of one owner stack) or ``forget`` (a forget
or an erasure holds it for its whole duration). A run waits while another
owner — or this one — holds a ``forget`` lease on the session; a forget waits
while any run or another forget holds one. An owner is one process's
``LeaseTable`` (host, pid and a random part). Held leases are renewed by a
heartbeat thread every ``ttl / 3``; a holder that dies (SIGKILL) stops
renewing, and its lease expires after ``ttl``: a waiting forget then goes on.

Checking and taking is one transaction that locks the lease table (SQLite:
``BEGIN IMMEDIATE``; PostgreSQL: ``LOCK TABLE``), so two processes never both
see a session free.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from .errors import SessionBusy
from .sqldb import Db, SqliteDb, create_tables
from .store_schema import upsert_sql

log = logging.getLogger("unsee.leases")
RUN, FORGET = "run", "forget"
#: held by a ``forget`` waiting on a key that short runs keep taking (a memory-store namespace's
#: recorded puts): no new ``run`` starts meanwhile, so the forget is not starved (``draining``)
DRAIN = "drain"
DEFAULT_TTL = 30.0
#: a run lease nobody touched for this long is no longer renewed: a run that ended in a way no
#: hook saw (e.g. LangGraph's recursion limit, outside any node) must not hold its session forever
RUN_IDLE_S = 600.0
_SCHEMA = """
CREATE TABLE IF NOT EXISTS leases (
  session_id TEXT NOT NULL,
  owner TEXT NOT NULL,
  kind TEXT NOT NULL,
  holds INTEGER NOT NULL,
  expires_ns INTEGER NOT NULL,
  PRIMARY KEY (session_id, owner, kind)
);
CREATE TABLE IF NOT EXISTS forgets (
  session_id TEXT PRIMARY KEY,
  ended_ns INTEGER NOT NULL
);
"""
_FORGET_UPSERT = upsert_sql("forgets", ("session_id", "ended_ns"), ("session_id",))
#: a run lease taken (or its holds counted up) unless a forget or drain row is there, live or not
_RUN_AT_ONCE = (
    "INSERT INTO leases(session_id, owner, kind, holds, expires_ns) SELECT ?,?,?,1,?"
    " WHERE NOT EXISTS (SELECT 1 FROM leases WHERE session_id=? AND kind IN (?,?) AND holds>0)"
    " ON CONFLICT(session_id, owner, kind) DO UPDATE SET"
    " holds=CASE WHEN leases.expires_ns>? THEN leases.holds+1 ELSE 1 END, expires_ns=excluded.expires_ns")


#: lease keys of memory-store namespaces (``namespace_keys``) start with this; never a session id
NAMESPACE_MARK = "store-ns:"


def namespace_keys(hasher, namespace) -> list[str]:
    """Lease keys of a memory-store namespace and of each of its prefixes, shortest first.

    A recorded put into ``("users", "dana", "prefs")`` holds a ``run`` lease on all three; an
    atomic delete of ``("users", "dana")`` holds a ``forget`` lease on that one key, so no
    recorded put under it runs meanwhile (plugins/erasure/namespaces.py). Keys are keyed
    hashes (``hasher.hash``): lease rows never name a namespace (it often names a person)."""
    ns = tuple(namespace)
    return [NAMESPACE_MARK + hasher.hash("\x1e".join(ns[:i])).rsplit(":", 1)[-1] for i in range(1, len(ns) + 1)]


class LeaseTable:
    """The leases of one unsee home, as seen by one owner (this process)."""

    def __init__(self, where: Path | Db, *, ttl: float | None = None, poll: float = 0.05):
        """``where``: the SQLite file of the leases, or an open :class:`~.sqldb.Db` (PostgreSQL)."""
        #: seconds a lease outlives its holder's last heartbeat ($UNSEE_LEASE_TTL, default 30)
        self.ttl = ttl if ttl is not None else float(os.environ.get("UNSEE_LEASE_TTL") or DEFAULT_TTL)
        self.poll = poll
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        if isinstance(where, Db):
            self.path = None
            self._conn = where
            if not {"leases", "forgets"} <= where.tables():
                create_tables(where, _SCHEMA, frozenset({"leases", "forgets"}), 1, what="leases")
        else:
            self.path = Path(where)
            conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30)
            conn.execute("PRAGMA journal_mode=WAL")
            # a lease row lost to a power cut is harmless (every holder died with it): no fsync per run
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.executescript(_SCHEMA)
            self._conn = SqliteDb(conn)
        self._lock = threading.RLock()
        self._held: dict[tuple[str, str], int] = {}
        #: releases the store did not take yet (it was unreachable): (session, kind, when)
        self._unreleased: list[tuple[str, str, int]] = []
        self._touched: dict[str, float] = {}  # session -> last activity of a run there (monotonic)
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None

    # -- taking and releasing ------------------------------------------------
    def _blocked(self, session: str, kind: str, now: int) -> bool:
        rows = self._conn.execute(
            "SELECT owner, kind, expires_ns FROM leases WHERE session_id=? AND expires_ns>? AND holds>0",
            (session, now)).fetchall()
        for owner, held, expires in rows:
            if owner != self.owner and _gone(owner, expires, now):
                continue  # its holder died (this host, process gone): no need to wait for it to lapse
            if held == DRAIN and kind == FORGET and owner == self.owner:
                continue  # our own drain: it exists to let this forget through
            if kind == RUN and held in (FORGET, DRAIN):
                return True  # a forget (here or elsewhere) has the session, or waits for it
            if kind in (FORGET, DRAIN):
                return True  # any run (this process's too) or another forget
        return False

    def try_acquire(self, session: str, kind: str) -> bool:
        """Take the lease now if nothing blocks it; True if taken."""
        now = time.time_ns()
        with self._lock:
            self._flush_releases()
            if kind == RUN and self._conn.dialect == "sqlite" and self._take_run_at_once(session, now):
                return True
            with self._conn.transaction(lock="leases"):
                if self._blocked(session, kind, now):
                    return False
                self._conn.execute(
                    "INSERT INTO leases VALUES (?,?,?,1,?) ON CONFLICT(session_id, owner, kind) DO UPDATE SET "
                    "holds=CASE WHEN leases.expires_ns>? THEN leases.holds+1 ELSE 1 END,"
                    " expires_ns=excluded.expires_ns",
                    (session, self.owner, kind, now + int(self.ttl * 1e9), now))
            self._taken(session, kind)
            return True

    def _take_run_at_once(self, session: str, now: int) -> bool:
        """SQLite, a run lease: one statement (its own write transaction, serialised with every
        other) takes it when no forget or drain row is there at all; else the caller's full
        check (which also sees dead holders) decides. A statement, not a transaction of four:
        each SQLite call lets the interpreter lock go, and a run's other threads take it."""
        cur = self._conn.execute(_RUN_AT_ONCE, (session, self.owner, RUN, now + int(self.ttl * 1e9),
                                                session, FORGET, DRAIN, now))
        if cur.rowcount != 1:
            return False
        self._taken(session, RUN)
        return True

    def _taken(self, session: str, kind: str) -> None:
        """This process holds one more of ``session``'s ``kind`` lease (under ``_lock``)."""
        self._held[(session, kind)] = self._held.get((session, kind), 0) + 1
        if kind == RUN:
            self._touched[session] = time.monotonic()
        self._start_heartbeat()

    def touch(self, session: str) -> None:
        """A run on ``session`` is still doing something (a model or tool call began)."""
        self._touched[session] = time.monotonic()

    def acquire(self, session: str, kind: str, *, wait: bool = True, timeout: float = 300.0) -> None:
        """Take the lease, waiting for the holders that block it (``SessionBusy`` when
        ``wait`` is False, or after ``timeout`` seconds)."""
        deadline = time.monotonic() + timeout
        while not self.try_acquire(session, kind):
            if not wait:
                raise SessionBusy(session)
            if time.monotonic() > deadline:
                raise SessionBusy(session, waited=timeout)
            time.sleep(self.poll)

    def release(self, session: str, kind: str, *, flush: bool = True) -> None:
        """Give back one hold of ``session``'s ``kind`` lease. ``flush=False``: only queue the
        row's update, written with the next ones (:meth:`flush_releases`, or any lease
        operation): the run leases one write of the store's writer covered go in one
        transaction."""
        with self._lock:
            n = self._held.get((session, kind), 0)
            if n <= 0:
                return
            if n == 1:
                self._held.pop((session, kind))
            else:
                self._held[(session, kind)] = n - 1
            self._unreleased.append((session, kind, time.time_ns()))
            if flush:
                self.flush_releases()

    def flush_releases(self) -> None:
        """Write the releases queued so far."""
        with self._lock:
            try:
                self._flush_releases()
            except self._conn.errors:
                # The store is unreachable (a PostgreSQL restart): never mask the caller's own
                # outcome. The row stays held (safe: it blocks, never admits) and is released by
                # the next lease operation or heartbeat that reaches the store, else it lapses.
                log.warning("could not release %d leases yet; retried later", len(self._unreleased),
                            exc_info=True)

    def _flush_releases(self) -> None:
        """Write the releases not written yet, in one transaction (under ``_lock``): a run that
        takes a lease right after sees the forget recorded; a failure leaves them all pending."""
        if not self._unreleased:
            return
        pending = list(self._unreleased)
        with self._conn.transaction(lock="leases"):
            for session, kind, ended_ns in pending:
                if kind == FORGET:  # runs that loaded the state around now check it is still the head
                    self._conn.execute(_FORGET_UPSERT, (session, ended_ns))
                self._conn.execute(
                    "UPDATE leases SET holds=holds-1 WHERE session_id=? AND owner=? AND kind=?",
                    (session, self.owner, kind))
            self._conn.execute("DELETE FROM leases WHERE holds<=0")
        del self._unreleased[:len(pending)]

    def forgot_since(self, session: str, since_ns: int) -> bool:
        """Whether a forget on ``session`` ended after ``since_ns`` (or holds it now)."""
        with self._lock:
            row = self._conn.execute("SELECT ended_ns FROM forgets WHERE session_id=?", (session,)).fetchone()
            return bool(row and row[0] > since_ns) or any(k == FORGET for _, k in self.holders(session))

    def try_acquire_all(self, keys: list[str], kind: str) -> bool:
        """Take a lease on every one of ``keys`` in ONE transaction if none is blocked; True if taken
        (a memory-store put's namespace and its prefixes: :func:`namespace_keys`)."""
        now = time.time_ns()
        with self._lock:
            self._flush_releases()
            with self._conn.transaction(lock="leases"):
                if any(self._blocked(k, kind, now) for k in keys):
                    return False
                for k in keys:
                    self._conn.execute(
                        "INSERT INTO leases VALUES (?,?,?,1,?) ON CONFLICT(session_id, owner, kind) DO UPDATE SET "
                        "holds=CASE WHEN leases.expires_ns>? THEN leases.holds+1 ELSE 1 END,"
                        " expires_ns=excluded.expires_ns",
                        (k, self.owner, kind, now + int(self.ttl * 1e9), now))
            for k in keys:
                self._held[(k, kind)] = self._held.get((k, kind), 0) + 1
                if kind == RUN:
                    self._touched[k] = time.monotonic()
            self._start_heartbeat()
            return True

    @contextlib.contextmanager
    def held_all(self, keys: list[str], kind: str, *, timeout: float = 300.0) -> Iterator[None]:
        """:meth:`held` for several keys taken together (waits; ``SessionBusy`` after ``timeout``)."""
        deadline = time.monotonic() + timeout
        while not self.try_acquire_all(keys, kind):
            if time.monotonic() > deadline:
                raise SessionBusy(keys[-1], waited=timeout)
            time.sleep(self.poll / 5)
        try:
            yield
        finally:
            for k in keys:
                self.release(k, kind)

    @contextlib.contextmanager
    def draining(self, key: str, *, timeout: float = 300.0) -> Iterator[None]:
        """The ``forget`` lease of ``key``, first closing it to new runs (a ``drain`` lease) and
        then waiting for the runs in flight to end: a stream of short runs cannot starve it."""
        with self.held(key, DRAIN, timeout=timeout), self.held(key, FORGET, timeout=timeout):
            yield

    @contextlib.contextmanager
    def held(self, session: str, kind: str, *, wait: bool = True, timeout: float = 300.0) -> Iterator[None]:
        self.acquire(session, kind, wait=wait, timeout=timeout)
        try:
            yield
        finally:
            self.release(session, kind)

    def holders(self, session: str) -> list[tuple[str, str]]:
        """(owner, kind) of the unexpired leases on a session."""
        with self._lock:
            return self._conn.execute(
                "SELECT owner, kind FROM leases WHERE session_id=? AND expires_ns>? AND holds>0",
                (session, time.time_ns())).fetchall()

    def dead_runs(self, session: str | None = None) -> list[tuple[str, str]]:
        """(session, owner) of the ``run`` leases whose holder died holding them: an owner on this
        host whose process is gone, or one anywhere whose lease expired (its heartbeat stopped).

        The run lease is given back only once the run's records are written
        (``RunLeases.release``), so such a lease means a run whose records may not all have
        been written: the process died between the run's end and its flush, or during the run.
        (A run lease left to lapse by a live process on another host, ``RUN_IDLE_S``, reads the
        same: the caller errs on the side of distrusting the record.)"""
        now = time.time_ns()
        sql = "SELECT session_id, owner, expires_ns FROM leases WHERE kind=? AND holds>0"
        args: tuple = (RUN,)
        if session is not None:
            sql += " AND session_id=?"
            args += (session,)
        with self._lock:
            rows = self._conn.execute(sql, args).fetchall()
        return [(s, owner) for s, owner, expires in rows if owner != self.owner and _gone(owner, expires, now)]

    def drop(self, session: str, owner: str) -> None:
        """Remove a dead owner's leases on ``session`` (once what they mean is recorded)."""
        with self._lock, self._conn.transaction(lock="leases"):
            self._conn.execute("DELETE FROM leases WHERE session_id=? AND owner=?", (session, owner))

    # -- keeping them alive ------------------------------------------------------
    def renew(self) -> None:
        """Push the expiry of every lease this owner holds (a run lease only while its run
        was active in the last ``RUN_IDLE_S`` seconds)."""
        with self._lock:
            self._flush_releases()
            if not self._held:
                return
            until = time.time_ns() + int(self.ttl * 1e9)
            now = time.monotonic()
            for session, kind in list(self._held):
                if kind == RUN and now - self._touched.get(session, now) > RUN_IDLE_S:
                    continue  # left to lapse
                self._conn.execute("UPDATE leases SET expires_ns=? WHERE session_id=? AND owner=? AND kind=?",
                                   (until, session, self.owner, kind))

    def _start_heartbeat(self) -> None:
        if self._beat is not None and self._beat.is_alive():
            return

        def beat() -> None:
            while not self._stop.wait(self.ttl / 3):
                try:
                    self.renew()
                except self._conn.errors:
                    pass  # the next beat tries again; a lease that lapses is taken by a waiter

        self._beat = threading.Thread(target=beat, name="unsee-leases", daemon=True)
        self._beat.start()

    def close(self) -> None:
        self._stop.set()
        with self._lock:
            if self._held or self._unreleased:  # (nothing held: no round trip, e.g. at exit with the server gone)
                with contextlib.suppress(*self._conn.errors):
                    self._conn.execute("DELETE FROM leases WHERE owner=?", (self.owner,))
            self._held.clear()
            self._unreleased.clear()
            self._conn.close()


def _gone(owner: str, expires_ns: int, now: int) -> bool:
    """Whether the owner of a lease is dead: its process is gone (this host), or it stopped
    renewing the lease (anywhere)."""
    host, _, rest = owner.partition(":")
    pid = rest.partition(":")[0]
    if host == socket.gethostname() and pid.isdigit():
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            pass  # (alive, another user's)
        else:
            if int(pid) == os.getpid():
                return False  # (this process: another LeaseTable of it, alive)
    return expires_ns <= now
