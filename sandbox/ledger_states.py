"""The call ledger's records and pure rules: ids, records, outcomes, and what an external call's
record says to do (the outbox table of :mod:`.ledger`). No storage here: :mod:`.ledger_engine` and
its engines keep the rows, :class:`~.ledger.Ledger` runs the state machine over them.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Literal

from pydantic_core import to_jsonable_python

from .errors import ArgumentsNotCanonical, CallFailed, CallInDoubt

#: what a tool does to the world (the one definition; the recording core keeps it as an opaque string)
Effect = Literal["read", "write", "external"]
Status = Literal["pending", "fired", "done", "failed", "released",
                 "compensating", "compensated", "compensation_failed"]
Disposition = Literal["fired", "executed", "replayed", "in_doubt", "failed"]
EFFECTS: tuple[Effect, ...] = ("read", "write", "external")


class Occurrences:
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
    return hash_id(session, tool, canonical_json(args), occurrence)


def hash_id(session: str, tool: str, args_json: str, occurrence: int) -> str:
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


# -- the outbox ---------------------------------------------------------------


@dataclass(frozen=True)
class Steps:
    """The statuses a kind of outbox row moves through once claimed: ``firing`` while its function
    runs (committed before it starts), then ``done`` or ``failed``. Every row starts ``pending``
    (the intent) and may be ``released`` by an operator for one new attempt."""

    kind: str
    firing: Status
    done: Status
    failed: Status


#: an external tool call (the agent's, or a deferred one a reconciliation runs)
CALL = Steps("call", "fired", "done", "failed")
#: a compensation of a call the original world fired and the counterfactual did not make
COMPENSATION = Steps("compensation", "compensating", "compensated", "compensation_failed")
KINDS: dict[str, Steps] = {s.kind: s for s in (CALL, COMPENSATION)}

#: what ``Ledger.run`` does with an external call, by its record: answer it from the record
#: (``replayed``), report it failed (``failed``), find out whether a live process is firing it
#: (``settle``: wait for that one, else it is in doubt), or claim and fire it (``claim``)
OutboxStep = Literal["replayed", "failed", "settle", "claim"]


def outbox_step(status: Status | None, steps: Steps = CALL) -> OutboxStep:
    """The outbox table: ``done`` -> replayed; ``failed`` -> failed (never refired); ``fired`` ->
    settle; no record, ``pending`` (it provably never started) or ``released`` (an operator
    allowed a new attempt) -> claim. ``steps`` names the statuses (a compensation's are
    ``compensating``, ``compensated``, ``compensation_failed``)."""
    if status == steps.done:
        return "replayed"
    if status == steps.failed:
        return "failed"
    if status == steps.firing:
        return "settle"
    return "claim"


# -- stored text ----------------------------------------------------------------


def redacted(text: str, digest: Callable[[str], str]) -> str:
    return json.dumps({"erased": digest(text)}, sort_keys=True)


def is_redacted(args_json: str) -> bool:
    return args_json.startswith('{"erased": ')


def to_json(value: Any) -> str:
    return json.dumps(to_jsonable_python(value, fallback=str), ensure_ascii=False, sort_keys=True)
