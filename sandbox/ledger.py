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
"""

from __future__ import annotations

import contextlib
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

from .errors import ArgumentsNotCanonical, CallFailed, CallInDoubt, LedgerError

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


# -- the ledger -----------------------------------------------------------------

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
_COLS = "call_id, session, tool, args_json, occurrence, effect, status, result_json, error, attempts, created_at, updated_at"
#: the columns an insert writes (``mode`` is constant)
_INSERT = f"INSERT INTO calls ({_COLS}, mode) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,'live')"


class Ledger:
    """A persistent SQLite call ledger at ``path`` (created if missing)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._conns: list[sqlite3.Connection] = []
        self._conns_lock = threading.Lock()
        self._occurrences = _Occurrences()
        self._inflight: dict[str, threading.Event] = {}
        self._inflight_lock = threading.Lock()
        self._closed = False
        conn = self._conn()
        conn.executescript(_SCHEMA)

    # -- connections --------------------------------------------------------
    def _conn(self) -> sqlite3.Connection:
        if self._closed:
            raise LedgerError(f"ledger {self.path} is closed")
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
    def _tx(self) -> Iterator[sqlite3.Connection]:
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        else:
            conn.execute("COMMIT")

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with self._conns_lock:
            for conn in self._conns:
                with contextlib.suppress(sqlite3.Error):
                    conn.close()
            self._conns.clear()

    def __enter__(self) -> "Ledger":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

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
        args_json = canonical_json(args)
        if occurrence is None:
            occurrence = self._occurrences.next(session, tool, args_json)
        cid = _hash_id(session, tool, args_json, occurrence)
        base = dict(call_id=cid, session=session, tool=tool, args_json=args_json,
                    occurrence=occurrence, effect=effect)
        if effect != "external":
            return self._run_local(base, fn)
        while True:
            decision, record = self._decide(base)
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
        # decision == "fire": we hold the claim (status fired, committed)
        try:
            value = fn()
        except Exception as exc:
            try:
                self._finish(cid, "failed", None, f"{type(exc).__name__}: {exc}")
            finally:
                self._release(cid)
            raise
        except BaseException:  # interrupted like a crash: stays 'fired' (in doubt)
            self._release(cid)
            raise
        try:
            rec = self._finish(cid, "done", _to_json(value), None)
        finally:
            self._release(cid)
        return Outcome(cid, "fired", value, rec)

    def _release(self, cid: str) -> None:
        with self._inflight_lock:
            ev = self._inflight.pop(cid, None)
        if ev is not None:
            ev.set()

    def _decide(self, base: dict[str, Any]) -> tuple[str, CallRecord | None]:
        cid = base["call_id"]
        now = time.time()
        with self._tx() as conn:
            rec = self._get(conn, cid)
            if rec is None:
                conn.execute(
                    _INSERT,
                    (cid, base["session"], base["tool"], base["args_json"], base["occurrence"],
                     "external", "pending", None, None, 0, now, now),
                )
        # (the pending row is committed: intent is durable before anything fires)
        if rec is not None:
            if rec.status == "done":
                return "replayed", rec
            if rec.status == "failed":
                return "failed", rec
            if rec.status == "fired":
                with self._inflight_lock:
                    if cid in self._inflight:
                        return "wait", rec
                return "in_doubt", rec
        return self._claim(cid)

    def _claim(self, cid: str) -> tuple[str, CallRecord | None]:
        """Atomically move pending/released -> fired (committed before firing)."""
        with self._inflight_lock:
            if cid in self._inflight:
                return "wait", None
            with self._tx() as conn:
                cur = conn.execute(
                    "UPDATE calls SET status='fired', attempts=attempts+1, updated_at=? "
                    "WHERE call_id=? AND status IN ('pending','released')",
                    (time.time(), cid),
                )
                claimed = cur.rowcount == 1
            if claimed:
                self._inflight[cid] = threading.Event()
                return "fire", None
        # somebody else changed it between our read and the claim: decide again
        return "wait", None

    def _finish(self, cid: str, status: Status, result_json: str | None, error: str | None) -> CallRecord:
        with self._tx() as conn:
            conn.execute(
                "UPDATE calls SET status=?, result_json=?, error=?, updated_at=? WHERE call_id=?",
                (status, result_json, error, time.time(), cid),
            )
            rec = self._get(conn, cid)
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
        with self._tx() as conn:
            conn.execute(
                f"{_INSERT} "
                "ON CONFLICT(call_id) DO UPDATE SET status=excluded.status, result_json=excluded.result_json, "
                "error=excluded.error, attempts=calls.attempts+1, updated_at=excluded.updated_at",
                (base["call_id"], base["session"], base["tool"], base["args_json"], base["occurrence"],
                 base["effect"], status, result_json, error, 1, now, now),
            )
            rec = self._get(conn, base["call_id"])
        assert rec is not None
        return rec

    # -- queries and operator actions ---------------------------------------------
    @staticmethod
    def _get(conn: sqlite3.Connection, cid: str) -> CallRecord | None:
        row = conn.execute(f"SELECT {_COLS} FROM calls WHERE call_id=?", (cid,)).fetchone()
        return CallRecord(*row) if row else None

    def get(self, call_id: str) -> CallRecord | None:
        return self._get(self._conn(), call_id)

    def calls(
        self,
        *,
        session: str | None = None,
        status: Status | None = None,
        tool: str | None = None,
        effect: Effect | None = None,
    ) -> list[CallRecord]:
        """Records matching every given filter, oldest first."""
        where, params = [], []
        for col, val in (("session", session), ("status", status), ("tool", tool), ("effect", effect)):
            if val is not None:
                where.append(f"{col}=?")
                params.append(val)
        sql = f"SELECT {_COLS} FROM calls" + (" WHERE " + " AND ".join(where) if where else "")
        sql += " ORDER BY created_at, rowid"
        return [CallRecord(*r) for r in self._conn().execute(sql, params).fetchall()]

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
        with self._tx() as conn:
            rec = self._get(conn, call_id)
            if rec is None:
                raise LedgerError(f"no such call: {call_id}")
            conn.execute(
                "UPDATE calls SET status=?, result_json=?, error=?, updated_at=? WHERE call_id=?",
                (status, _to_json(result) if status == "done" else None, error, time.time(), call_id),
            )
            rec = self._get(conn, call_id)
        assert rec is not None
        return rec

    def delete(self, *, session: str | None = None, call_ids: list[str] | None = None) -> int:
        """Delete records (erasure); returns how many. Checkpoint the WAL afterwards
        (``vacuum()``) to drop old copies from the file."""
        if session is None and not call_ids:
            raise ValueError("give a session or call ids")
        with self._tx() as conn:
            n = 0
            if session is not None:
                n += conn.execute("DELETE FROM calls WHERE session=?", (session,)).rowcount
            for cid in call_ids or []:
                n += conn.execute("DELETE FROM calls WHERE call_id=?", (cid,)).rowcount
        return n

    def redact(self, select: Callable[[CallRecord], bool], digest: Callable[[str], str],
               *, session: str | None = None) -> list[str]:
        """Drop the text of the calls ``select`` picks, keep the fact that they were made.

        Each picked record keeps its id, session, tool, effect, status, occurrence
        and times; its arguments, result and error become ``{"erased": digest(text)}``
        (a keyed hash the caller supplies), so a later identical call is still
        recognised by its id (never fired twice) but its text is gone. Already
        redacted records are left as they are. Returns the ids redacted. Run
        ``vacuum()`` afterwards to drop old copies from the WAL.
        """
        done = []
        with self._tx() as conn:
            rows = conn.execute(f"SELECT {_COLS} FROM calls" + (" WHERE session=?" if session else ""),
                                (session,) if session else ()).fetchall()
            for rec in map(lambda r: CallRecord(*r), rows):
                if _is_redacted(rec.args_json) or not select(rec):
                    continue
                conn.execute(
                    "UPDATE calls SET args_json=?, result_json=?, error=? WHERE call_id=?",
                    (_redacted(rec.args_json, digest), None if rec.result_json is None
                     else _redacted(rec.result_json, digest),
                     None if rec.error is None else "erased " + digest(rec.error), rec.call_id))
                done.append(rec.call_id)
        return done

    def vacuum(self) -> bool:
        """Checkpoint and truncate the WAL, then VACUUM (drops free pages). True when the final
        truncation was complete (False: another connection's reader kept old frames in the WAL)."""
        conn = self._conn()
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute("VACUUM")
        busy, log, done = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        return busy == 0 and log == done

    def integrity_ok(self) -> bool:
        row = self._conn().execute("PRAGMA integrity_check").fetchone()
        return bool(row) and row[0] == "ok"


def _redacted(text: str, digest: Callable[[str], str]) -> str:
    return json.dumps({"erased": digest(text)}, sort_keys=True)


def _is_redacted(args_json: str) -> bool:
    return args_json.startswith('{"erased": ')


def _to_json(value: Any) -> str:
    return json.dumps(to_jsonable_python(value, fallback=str), ensure_ascii=False, sort_keys=True)
