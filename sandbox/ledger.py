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
A call another *process* is firing right now is waited for, then answered from its record: the
firer holds a lock the kernel frees if it dies (SQLite: an ``flock`` on ``<ledger>.locks/<call
id>``; PostgreSQL: an advisory lock, below), so only a dead firer's call reads as in doubt.

Two engines, one state machine
    ``Ledger(path)`` keeps the rows in a SQLite file (``<home>/ledger.sqlite``);
    ``Ledger.on_postgres(pool)`` keeps them in the table ``unsee.calls`` of a
    PostgreSQL database (a psycopg 3 pool of autocommit connections; a store's
    pool). The decisions above are the same code on both (``Ledger``); an
    engine only says where rows live, how a transaction is taken and how a call
    in flight is held. The records, ids and the outbox table as a pure rule
    (:func:`~.ledger_states.outbox_step`) are :mod:`.ledger_states`; the engine
    port and the shared SQL :mod:`.ledger_engine`; the engines
    :mod:`.ledger_sqlite` and :mod:`.ledger_postgres`.

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

import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Callable, Literal

from .errors import LedgerError, LedgerUnavailable
from .ledger_engine import COLUMNS, INSERT, LedgerEngine, get_record
from .ledger_postgres import PostgresEngine
from .ledger_sqlite import SqliteEngine
from .ledger_states import (
    CALL, EFFECTS, KINDS, CallRecord, Disposition, Effect, Occurrences, Outcome, Status, Steps, canonical_json,
    hash_id, is_redacted, make_call_id, outbox_step, redacted, to_json,
)

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


#: what an operator may settle a call as (:meth:`Ledger.resolve`)
_SETTLED = ("done", "failed", "released", "compensated", "compensation_failed")


# -- the ledger -----------------------------------------------------------------


class Ledger:
    """A persistent call ledger: a SQLite file at ``path`` (created if missing), or the
    ``unsee.calls`` table of a PostgreSQL store (:meth:`on_postgres`).

    ``path``: the file (None on PostgreSQL); ``where``: where the rows live, in words
    (for errors and receipts; a PostgreSQL URL without its password); ``dialect``:
    ``"sqlite"`` or ``"postgresql"``.
    """

    def __init__(self, path: str | Path):
        self._start(SqliteEngine(path))

    @classmethod
    def on_postgres(cls, pool: Any) -> "Ledger":
        """The ledger in the ``unsee.calls`` table of the database ``pool`` (a psycopg 3
        ``ConnectionPool`` of autocommit connections) reaches; the table is made if missing.
        The pool stays the caller's (``close()`` leaves it open). A call in flight holds a
        connection to the same server (``pool.conninfo``) of the ledger's own pool, made on
        first use and closed by ``close()``, until its outcome is committed (at most
        ``HOLDERS`` at once). :class:`LedgerUnavailable` when the server cannot be reached."""
        led = cls.__new__(cls)
        led._start(PostgresEngine(pool))
        return led

    @staticmethod
    def exists_on_postgres(pool: Any) -> bool:
        """Whether the database ``pool`` reaches holds a ledger table (made by any worker)."""
        return PostgresEngine.exists(pool)

    def _start(self, engine: LedgerEngine) -> None:
        self._engine = engine
        self.path = engine.path
        self.where = engine.where
        self.dialect = engine.dialect
        self._occurrences = Occurrences()
        self._inflight: dict[str, threading.Event] = {}
        self._inflight_lock = threading.Lock()
        self._closed = False

    def _check_open(self) -> None:
        if self._closed:
            raise LedgerError(f"ledger {self.where} is closed")

    def _conn(self) -> sqlite3.Connection:
        """This thread's SQLite connection (tests and tools that read the file directly)."""
        if not isinstance(self._engine, SqliteEngine):
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
        return hash_id(session, tool, args_json, occ), occ

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
        cid = hash_id(session, tool, args_json, occurrence)
        base = dict(call_id=cid, session=session, tool=tool, args_json=args_json,
                    occurrence=occurrence, effect=effect)
        if effect != "external":
            return self._run_local(base, fn)
        return self._outbox(base, fn, CALL)

    def run_once(
        self,
        key: str,
        session: str,
        tool: str,
        args: Any,
        fn: Callable[[], Any],
        *,
        kind: Literal["call", "compensation"] = "call",
        idempotent: bool = False,
        describe_error: Callable[[BaseException], str] | None = None,
    ) -> Outcome:
        """Run ``fn`` at most once under the id ``key`` (not derived from the arguments: a
        reconciliation keys each action by the forget event and the call it acts on), across
        processes and machines as :meth:`run` does for an external call.

        ``kind="call"`` moves the row pending -> fired -> done | failed; ``"compensation"``
        pending -> compensating -> compensated | compensation_failed. A row left firing by a
        process that died is in doubt (not run again) unless ``idempotent``: running it again
        does nothing more, so it is claimed again and run (rolled forward), by one process
        only. A failed row is not run again until :meth:`resolve` releases it. ``fn`` raising
        is recorded (as ``describe_error(exc)`` says, by default its type and message) and
        re-raised."""
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {sorted(KINDS)}, not {kind!r}")
        if not isinstance(key, str) or not key:
            raise ValueError("key must be a non-empty string")
        self._check_open()
        base = dict(call_id=key, session=session, tool=tool, args_json=canonical_json(args), occurrence=0,
                    effect="external")
        return self._outbox(base, fn, KINDS[kind], idempotent=idempotent, describe_error=describe_error)

    def _outbox(self, base: dict[str, Any], fn: Callable[[], Any], steps: Steps, *,
                idempotent: bool = False, describe_error: Callable[[BaseException], str] | None = None) -> Outcome:
        cid = base["call_id"]
        while True:
            decision, record, hold = self._decide(base, steps, idempotent)
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
        # decision == "fire": we hold the claim (status firing, committed) and, on
        # PostgreSQL, the call's advisory lock until the outcome is committed
        try:
            value = fn()
        except Exception as exc:
            try:
                error = describe_error(exc) if describe_error is not None else f"{type(exc).__name__}: {exc}"
                self._finish(cid, steps.failed, None, error, hold)
            finally:
                self._release(cid, hold)
            raise
        except BaseException:  # interrupted like a crash: stays firing (in doubt)
            self._release(cid, hold)
            raise
        try:
            rec = self._finish(cid, steps.done, to_json(value), None, hold)
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

    def _decide(self, base: dict[str, Any], steps: Steps = CALL,
                idempotent: bool = False) -> tuple[str, CallRecord | None, Any]:
        cid = base["call_id"]
        # statements that commit one by one: a recorded outcome needs no write transaction
        # (nor, on SQLite, the write lock), so one plain read answers a replay
        with self._engine.read() as c:
            rec = get_record(c, cid)
            if rec is None:
                now = time.time()
                # the intent, committed before anything fires; the primary key admits one row a call
                added = c.execute(
                    INSERT + " ON CONFLICT(call_id) DO NOTHING",
                    (cid, base["session"], base["tool"], base["args_json"], base["occurrence"],
                     "external", "pending", None, None, 0, now, now),
                ).rowcount
                if added != 1:  # another thread or process recorded it first
                    rec = get_record(c, cid)
        step = outbox_step(None if rec is None else rec.status, steps)
        if step in ("replayed", "failed"):
            return step, rec, None
        if step == "settle":
            with self._inflight_lock:
                if cid in self._inflight:
                    return "wait", rec, None
            # fired by nobody in this process: by a live process elsewhere (PostgreSQL: wait
            # for it, then decide again) or by one that died before recording it (in doubt)
            now_rec = self._engine.settle(cid)
            if now_rec is not None and now_rec.status == steps.firing:
                if idempotent:  # running it again does nothing more: roll forward, one claimer
                    return self._claim(cid, steps, again=now_rec)
                return "in_doubt", now_rec, None
            return "wait", now_rec, None
        return self._claim(cid, steps)

    def _claim(self, cid: str, steps: Steps = CALL,
               again: CallRecord | None = None) -> tuple[str, CallRecord | None, Any]:
        """Atomically move pending/released -> firing (committed before firing); with ``again``
        (an idempotent row left firing by a process that died), firing -> firing if nobody
        claimed it since (its ``attempts`` unchanged).

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
            if again is None:
                claimed = self._engine.one(
                    "UPDATE {t} SET status=?, attempts=attempts+1, updated_at=? "
                    "WHERE call_id=? AND status IN ('pending','released')",
                    (steps.firing, time.time(), cid), hold,
                ) == 1
            else:
                claimed = self._engine.one(
                    "UPDATE {t} SET attempts=attempts+1, updated_at=? WHERE call_id=? AND status=? AND attempts=?",
                    (time.time(), cid, steps.firing, again.attempts), hold,
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
            rec = get_record(c, cid)
        assert rec is not None
        return rec

    def _run_local(self, base: dict[str, Any], fn: Callable[[], Any]) -> Outcome:
        """read/write effects: always execute, and record the execution."""
        try:
            value = fn()
        except Exception as exc:
            self._upsert(base, "failed", None, f"{type(exc).__name__}: {exc}")
            raise
        rec = self._upsert(base, "done", to_json(value), None)
        return Outcome(base["call_id"], "executed", value, rec)

    def _upsert(self, base: dict[str, Any], status: Status, result_json: str | None, error: str | None) -> CallRecord:
        now = time.time()
        with self._engine.tx() as c:
            c.execute(
                f"{INSERT} "
                "ON CONFLICT(call_id) DO UPDATE SET status=excluded.status, result_json=excluded.result_json, "
                "error=excluded.error, attempts=c.attempts+1, updated_at=excluded.updated_at",
                (base["call_id"], base["session"], base["tool"], base["args_json"], base["occurrence"],
                 base["effect"], status, result_json, error, 1, now, now),
            )
            rec = get_record(c, base["call_id"])
        assert rec is not None
        return rec

    # -- queries and operator actions ---------------------------------------------
    def get(self, call_id: str) -> CallRecord | None:
        self._check_open()
        with self._engine.read() as c:
            return get_record(c, call_id)

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
        sql = f"SELECT {COLUMNS} FROM {{t}}" + (" WHERE " + " AND ".join(where) if where else "")
        sql += f" ORDER BY created_at, {self._engine.order}"
        with self._engine.read() as c:
            return [CallRecord(*r) for r in c.execute(sql, params).fetchall()]

    def resolve(
        self,
        call_id: str,
        *,
        status: Literal["done", "failed", "released", "compensated", "compensation_failed"],
        result: Any = None,
        error: str | None = None,
    ) -> CallRecord:
        """Settle an in-doubt (or failed) call: record what really happened,
        or ``released`` to allow one new attempt (a compensation: ``compensated`` or
        ``compensation_failed``)."""
        if status not in _SETTLED:
            raise ValueError(f"status must be one of {', '.join(_SETTLED)}")
        self._check_open()
        with self._engine.tx() as c:
            rec = get_record(c, call_id, self._engine.for_update)
            if rec is None:
                raise LedgerError(f"no such call: {call_id}")
            c.execute(
                "UPDATE {t} SET status=?, result_json=?, error=?, updated_at=? WHERE call_id=?",
                (status, to_json(result) if status in ("done", "compensated") else None, error, time.time(),
                 call_id),
            )
            rec = get_record(c, call_id)
        assert rec is not None
        return rec

    # -- reconciliation plans (one per forget event; the rows they act on are calls) -----------
    def keep_plan(self, event_id: str, session: str, plan_json: str) -> str:
        """Keep ``plan_json`` as the plan of ``event_id`` unless one is kept already; the plan kept
        (the first writer's: two workers planning one event agree on one plan)."""
        self._check_open()
        now = time.time()
        with self._engine.tx() as c:
            c.execute("INSERT INTO {p} (event_id, session, plan_json, created_at, updated_at) VALUES (?,?,?,?,?) "
                      "ON CONFLICT(event_id) DO NOTHING", (event_id, session, plan_json, now, now))
            return c.execute("SELECT plan_json FROM {p} WHERE event_id=?", (event_id,)).fetchone()[0]

    def replace_plan(self, event_id: str, plan_json: str) -> None:
        """Write ``plan_json`` over the kept plan of ``event_id`` (to add what is known only after
        it was kept, e.g. the forget's span); nothing when none is kept."""
        self._check_open()
        with self._engine.tx() as c:
            c.execute("UPDATE {p} SET plan_json=?, updated_at=? WHERE event_id=?", (plan_json, time.time(), event_id))

    def plan(self, event_id: str) -> str | None:
        """The plan kept for ``event_id`` (JSON), None when there is none."""
        self._check_open()
        with self._engine.read() as c:
            row = c.execute("SELECT plan_json FROM {p} WHERE event_id=?", (event_id,)).fetchone()
        return None if row is None else row[0]

    def plans(self, *, session: str | None = None) -> list[tuple[str, str, str]]:
        """(event id, session, plan JSON) of every plan kept (of ``session``), oldest first."""
        self._check_open()
        sql = "SELECT event_id, session, plan_json FROM {p}" + (" WHERE session=?" if session else "")
        with self._engine.read() as c:
            return [tuple(r) for r in c.execute(sql + " ORDER BY created_at, event_id",
                                                (session,) if session else ()).fetchall()]

    def redact_plans(self, select: Callable[[str], bool], scrub: Callable[[Any], Any]) -> list[str]:
        """Scrub the plans whose JSON ``select`` picks: ``scrub`` maps the plan's decoded JSON to what
        is kept (an erasure: its target replaced in every text). Returns the event ids scrubbed; run
        ``vacuum()`` afterwards."""
        self._check_open()
        done = []
        with self._engine.tx() as c:
            rows = c.execute("SELECT event_id, plan_json FROM {p}" + self._engine.for_update).fetchall()
            for event_id, text in rows:
                if not select(text):
                    continue
                c.execute("UPDATE {p} SET plan_json=?, updated_at=? WHERE event_id=?",
                          (json.dumps(scrub(json.loads(text)), ensure_ascii=False), time.time(), event_id))
                done.append(event_id)
        return done

    def drop_plans(self, sessions: Callable[[str], bool]) -> int:
        """Delete the plans of the sessions ``sessions`` picks (a data subject's erasure); how many."""
        self._check_open()
        with self._engine.tx() as c:
            picked = [e for e, s in c.execute("SELECT event_id, session FROM {p}").fetchall() if sessions(s)]
            for event_id in picked:
                c.execute("DELETE FROM {p} WHERE event_id=?", (event_id,))
        return len(picked)

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
                c.execute("DELETE FROM {p} WHERE session=?", (session,))  # (its plans name its calls)
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
            rows = c.execute(f"SELECT {COLUMNS} FROM {{t}}" + (" WHERE session=?" if session else "")
                             + self._engine.for_update, (session,) if session else ()).fetchall()
            for rec in map(lambda r: CallRecord(*r), rows):
                if is_redacted(rec.args_json) or not select(rec):
                    continue
                c.execute(
                    "UPDATE {t} SET args_json=?, result_json=?, error=? WHERE call_id=?",
                    (redacted(rec.args_json, digest), None if rec.result_json is None
                     else redacted(rec.result_json, digest),
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
