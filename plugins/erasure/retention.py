"""Retention: a policy the operator sets bounds a thread's LangGraph history.

LangGraph writes a checkpoint per superstep (about six per chat turn); unsee's
semantic checkpoints (session start, turn boundaries, before memory injections
and consequential tool calls, compactions) are the ones worth keeping. A
:class:`RetentionPolicy` says what to keep: ``keep="all"`` (today),
``"semantic"``, ``"latest"`` (LangGraph's ``prune(strategy="keep_latest")``),
and ``max_age`` drops what is older (the head always stays).

``select`` is pure (tables test it). :func:`apply_retention` is the adapter:
the saver's own ``prune`` for ``keep="latest"`` where it has one
(PostgresSaver); otherwise a journaled rewrite through the saver API with
``history``'s primitives (kept checkpoints, ids and pending writes unchanged,
each re-parented onto its nearest kept ancestor, staged in a side thread, then
swapped in; a crash anywhere is finished by calling it again). Afterwards the
bytes are really gone (SQLite: ``sqlite_scrub.scrub``; PostgreSQL: ``VACUUM
FULL``), and a :class:`RetentionRecord` (ids and counts, never a value) is
appended to ``<home>/erasures/retention.jsonl``.

What ``"semantic"`` keeps, besides unsee's checkpoints and the head: each
turn's ``input`` checkpoint and its parent (the state the turn started from).
An erasure after a forget rewrites the history from there
(``history.before_turn``), so dropping them would make a later forget
unerasable. A fork point whose turn start was dropped (by ``max_age``) is
dropped with it.

Refused (typed, before anything is written): an unknown policy; an agent
without a checkpointer, or a saver with neither ``prune`` nor
``delete_thread``; a graph with ``DeltaChannel`` channels (its intermediate
checkpoints carry the writes later state is rebuilt from: refused in
:func:`check_prunable`); subgraph namespaces; a committed forget whose
erasure has not run (its scratch thread is still there: erase first).

Never applied inside a run: LangGraph saves a run's last checkpoints after
every middleware hook has returned (with ``durability="async"`` concurrently
with the next step), and a rewrite replaces the whole thread. The facade's
``u.retention(thread)`` holds the session (no run interleaves, in any process).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Literal

from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from unsee.middleware.checkpointers import driver_or_generic, unwrapped
from unsee.middleware.errors import InvalidArgument, UnseeError
from unsee.middleware.faults import fault_point

from . import history
from .journal import Journal
from .pg_compact import SAVER_TABLES, is_postgres, vacuum_full
from .sqlite_scrub import main_file, scrub

__all__ = ["RETENTION_STEPS", "CheckpointInfo", "RetentionPolicy", "RetentionRecord", "RetentionRefused",
           "Selection", "UnknownRetentionPolicy", "apply_retention", "check_prunable", "read_records", "select"]

#: the fault points of a retention run (``crash_at`` one of these; tests crash at each)
RETENTION_STEPS = ("retention:staged", "retention:swapping", "retention:swapped")
STAGE_MARK = "~rt-"
LOG = "retention.jsonl"


class UnknownRetentionPolicy(InvalidArgument):
    """The policy is not one unsee knows (``keep`` not all/semantic/latest, a bad ``max_age``)."""


class RetentionRefused(UnseeError, RuntimeError):
    """This thread's history cannot be pruned by unsee (nothing was changed)."""


class RetentionPolicy(BaseModel):
    """What a thread keeps. ``keep``: ``"all"`` | ``"semantic"`` | ``"latest"``; ``max_age``:
    checkpoints older than this go too, whatever kind (the head always stays)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    keep: Literal["all", "semantic", "latest"] = "all"
    max_age: timedelta | None = None

    @field_validator("max_age")
    @classmethod
    def _positive(cls, v: timedelta | None) -> timedelta | None:
        if v is not None and v <= timedelta(0):
            raise ValueError("max_age must be positive")
        return v

    @classmethod
    def parse(cls, value: Any) -> RetentionPolicy:
        """A policy from a policy, a ``keep`` name, or a dict; :class:`UnknownRetentionPolicy` otherwise."""
        if isinstance(value, RetentionPolicy):
            return value
        try:
            if isinstance(value, str):
                return cls(keep=value)
            if isinstance(value, dict):
                return cls(**value)
        except (ValidationError, TypeError) as e:
            why = "; ".join(f"{'.'.join(map(str, x['loc'])) or 'policy'}: {x['msg']}" for x in e.errors()) \
                if isinstance(e, ValidationError) else str(e)
            raise UnknownRetentionPolicy(f"unknown retention policy {value!r}: {why}") from None
        raise UnknownRetentionPolicy(f"unknown retention policy {value!r}: expected a RetentionPolicy, "
                                     "'all' | 'semantic' | 'latest', or a dict of its fields")

    @property
    def prunes(self) -> bool:
        return self.keep != "all" or self.max_age is not None


@dataclass(frozen=True)
class CheckpointInfo:
    """What the selector needs of one checkpoint (no values)."""

    id: str
    parent: str | None
    source: str | None
    ts: datetime | None = None


@dataclass(frozen=True)
class Selection:
    """``keep`` / ``drop`` ids (oldest first); ``parents``: each kept id's new parent (its nearest
    kept ancestor, None for a root); ``head``: the thread's current checkpoint."""

    keep: tuple[str, ...]
    drop: tuple[str, ...]
    parents: dict[str, str | None]
    head: str | None


def select(checkpoints: Sequence[CheckpointInfo], semantic: Iterable[str], policy: RetentionPolicy,
           now: datetime) -> Selection:
    """Which checkpoints of a thread to keep (pure). ``checkpoints``: any order; the head is the
    greatest id (what ``get_tuple`` loads); ``semantic``: the LangGraph ids unsee's checkpoints name."""
    by_id = {c.id: c for c in checkpoints}
    order = sorted(by_id)
    head = order[-1] if order else None
    if policy.keep == "all":
        keep = set(order)
    elif policy.keep == "latest":
        keep = {head} if head else set()
    else:
        inputs = {c.id for c in checkpoints if c.source == "input"}
        starts = {by_id[i].parent for i in inputs if by_id[i].parent in by_id}  # the state each turn began from
        keep = (set(semantic) & set(by_id)) | inputs | starts
        keep |= {head} if head else set()
    if policy.max_age is not None:
        cutoff = now - policy.max_age
        keep = {i for i in keep if i == head or by_id[i].ts is None or by_id[i].ts >= cutoff}
    if policy.keep == "semantic":
        # (a turn's start state is kept for the turn after it; what stands on it needs it whole)
        keep = {i for i in keep if i == head or i in starts or _turn_start_kept(by_id, i, keep)}

    def nearest(cid: str | None) -> str | None:
        seen = set()
        while cid is not None and cid in by_id and cid not in keep and cid not in seen:
            seen.add(cid)
            cid = by_id[cid].parent
        return cid if cid in keep else None

    parents = {i: nearest(by_id[i].parent) for i in keep}
    return Selection(tuple(i for i in order if i in keep), tuple(i for i in order if i not in keep), parents, head)


def _turn_start_kept(by_id: dict[str, CheckpointInfo], cid: str, keep: set[str]) -> bool:
    """Whether the start of ``cid``'s turn (its nearest ``input`` ancestor-or-self and that one's
    parent) is kept: a fork point an erasure cannot rewrite from is not kept."""
    c = by_id[cid]
    while c.source != "input":
        if c.parent is None or c.parent not in by_id:
            return True  # no turn input above (e.g. an update_state-made root): nothing to need
        c = by_id[c.parent]
    return c.id in keep and (c.parent is None or c.parent not in by_id or c.parent in keep)


class RetentionRecord(BaseModel):
    """What one application of a policy did (ids and counts only, never a value)."""

    model_config = ConfigDict(frozen=True)

    session_id: str
    policy: RetentionPolicy
    method: Literal["none", "prune", "rewrite"]
    before: int
    kept: int
    dropped: int
    kept_ids: list[str] = Field(default_factory=list)
    #: unsee's checkpoints whose LangGraph checkpoint is still there (fork / time-travel points)
    semantic_kept: int = 0
    semantic_total: int = 0
    bytes_before: int | None = None
    bytes_after: int | None = None
    notes: list[str] = Field(default_factory=list)
    at: str = ""


def check_prunable(agent: Any, policy: RetentionPolicy) -> BaseCheckpointSaver:
    """The agent's saver if ``policy`` can be applied to it; :class:`RetentionRefused` otherwise."""
    saver = getattr(agent, "checkpointer", None)
    if not isinstance(saver, BaseCheckpointSaver):
        raise RetentionRefused(f"the agent has no checkpointer (checkpointer={saver!r}): nothing to prune")
    if not policy.prunes:
        return saver
    delta = sorted(history.delta_specs(agent))
    if delta:
        # intermediate checkpoints carry the writes a DeltaChannel's later values are rebuilt from
        raise RetentionRefused(f"the graph has DeltaChannels (channels {delta}): their history lives in "
                               "the checkpoints a policy would drop; not pruned")
    if not history.implemented(type(saver), "delete_thread") and not (policy.keep == "latest" and policy.max_age is None
                                                       and history.implemented(type(saver), "prune")):
        raise RetentionRefused(f"{type(saver).__name__} has neither prune nor delete_thread: unsee cannot prune it")
    return saver


def _info(t: CheckpointTuple) -> CheckpointInfo:
    ts = t.checkpoint.get("ts")
    try:
        when = datetime.fromisoformat(ts) if ts else None
    except ValueError:
        when = None
    if when is not None and when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    parent = (t.parent_config or {}).get("configurable", {}).get("checkpoint_id")
    return CheckpointInfo(t.config["configurable"]["checkpoint_id"], parent, (t.metadata or {}).get("source"), when)


def _semantic_ids(records: Any, thread: str) -> set[str]:
    return {c.langgraph_checkpoint_id for c in records.checkpoints(thread)
            if c.langgraph_checkpoint_id and (c.langgraph_thread_id or thread) == thread}


def _size(saver: Any) -> int | None:
    path = main_file(driver_or_generic(unwrapped(saver)).connection)
    if path is None:
        return None
    return sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())


def _journal(ctx: Any, thread: str) -> Journal:
    """The thread's retention journal: ``<home>/erasures/retention-<hash>.json``, or on a shared
    store its row of ``erasure_journals`` (a rewrite interrupted on one machine, finished on another)."""
    name = hashlib.sha256(thread.encode()).hexdigest()[:16]
    return Journal.open(Path(ctx.home) / "erasures", f"retention-{name}", thread, getattr(ctx, "records", None))


def _compact(saver: Any) -> str | None:
    """Make the dropped rows' bytes go (SQLite WAL and free pages; PostgreSQL heap)."""
    driver = driver_or_generic(unwrapped(saver))  # (an EncryptingSaver wraps the real saver)
    conn, lock = driver.connection, driver.lock
    if main_file(conn) is not None:
        res = scrub(conn, lock=lock)
        return "SQLite scrubbed (WAL truncated, VACUUM)" + ("" if res.complete else f": incomplete {res.notes}")
    if is_postgres(conn):
        return vacuum_full(conn, SAVER_TABLES, lock=lock)
    return None


def apply_retention(ctx: Any, agent: Any, thread: str, policy: Any, *, now: datetime | None = None) -> RetentionRecord:
    """Apply ``policy`` to ``thread``'s history (the caller holds the session). ``ctx``: an
    ``ErasureContext`` (home, records). Every refusal is raised before anything is written; a
    crash is finished by calling this again with the same policy."""
    policy = RetentionPolicy.parse(policy)  # UnknownRetentionPolicy
    if not isinstance(thread, str) or not thread.strip():
        raise InvalidArgument("thread_id must be a non-empty session id")
    saver = check_prunable(agent, policy)  # RetentionRefused
    runs = getattr(ctx, "runs", None)
    with runs.exclusive(thread) if runs is not None else contextlib.nullcontext():
        return _apply(ctx, saver, thread, policy, now)


def _apply(ctx: Any, saver: Any, thread: str, policy: RetentionPolicy, now: datetime | None) -> RetentionRecord:
    journal = _journal(ctx, thread)
    stage = f"{thread}{STAGE_MARK}{hashlib.sha256(thread.encode()).hexdigest()[:8]}"
    bytes_before = _size(saver)
    if journal.get("state") in ("swapping", "swapped"):
        # a crash inside the swap (the thread may be partial; the stage is complete) or before the scrub
        return _finish(ctx, saver, thread, stage, journal, None, bytes_before)
    every = list(saver.list({"configurable": {"thread_id": thread}}))  # every namespace
    if any(t.config["configurable"].get("checkpoint_ns") for t in every):
        raise RetentionRefused(f"thread {thread!r} has subgraph checkpoints: not pruned")
    for event_id, scratch, state, _ in ctx.records.commits.of(thread):
        if state == "done" and saver.get_tuple(history.config_of(scratch)) is not None:
            raise RetentionRefused(f"the forget {event_id} of {thread!r} is committed but not erased yet "
                                   "(its scratch thread is there): erase it first (u.erase / unsee erase)")
    semantic = _semantic_ids(ctx.records, thread)
    sel = select([_info(t) for t in every], semantic, policy, now or datetime.now(timezone.utc))
    base = dict(session_id=thread, policy=policy, before=len(every), semantic_total=len(semantic),
                semantic_kept=len(semantic & set(sel.keep)), bytes_before=bytes_before)
    if not sel.drop:
        return _log(ctx, RetentionRecord(**base, method="none", kept=len(sel.keep), dropped=0,
                                         kept_ids=list(sel.keep), bytes_after=bytes_before))
    if policy.keep == "latest" and policy.max_age is None and history.implemented(type(saver), "prune"):
        saver.prune([thread], strategy="keep_latest")  # one transaction per thread
        notes = [n for n in [_compact(saver)] if n]
        return _log(ctx, RetentionRecord(**base, method="prune", kept=len(sel.keep), dropped=len(sel.drop),
                                         kept_ids=list(sel.keep), bytes_after=_size(saver),
                                         notes=["the saver's own prune(keep_latest)", *notes]))
    by_id = {t.config["configurable"]["checkpoint_id"]: t for t in every}
    saver.delete_thread(stage)  # a rerun starts the stage clean
    written: list[CheckpointTuple] = []
    # ids, metadata and pending writes kept; parents re-pointed at the nearest kept ancestor
    history.put_copies(saver, [by_id[i] for i in sel.keep], stage, scrub=None, rename_to=thread,
                  parents=dict(sel.parents), taken=set(), written=written)
    journal.set(state="staged", head=sel.head)
    fault_point("retention:staged")
    if saver.get_tuple(history.config_of(thread)).config["configurable"]["checkpoint_id"] != sel.head:
        saver.delete_thread(stage)  # (the session is held: only a writer outside unsee moves it)
        journal.set(state=None)
        raise RetentionRefused(f"thread {thread!r} moved while its history was staged: nothing pruned, run it again")
    record = RetentionRecord(**base, method="rewrite", kept=len(sel.keep), dropped=len(sel.drop),
                             kept_ids=list(sel.keep))
    journal.set(state="swapping", record=record.model_dump(mode="json"))
    return _finish(ctx, saver, thread, stage, journal, (written, record), bytes_before)


def _finish(ctx: Any, saver: Any, thread: str, stage: str, journal: Journal,
            staged: tuple[list[CheckpointTuple], RetentionRecord] | None, bytes_before: int | None) -> RetentionRecord:
    fault_point("retention:swapping")
    history.swap_in(saver, thread, stage, staged[0] if staged else None)  # idempotent
    journal.set(state="swapped")
    fault_point("retention:swapped")
    notes = [n for n in [_compact(saver)] if n]
    journal.set(state=None)
    if staged is not None:
        record = staged[1].model_copy(update={"bytes_after": _size(saver), "notes": notes})
    else:  # finished after a crash: the record the interrupted run journalled
        record = RetentionRecord.model_validate(journal.get("record")).model_copy(
            update={"bytes_after": _size(saver), "notes": ["finished a swap interrupted earlier", *notes]})
    return _log(ctx, record)


def _log(ctx: Any, record: RetentionRecord) -> RetentionRecord:
    record = record.model_copy(update={"at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    path = Path(ctx.home) / "erasures" / LOG
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        f.write(record.model_dump_json() + "\n")
    return record


def read_records(home: str | Path, session: str | None = None) -> list[RetentionRecord]:
    """The retention records of the home (of one session when given), oldest first."""
    path = Path(home) / "erasures" / LOG
    if not path.exists():
        return []
    out = [RetentionRecord.model_validate_json(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in out if session is None or r.session_id == session]
