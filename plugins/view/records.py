"""What a forget leaves for the page: a record of its plan, outcome and the graph before it.

A forget replaces the session's record with the counterfactual and erases the
old one, so the graph *before* the forget exists nowhere else afterwards. Its
record keeps only what is safe to keep after an erasure: artifact ids, types,
parents, steps, turns, token spans and sources, the closure I(z), and the
replay's outcome by id — no payload text, no keyed hashes, no tool arguments or
results, no event reason (any of them could carry the target). Records are
JSON files ``<home>/forgets/<event id>.json`` beside the receipts, written
atomically (a reader sees the whole file or none).
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from unsee.middleware.context_delta import expand

from .errors import UnknownEvent, ViewError

#: the artifact fields a sketch keeps (never content, content hash or labels' values beyond names)
SKETCH_FIELDS = ("id", "type", "parents", "source_ids", "token_span", "turn", "step", "committed")
_EVENT_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,200}$")


class SideEffectRef(BaseModel):
    model_config = ConfigDict(frozen=True)

    tool: str
    call_artifact_id: str | None = None
    status: str


class ForgetRecord(BaseModel):
    """One forget, as the page shows it (ids and counts only)."""

    model_config = ConfigDict(frozen=True)

    version: int = 2  # (2: sketches may carry parents_base)
    event_id: str
    session_id: str
    strategy: str
    created_at: str
    raised_by: str = "user"
    committed: bool = False
    erased_clean: bool | None = None
    receipt: str | None = None
    tau: int = 0
    entry: str | None = None
    entry_type: str | None = None
    closure: list[str] = Field(default_factory=list)
    checkpoint: str | None = None
    checkpoint_kind: str | None = None
    decoded: list[str] = Field(default_factory=list)
    rematerialised: list[str] = Field(default_factory=list)
    from_record: list[str] = Field(default_factory=list)
    executed: list[str] = Field(default_factory=list)
    deferred: list[SideEffectRef] = Field(default_factory=list)
    orphaned: list[SideEffectRef] = Field(default_factory=list)
    counts: dict[str, float] = Field(default_factory=dict)
    #: the session's graph just before the forget: artifact sketches and checkpoints (as stored, a
    #: model turn's parents may be what they add to an earlier sketch's: ``expand_sketches``;
    #: the loaders expand them)
    before_artifacts: list[dict[str, Any]] = Field(default_factory=list)
    before_checkpoints: list[dict[str, Any]] = Field(default_factory=list)


_COUNTS = ("transitions_replayed", "model_turns_decoded", "model_turns_rematerialised", "tool_calls_from_record",
           "tool_calls_executed", "tokens_prefilled", "tokens_decoded", "tokens_reused", "wall_time_s")


def _sketch(a: Any) -> dict[str, Any]:
    return {"id": a.id, "type": a.type.value, "parents": list(a.parents), "source_ids": list(a.source_ids),
            "token_span": list(a.token_span), "turn": a.turn, "step": a.step, "committed": a.committed}


def _sketches(graph: Iterable[Any]) -> list[dict[str, Any]]:
    """The graph's artifact sketches, a model turn's parents as its record stores them: what they
    change in an earlier turn's (``context``, ``context_delta``), or, for a turn recorded whole
    (a home recorded before deltas), what they add to an earlier sketch's (``parents_base``: its
    id) when those are a prefix of them. Whole lists would be O(turns²) ids (12 MB of JSON at
    400 turns); the deltas are O(turns). :func:`expand_sketches` undoes both."""
    out: list[dict[str, Any]] = []
    prev: tuple[str, tuple[str, ...]] | None = None  # (id, parents) of the last sketch with parents
    for a in graph:
        parents = a.parents
        d = {"id": a.id, "type": a.type.value, "parents": list(parents),
             "source_ids": list(a.source_ids), "token_span": list(a.token_span), "turn": a.turn, "step": a.step,
             "committed": a.committed}
        if a.context is not None:  # (recorded as a delta: kept so, ``context`` as the record's)
            d["context"] = a.context.model_dump(mode="json")
            out.append(d)
            continue
        n = len(prev[1]) if prev is not None else 0
        based = 0 < n < len(parents) and parents[n - 1] == prev[1][-1] and parents[:n] == prev[1]
        if based:
            d["parents"] = list(parents[n:])
            d["parents_base"] = prev[0]
        if len(parents) > 1:
            prev = (a.id, parents)
        out.append(d)
    return out


def expand_sketches(sketches: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Sketches with their full parent lists (``parents_base`` resolved; a record written before
    it existed has none, and comes back unchanged)."""
    if not any("parents_base" in d or "context" in d for d in sketches):
        return sketches
    full: dict[str, list[str]] = {}
    out = []
    for d in sketches:
        base = d.get("parents_base")
        ctx = d.get("context")
        if base is not None:
            d = {k: v for k, v in d.items() if k != "parents_base"}
            d["parents"] = full.get(base, []) + list(d.get("parents", []))
        elif ctx is not None:
            d = {k: v for k, v in d.items() if k != "context"}
            d["parents"] = list(expand(full.get(ctx["base"], []), d.get("parents", []), ctx.get("dropped", ()),
                                       ctx.get("at", ())))
        full[d["id"]] = d.get("parents", [])
        out.append(d)
    return out


def _expanded(data: Any) -> Any:
    """A stored record's JSON object with its sketches expanded (before validation)."""
    if isinstance(data, dict) and isinstance(data.get("before_artifacts"), list):
        data = {**data, "before_artifacts": expand_sketches(data["before_artifacts"])}
    return data


def checkpoint_sketch(c: Any) -> dict[str, Any]:
    """A checkpoint as the page shows it (metadata of a splice point: no prompt manifest)."""
    return c.model_dump(mode="json", include={"id", "kind", "step", "turn", "token_offset"})


def forget_record(report: Any, graph: Any, *, entry: Any = None, closure: Iterable[str] = (),
                  raised_by: str = "user", now: datetime | None = None) -> ForgetRecord:
    """The record of ``report`` (a ``ForgetReport``) over ``graph``, the session's graph before
    the forget; ``entry`` is the artifact where the target entered, ``closure`` its I(z)."""
    outcome = getattr(report, "outcome", None)

    def refs(effects: Iterable[Any]) -> list[SideEffectRef]:
        return [SideEffectRef(tool=e.tool, call_artifact_id=e.call_artifact_id, status=e.status) for e in effects]

    return ForgetRecord(
        event_id=report.event_id, session_id=report.session_id, strategy=report.strategy,
        created_at=(now or datetime.now(timezone.utc)).isoformat(timespec="seconds"), raised_by=raised_by,
        committed=report.committed, erased_clean=report.erased_clean, receipt=report.receipt, tau=report.tau,
        entry=getattr(entry, "id", None), entry_type=getattr(getattr(entry, "type", None), "value", None),
        closure=sorted(closure), checkpoint=report.checkpoint_id, checkpoint_kind=report.checkpoint_kind,
        decoded=list(outcome.decoded) if outcome else [],
        rematerialised=list(outcome.rematerialised) if outcome else [],
        from_record=list(outcome.from_record) if outcome else [],
        executed=list(outcome.executed) if outcome else [],
        deferred=refs(report.deferred_side_effects), orphaned=refs(report.orphaned_side_effects),
        counts={k: getattr(report, k) for k in _COUNTS},
        before_artifacts=_sketches(graph),
        before_checkpoints=[checkpoint_sketch(c) for c in graph.checkpoints],
    )


def _folder(home: str | os.PathLike) -> Path:
    return Path(home) / "forgets"


def _path(home: str | os.PathLike, event_id: str) -> Path:
    if not isinstance(event_id, str) or not _EVENT_ID.match(event_id):
        raise ViewError(f"not an event id: {event_id!r}")
    return _folder(home) / f"{event_id}.json"


def save_forget_record(home: str | os.PathLike, record: ForgetRecord) -> Path:
    """Write ``record`` to ``<home>/forgets/<event id>.json`` atomically; returns the path."""
    path = _path(home, record.event_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".forget-", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(record.model_dump_json())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


class ForgetRecordKeeper:
    """The revocation pipeline's ``ForgetRecords`` port over a home: each forget that replayed
    leaves its record in ``<home>/forgets/`` (what ``unsee view --event`` shows)."""

    def __init__(self, home: str | os.PathLike):
        self.home = Path(home)

    def keep(self, report: Any, graph: Any, entry: Any, closure: Iterable[str], raised_by: str) -> Path:
        return save_forget_record(self.home, forget_record(report, graph, entry=entry, closure=closure,
                                                           raised_by=raised_by))


def load_forget_record(home: str | os.PathLike, event_id: str) -> ForgetRecord:
    """The record of ``event_id``; :class:`UnknownEvent` when this home has none."""
    path = _path(home, event_id)
    try:
        return _read(path)
    except FileNotFoundError:
        raise UnknownEvent(f"no forget with event id {event_id!r} in {_folder(home)}") from None
    except (OSError, ValidationError, ValueError) as exc:
        raise ViewError(f"the forget record {path} cannot be read: {type(exc).__name__}") from None


def _read(path: Path) -> ForgetRecord:
    return ForgetRecord.model_validate(_expanded(json.loads(path.read_text(encoding="utf-8"))))


def forget_records(home: str | os.PathLike, session_id: str) -> list[ForgetRecord]:
    """The forget records of ``session_id``, oldest first (unreadable files are skipped)."""
    out = []
    folder = _folder(home)
    for path in folder.glob("*.json") if folder.is_dir() else ():
        try:
            rec = _read(path)
        except (OSError, ValidationError, ValueError):
            continue
        if rec.session_id == session_id:
            out.append(rec)
    return sorted(out, key=lambda r: r.created_at)
