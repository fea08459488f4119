"""What a forget leaves for the page: a record of its plan, outcome and the graph before it.

A forget replaces the session's record from its fork point on with the
counterfactual and erases the old suffix, so the graph *before* the forget
exists nowhere else afterwards. Its record keeps only what is safe to keep
after an erasure: artifact ids, types, parents, steps, turns, token spans and
sources, the closure I(z), and the replay's outcome by id — no payload text, no
keyed hashes, no tool arguments or results, no event reason (any of them could
carry the target). Records are JSON files ``<home>/forgets/<event id>.json``
beside the receipts, written atomically (a reader sees the whole file or none).

The prefix below the fork point is the session's own record after the forget,
unchanged, so a record keeps it by reference (``before_prefix``: the fork seq,
and a digest of the prefix's ids, seqs, types and commit flags) and sketches
only the suffix: a forget's record costs its suffix, not the session.
:func:`with_prefix` joins the prefix back from the session's graph, or, where a
later forget forked below this one's fork point, from that forget's record (the
digest says which is the prefix as it was); a prefix found nowhere stays
unresolved (``before_prefix`` set, ``before_artifacts`` the suffix only).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from unsee.middleware.context_delta import expand
from unsee.middleware.records import ArtifactType

from .errors import UnknownEvent, ViewError

#: the artifact fields a sketch keeps (never content, content hash or labels' values beyond names)
SKETCH_FIELDS = ("id", "type", "parents", "source_ids", "token_span", "turn", "step", "committed")
_EVENT_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,200}$")


class SideEffectRef(BaseModel):
    model_config = ConfigDict(frozen=True)

    tool: str
    call_artifact_id: str | None = None
    status: str


class PrefixRef(BaseModel):
    """The prefix of a forget's graph before it, by reference: the artifacts and checkpoints
    with seq below ``below_seq``, as :func:`prefix_digest` of them says."""

    model_config = ConfigDict(frozen=True)

    below_seq: int
    artifacts: int
    checkpoints: int
    digest: str


def prefix_digest(artifacts: Iterable[tuple], checkpoints: Iterable[tuple]) -> str:
    """sha256 over ``(id, seq, type, committed)`` of the artifacts and ``(id, seq)`` of the
    checkpoints, in order: the same prefix read from a graph or from sketches."""
    h = hashlib.sha256()
    for aid, seq, type_, committed in artifacts:
        h.update(f"a\0{aid}\0{seq}\0{type_}\0{int(bool(committed))}\n".encode())
    for cid, seq in checkpoints:
        h.update(f"c\0{cid}\0{seq}\n".encode())
    return h.hexdigest()


def _prefix_ref(below: int, artifacts: list[tuple], checkpoints: list[tuple]) -> PrefixRef:
    """The reference to a prefix, from its artifacts' and checkpoints' keys (:func:`prefix_digest`)."""
    return PrefixRef(below_seq=below, artifacts=len(artifacts), checkpoints=len(checkpoints),
                     digest=prefix_digest(artifacts, checkpoints))


def _keys(artifacts: Iterable[Any], checkpoints: Iterable[Any]) -> tuple[list[tuple], list[tuple]]:
    """The digest's keys of recorded artifacts and checkpoints."""
    return ([(a.id, a.seq, a.type.value, a.committed) for a in artifacts], [(c.id, c.seq) for c in checkpoints])


class ForgetRecord(BaseModel):
    """One forget, as the page shows it (ids and counts only)."""

    model_config = ConfigDict(frozen=True)

    version: int = 3  # (2: sketches may carry parents_base; 3: the prefix may be by reference)
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
    #: set: the sketches above are the suffix only, the prefix is the session's (``with_prefix``)
    before_prefix: PrefixRef | None = None
    #: the forget's reconciliation of the world, one artifact sketch per item (``id``: the item's
    #: key; ``type``: ``compensation`` for a compensation, whose parent is the orphaned call it
    #: undoes, an artifact of the graph before the forget; ``deferred_run`` for a deferred call
    #: run; ``left`` for an orphaned call nobody can undo); ``action``, ``tool``, ``runs``,
    #: ``state`` as the plan has them now. Names and ids only.
    reconciliation: list[dict[str, Any]] = Field(default_factory=list)


_COUNTS = ("transitions_replayed", "model_turns_decoded", "model_turns_rematerialised", "tool_calls_from_record",
           "tool_calls_executed", "tokens_prefilled", "tokens_decoded", "tokens_reused", "wall_time_s")


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
        d = {"id": a.id, "seq": a.seq, "type": a.type.value, "parents": list(parents),
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
    """A stored record's JSON object with its sketches expanded (before validation); a suffix
    whose prefix is by reference stays as stored (its deltas may name the prefix's turns)."""
    if isinstance(data, dict) and isinstance(data.get("before_artifacts"), list) and not data.get("before_prefix"):
        data = {**data, "before_artifacts": expand_sketches(data["before_artifacts"])}
    return data


def checkpoint_sketch(c: Any) -> dict[str, Any]:
    """A checkpoint as the page shows it (metadata of a splice point: no prompt manifest)."""
    return c.model_dump(mode="json", include={"id", "seq", "kind", "step", "turn", "token_offset"})


def _fork_seq(report: Any, graph: Any) -> int | None:
    """The seq of the checkpoint the forget forked at (None: it forked at nothing, e.g. B5)."""
    cid = getattr(report, "checkpoint_id", None)
    return next((c.seq for c in graph.checkpoints if c.id == cid), None) if cid else None


#: below_seq -> (the session's artifacts, its checkpoints) with a seq below it, as recorded now
#: (None: the session's record cannot be read)
PrefixSource = Callable[[int], "tuple[list[Any], list[Any]] | None"]


def graph_prefix(graph: Any) -> PrefixSource:
    """The prefix source of a session's graph (``Unsee.graph``)."""
    return lambda below: ([a for a in graph if a.seq < below], [c for c in graph.checkpoints if c.seq < below])


def home_prefix(home: str | os.PathLike, session_id: str) -> PrefixSource:
    """The prefix source of a home's embedded record (``<home>/provenance.sqlite``), read-only; a
    home whose record is elsewhere (PostgreSQL) or unreadable gives None (the prefix stays unresolved)."""
    from unsee.middleware.store_files import connect_ro
    from unsee.middleware.store_schema import artifact_from_row, checkpoint_from_row

    def read(below: int) -> tuple[list[Any], list[Any]] | None:
        path = Path(home) / "provenance.sqlite"
        if not path.is_file():
            return None
        try:
            conn = connect_ro(path)
        except sqlite3.Error:
            return None
        try:
            arts = [artifact_from_row(r) for r in conn.execute(
                "SELECT * FROM artifacts WHERE session_id=? AND seq<? ORDER BY seq", (session_id, below))]
            ckpts = [checkpoint_from_row(r) for r in conn.execute(
                "SELECT * FROM checkpoints WHERE session_id=? AND seq<? ORDER BY seq", (session_id, below))]
            return arts, ckpts
        except (sqlite3.Error, ValueError):
            return None
        finally:
            conn.close()

    return read


def _prefix_of_source(source: PrefixSource, ref: PrefixRef) -> tuple[list[dict], list[dict]] | None:
    """The sketches of the session's prefix below ``ref.below_seq`` when it is still ``ref``'s."""
    got = source(ref.below_seq)
    if got is None:
        return None
    arts, ckpts = got
    if _prefix_ref(ref.below_seq, *_keys(arts, ckpts)) != ref:
        return None
    return _sketches(arts), [checkpoint_sketch(c) for c in ckpts]


def _prefix_of_record(full: ForgetRecord, ref: PrefixRef) -> tuple[list[dict], list[dict]] | None:
    """The same from another forget's whole graph before it (sketches that carry their seq)."""
    arts = [d for d in full.before_artifacts if isinstance(d.get("seq"), int) and d["seq"] < ref.below_seq]
    ckpts = [d for d in full.before_checkpoints if isinstance(d.get("seq"), int) and d["seq"] < ref.below_seq]
    keys = ([(d["id"], d["seq"], d["type"], d.get("committed")) for d in arts], [(d["id"], d["seq"]) for d in ckpts])
    return (arts, ckpts) if _prefix_ref(ref.below_seq, *keys) == ref else None


def with_prefix(record: ForgetRecord, source: PrefixSource, others: Iterable[ForgetRecord] = ()) -> ForgetRecord:
    """``record`` with its whole graph before the forget: a prefix by reference joined back from
    ``source`` (the session's record now: :func:`graph_prefix`, :func:`home_prefix`) or, where a
    later forget forked below this one's fork point, from the graph before one of ``others`` (the
    session's other forget records; the digest picks the one that holds it). A prefix found
    nowhere leaves ``before_prefix`` set and the suffix's sketches only."""
    others = {r.event_id: r for r in others if r.session_id == record.session_id and r.event_id != record.event_id}
    return _with_prefix(record, source, others, frozenset(), {})


def _with_prefix(record: ForgetRecord, source: PrefixSource, others: dict[str, ForgetRecord], seen: frozenset[str],
                 done: dict[str, ForgetRecord]) -> ForgetRecord:
    ref = record.before_prefix
    if ref is None:
        return record
    found = _prefix_of_source(source, ref)
    seen = seen | {record.event_id}
    for eid, other in others.items():
        if found is not None:
            break
        if eid in seen:
            continue
        if eid not in done:  # (each record resolved once per call)
            done[eid] = _with_prefix(other, source, others, seen, done)
        if done[eid].before_prefix is None:
            found = _prefix_of_record(done[eid], ref)
    if found is None:  # (the suffix's deltas expanded as far as they go without it)
        return record.model_copy(update={"before_artifacts": expand_sketches(record.before_artifacts)})
    arts, ckpts = found
    return record.model_copy(update={"before_artifacts": expand_sketches([*arts, *record.before_artifacts]),
                                     "before_checkpoints": [*ckpts, *record.before_checkpoints],
                                     "before_prefix": None})


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
        **_before(report, graph),
    )


def _before(report: Any, graph: Any) -> dict[str, Any]:
    """The graph before the forget: the suffix from its fork point sketched, the prefix by
    reference (the whole graph sketched when it forked at nothing)."""
    fork = _fork_seq(report, graph)
    if not fork:
        return {"before_artifacts": _sketches(graph),
                "before_checkpoints": [checkpoint_sketch(c) for c in graph.checkpoints]}
    prefix = graph_prefix(graph)(fork)
    return {"before_artifacts": _sketches(graph.since_seq(fork)), "before_prefix": _prefix_ref(fork, *_keys(*prefix)),
            "before_checkpoints": [checkpoint_sketch(c) for c in graph.checkpoints if c.seq >= fork]}


#: a reconciliation item's artifact type, by its action
_ITEM_TYPES = {"compensate": ArtifactType.COMPENSATION.value, "run": "deferred_run", "report": "left"}


def reconciliation_sketch(item: dict[str, Any]) -> dict[str, Any]:
    """One reconciliation item as an artifact sketch (``ForgetRecord.reconciliation``)."""
    parent = item.get("call_artifact_id")
    return {"id": item["key"], "type": _ITEM_TYPES.get(item["action"], item["action"]),
            "parents": [parent] if parent else [], "action": item["action"], "tool": item["tool"],
            "runs": item.get("runs"), "state": item["state"]}


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

    def keep_reconciliation(self, event_id: str, items: list[dict[str, Any]]) -> Path | None:
        """Put the reconciliation's items (``key``, ``action``, ``tool``, ``runs``, ``call_artifact_id``,
        ``state``) on the record of ``event_id`` as artifact sketches (``ForgetRecord.reconciliation``);
        None when the forget left no record here (it did not replay)."""
        path = _path(self.home, event_id)
        try:
            stored = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        stored["reconciliation"] = [reconciliation_sketch(i) for i in items]
        return save_forget_record(self.home, ForgetRecord.model_validate(stored))  # (as stored: compact)


def load_forget_record(home: str | os.PathLike, event_id: str, graph: Any = None) -> ForgetRecord:
    """The record of ``event_id``, its graph before the forget whole (:func:`with_prefix`: the
    prefix from ``graph``, the session's graph now, or without one from the home's embedded
    record); :class:`UnknownEvent` when this home has none."""
    path = _path(home, event_id)
    try:
        record = _read(path)
    except FileNotFoundError:
        raise UnknownEvent(f"no forget with event id {event_id!r} in {_folder(home)}") from None
    except (OSError, ValidationError, ValueError) as exc:
        raise ViewError(f"the forget record {path} cannot be read: {type(exc).__name__}") from None
    return _resolved(home, record, graph, None)


def _resolved(home: str | os.PathLike, record: ForgetRecord, graph: Any,
              stored: list[ForgetRecord] | None) -> ForgetRecord:
    """``record`` with its prefix joined back; the home's other records are read only when the
    session's record no longer holds the prefix (``stored``: already read)."""
    if record.before_prefix is None:
        return record
    source = graph_prefix(graph) if graph is not None else home_prefix(home, record.session_id)
    if stored is None:
        found = with_prefix(record, source)
        if found.before_prefix is None:
            return found
        stored = _stored_records(home, record.session_id)
    return with_prefix(record, source, stored)


def _read(path: Path) -> ForgetRecord:
    return ForgetRecord.model_validate(_expanded(json.loads(path.read_text(encoding="utf-8"))))


def forget_records(home: str | os.PathLike, session_id: str, graph: Any = None) -> list[ForgetRecord]:
    """The forget records of ``session_id``, oldest first (unreadable files are skipped), each
    graph before its forget whole as :func:`load_forget_record` gives it."""
    stored = _stored_records(home, session_id)
    return [_resolved(home, r, graph, stored) for r in stored]


def _stored_records(home: str | os.PathLike, session_id: str) -> list[ForgetRecord]:
    """The records as stored (a prefix by reference left so), oldest first."""
    out = []
    folder = _folder(home)
    for path in folder.glob("*.json") if folder.is_dir() else ():
        try:
            rec, written = _read(path), path.stat().st_mtime_ns
        except (OSError, ValidationError, ValueError):
            continue
        if rec.session_id == session_id:
            out.append((rec.created_at, written, rec))
    # (created_at is to the second: two forgets in one second are in the order their files were written)
    return [r for _, _, r in sorted(out, key=lambda t: t[:2])]
