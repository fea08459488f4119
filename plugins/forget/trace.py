"""A forget as a trace of its own: the revocation event, its phases, its erasure routes, its receipt.

The pipeline times its phases while it works (:func:`phase`, a no-op when no forget is being
traced) and, once the forget is over, :func:`forget_spans` (pure: report + timings -> span
specs, tested by table) lays the trace out and :func:`emit` sends it through the home's
tracer. Nothing of this runs on an agent's path: the spans are made after the forget, with
the times its phases really took.

Names follow the GenAI semantic conventions where one fits (``invoke_workflow`` with
``gen_ai.workflow.name = unsee.forget`` for the root, ``gen_ai.conversation.id`` on every
span; the conventions repository ``open-telemetry/semantic-conventions-genai``, main as of
2026-10, status Development); unsee's own steps are plain INTERNAL spans without a
``gen_ai.operation.name`` (plan, replay, commit, each erasure route, the receipt), so GenAI
views do not mistake them for model work. The target is never on a span: only its keyed hash
(``hmac-sha256:``, the home's key). The spans carry no ``unsee.session.id``: they are not
records of the session (the provenance processor ignores them), they describe its forget.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from unsee.middleware.semconv import GEN_AI_CONVERSATION_ID, GEN_AI_OPERATION
from unsee.middleware.trace_after import SpanSpec, emit

from .memory_trace import memory_spans

__all__ = ["ForgetTiming", "SpanSpec", "phase", "note", "timing", "record_memory",
           "forget_spans", "failed_spans", "erasure_spans", "emit", "raised_from",
           "WORKFLOW", "ATTR"]

#: the root span's workflow name (``gen_ai.workflow.name``) and operation
WORKFLOW = "unsee.forget"
OP_INVOKE_WORKFLOW = "invoke_workflow"
GEN_AI_WORKFLOW_NAME = "gen_ai.workflow.name"

#: the attribute names of a forget's trace (one table: a rename is one edit)
ATTR = {
    "event": "unsee.revocation.event_id",
    "raised_by": "unsee.revocation.raised_by",
    "target_hash": "unsee.revocation.target_hash",
    "strategy": "unsee.forget.strategy",
    "tau": "unsee.forget.tau",
    "influence": "unsee.forget.influence_size",
    "fork": "unsee.forget.fork_checkpoint",
    "fork_kind": "unsee.forget.fork_checkpoint_kind",
    "committed": "unsee.forget.committed",
    "transitions": "unsee.forget.transitions_replayed",
    "decoded": "unsee.replay.decoded",
    "rematerialised": "unsee.replay.rematerialised",
    "from_record": "unsee.replay.from_record",
    "executed": "unsee.replay.executed",
    "deferred": "unsee.replay.deferred",
    "route": "unsee.erasure.route",
    "method": "unsee.erasure.method",
    "before": "unsee.erasure.copies_before",
    "after": "unsee.erasure.copies_after",
    "receipt": "unsee.receipt.digest",
    "clean": "unsee.erasure.clean",
    # a replayed turn (``unsee.forget.turn``) and its links to the spans it supersedes
    "turn": "unsee.turn",
    "link": "unsee.link.kind",
    "mode": "unsee.replay.mode",
    "artifact": "unsee.link.artifact",
    # the restore steps (``unsee.forget.restore.*``)
    "kv_offset": "unsee.restore.kv.token_offset",
    "kv_cropped": "unsee.restore.kv.cropped",
    "snapshot": "unsee.restore.sandbox.snapshot_id",
    "fork_seq": "unsee.restore.fork_seq",
    "memory_items": "unsee.restore.memory.sanitized_items",
}


@dataclass
class _Phase:
    name: str
    start_ns: int
    end_ns: int
    error: str | None = None
    #: the index (in ``ForgetTiming.phases``) of the phase this one ran inside, None: the forget's
    parent: int | None = None
    #: what the phase says of itself (e.g. a replayed turn's number, the KV offset cropped to)
    attrs: dict[str, Any] = field(default_factory=dict)


@dataclass
class ForgetTiming:
    """What a forget's pipeline timed: its phases, in the order they ended, and its erasure."""

    start_ns: int = field(default_factory=time.time_ns)
    end_ns: int = 0
    phases: list[_Phase] = field(default_factory=list)
    #: the erasure plugin's result (``ErasureResult``) when the forget erased the record
    erasure: Any = None
    #: the span that raised this forget (a detector's guardrail span), linked from the root
    raised_from: Any = None
    #: the recorded transitions the replay superseded: artifact id -> (turn, trace id, span id)
    #: of the span that recorded it (hex; None when unknown), for the turn spans' links
    superseded: dict[str, tuple[int, str | None, str | None]] = field(default_factory=dict)
    #: phases open now (indexes into ``phases``), innermost last
    _open: list[int] = field(default_factory=list)
    #: the memory store operations the commit made (``middleware.memory.MemoryChange``), for its
    #: ``delete_memory`` / ``upsert_memory`` spans (``memory_trace.py``)
    memory: list[Any] = field(default_factory=list)

    def seconds(self) -> dict[str, float]:
        """Seconds each of the forget's own phases took (``locate``, ``plan``, ``check``,
        ``replay``, ``commit``, ``erase``; a phase run more than once, summed), for the report."""
        out: dict[str, float] = {}
        for p in self.phases:
            if p.parent is None and p.end_ns:
                out[p.name] = out.get(p.name, 0.0) + (p.end_ns - p.start_ns) / 1e9
        return out

    def supersede(self, graph: Any, artifact_ids: Iterable[str]) -> None:
        """Keep the recorded transitions the replay superseded: each artifact's turn and the span
        that recorded it, from ``graph`` (the session's provenance graph before the forget)."""
        for a in artifact_ids:
            if a in graph:
                x = graph.get(a)
                self.superseded[a] = (x.turn, x.trace_id, x.span_id)


#: the span context of what raises the forgets run inside ``raised_from`` (a detector's verdict)
_raiser: contextvars.ContextVar[Any] = contextvars.ContextVar("unsee_forget_raiser", default=None)


@contextlib.contextmanager
def raised_from(span_context: Any) -> Iterator[None]:
    """Forgets run inside link their trace's root to ``span_context`` (e.g. the detector's
    ``run_guardrail`` span whose verdict raised them)."""
    token = _raiser.set(span_context)
    try:
        yield
    finally:
        _raiser.reset(token)


_current: contextvars.ContextVar[ForgetTiming | None] = contextvars.ContextVar("unsee_forget_timing", default=None)


@contextlib.contextmanager
def timing() -> Iterator[ForgetTiming]:
    """Time the phases of the forget run inside (a nested forget, e.g. ``scope="all"``'s, has
    its own)."""
    t = ForgetTiming(raised_from=_raiser.get())
    token = _current.set(t)
    try:
        yield t
    finally:
        t.end_ns = time.time_ns()
        _current.reset(token)


@contextlib.contextmanager
def phase(name: str, **attrs: Any) -> Iterator[None]:
    """Time one phase of the forget being traced (nothing when none is). A phase entered inside
    another is its child (``restore`` and each replayed ``turn`` inside ``replay``); ``attrs``
    are the phase's own (e.g. ``turn=3``). Phases are kept in the order they began, so a parent
    always comes before its children."""
    t = _current.get()
    if t is None:
        yield
        return
    p = _Phase(name, time.time_ns(), 0, parent=t._open[-1] if t._open else None, attrs=dict(attrs))
    t.phases.append(p)
    t._open.append(len(t.phases) - 1)
    try:
        yield
    except BaseException as e:
        p.error = type(e).__name__
        raise
    finally:
        p.end_ns = time.time_ns()
        t._open.pop()


def note(**attrs: Any) -> None:
    """Add ``attrs`` to the innermost phase open now (e.g. what a restore step found)."""
    t = _current.get()
    if t is not None and t._open:
        t.phases[t._open[-1]].attrs.update(attrs)


def record_memory(changes: Callable[[], list[Any]]) -> None:
    """Keep, for the forget being timed (nothing, and ``changes`` not called, when none is), the
    memory store operations its commit made (``changes()``: ``MemoryChange`` list)."""
    t = _current.get()
    if t is not None:
        t.memory.extend(changes())


def _receipt_digest(path: str | None) -> str | None:
    if not path:
        return None
    try:
        return "sha256:" + hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


#: what a replayed turn did with each recorded transition it superseded (the turn span's counts
#: and its links' ``unsee.replay.mode``)
MODES = (("decoded", "decoded"), ("rematerialised", "rematerialised"), ("from_record", "from_record"))


def _span_context(trace_id: str | None, span_id: str | None) -> Any:
    from opentelemetry.trace import SpanContext, TraceFlags

    if not trace_id or not span_id:
        return None
    return SpanContext(int(trace_id, 16), int(span_id, 16), is_remote=True,
                       trace_flags=TraceFlags(TraceFlags.SAMPLED))


def _turn_part(turn: int, report: Any, t: ForgetTiming) -> tuple[dict[str, Any], tuple[Any, ...]]:
    """A replayed turn's counts (decoded again / re-materialised / served from the record) and
    its links to the spans that recorded the transitions it supersedes."""
    o = report.outcome
    attrs: dict[str, Any] = {}
    links: list[Any] = []
    for mode, field_name in MODES:
        ids = [a for a in (getattr(o, field_name, None) or ()) if t.superseded.get(a, (None,))[0] == turn]
        attrs[ATTR[mode]] = len(ids)
        for a in ids:
            _, trace_id, span_id = t.superseded[a]
            ctx = _span_context(trace_id, span_id)
            if ctx is not None:
                links.append((ctx, {ATTR["link"]: "supersedes", ATTR["mode"]: mode, ATTR["artifact"]: a}))
    return attrs, tuple(links)


def forget_spans(report: Any, t: ForgetTiming, *, raised_by: str = "user") -> list[SpanSpec]:
    """The spans of one forget (pure): the root, then a span per timed phase under the phase it
    ran in (``restore`` with its steps and each replayed ``turn`` under ``replay``; the turn
    links to the spans of the recorded transitions it supersedes), a span per erasure route
    (inside the ``erase`` phase, at the times the route's erase step took), the receipt, and a
    memory span per store operation of the commit or of a route (``memory_trace.py``).
    ``report``: the ``ForgetReport``."""
    session = report.session_id
    conv = {GEN_AI_CONVERSATION_ID: session}
    root = {GEN_AI_OPERATION: OP_INVOKE_WORKFLOW, GEN_AI_WORKFLOW_NAME: WORKFLOW, **conv,
            ATTR["event"]: report.event_id, ATTR["raised_by"]: raised_by,
            ATTR["target_hash"]: report.target_hash, ATTR["strategy"]: report.strategy,
            ATTR["tau"]: report.tau, ATTR["influence"]: report.closure_size,
            ATTR["committed"]: report.committed, ATTR["transitions"]: report.transitions_replayed}
    if report.checkpoint_id:
        root[ATTR["fork"]] = report.checkpoint_id
        root[ATTR["fork_kind"]] = report.checkpoint_kind or ""
    if report.erased_clean is not None:
        root[ATTR["clean"]] = report.erased_clean
    specs = [_root(t, root)]
    specs += _phase_spans(t, conv, report)
    erase_at = next((i for i in range(len(specs) - 1, 0, -1) if specs[i].name == f"{WORKFLOW}.erase"), None)
    result = t.erasure
    if result is not None and erase_at is not None:
        specs += _route_spans(result, specs[erase_at], erase_at, conv)
        digest = _receipt_digest(report.receipt)
        if digest:
            end = specs[erase_at].end_ns
            specs.append(SpanSpec(f"{WORKFLOW}.receipt", end, end, {**conv, ATTR["receipt"]: digest}, parent=0))
    return specs + _memory_part(specs, t, conv)


def _memory_part(specs: list[SpanSpec], t: ForgetTiming, conv: dict[str, Any]) -> list[SpanSpec]:
    """The memory store operations of the commit and of the erasure routes (``memory_trace.py``)."""
    erased = (getattr(t.erasure, "memory", None) or {}).items()
    return memory_spans(specs, [(f"{WORKFLOW}.commit", t.memory),
                                *((f"unsee.erasure {route}", changes) for route, changes in erased)], conv)


def failed_spans(session: str, event_id: str, target_hash: str | None, t: ForgetTiming, error: BaseException, *,
                 raised_by: str = "user", strategy: str | None = None) -> list[SpanSpec]:
    """The trace of a forget that raised (pure): the root with the error (``error.type``, status
    ERROR) and the phases it got through, the one that failed marked too. Nothing was committed."""
    conv = {GEN_AI_CONVERSATION_ID: session}
    root: dict[str, Any] = {GEN_AI_OPERATION: OP_INVOKE_WORKFLOW, GEN_AI_WORKFLOW_NAME: WORKFLOW, **conv,
                            ATTR["event"]: event_id, ATTR["raised_by"]: raised_by, ATTR["committed"]: False}
    if target_hash:
        root[ATTR["target_hash"]] = target_hash
    if strategy:
        root[ATTR["strategy"]] = strategy
    specs = [_root(t, root, error=type(error).__name__)] + _phase_spans(t, conv, None)
    return specs + _memory_part(specs, t, conv)


def erasure_spans(result: Any, *, kind: str, start_ns: int, end_ns: int, session: str | None = None,
                  event_id: str | None = None) -> list[SpanSpec]:
    """The trace of an erasure run on its own (pure): ``u.erase`` (``kind="erase"``: the record of
    a session forgotten earlier) or ``u.erase_subject`` (``"erase_subject"``: a data subject's
    sessions and namespaces). The root ``invoke_workflow unsee.<kind>``, a span per route of its
    receipt (at the route's own times when the result has them), the memory records a route
    deleted (``delete_memory``) under it, and the receipt's digest. ``session``: the session erased
    (its ``gen_ai.conversation.id``); a subject erasure names none (its sessions are gone)."""
    conv = {GEN_AI_CONVERSATION_ID: session} if session else {}
    workflow = f"unsee.{kind}"
    root: dict[str, Any] = {GEN_AI_OPERATION: OP_INVOKE_WORKFLOW, GEN_AI_WORKFLOW_NAME: workflow, **conv,
                            ATTR["clean"]: bool(result.clean)}
    if event_id:
        root[ATTR["event"]] = event_id
    specs = [SpanSpec(f"{OP_INVOKE_WORKFLOW} {workflow}", start_ns, end_ns, root)]
    specs += _route_spans(result, specs[0], 0, conv)
    digest = _receipt_digest(str(getattr(result, "path", "") or ""))
    if digest:
        specs.append(SpanSpec(f"{workflow}.receipt", end_ns, end_ns, {**conv, ATTR["receipt"]: digest}, parent=0))
    erased = (getattr(result, "memory", None) or {}).items()
    return specs + memory_spans(specs, [(f"unsee.erasure {route}", changes) for route, changes in erased], conv)


def _root(t: ForgetTiming, attrs: dict[str, Any], error: str | None = None) -> SpanSpec:
    return SpanSpec(f"{OP_INVOKE_WORKFLOW} {WORKFLOW}", t.start_ns, t.end_ns or time.time_ns(), attrs,
                    error=error, links=(t.raised_from,) if t.raised_from is not None else ())


def _phase_spans(t: ForgetTiming, conv: dict[str, Any], report: Any) -> list[SpanSpec]:
    """A span per timed phase (parents first: phases are kept in the order they began); indexes
    in the result are offset by one, the root being 0."""
    out: list[SpanSpec] = []
    for p in t.phases:
        attrs: dict[str, Any] = dict(conv)
        links: tuple[Any, ...] = ()
        for k, v in p.attrs.items():
            attrs[ATTR.get(k, f"unsee.forget.{k}")] = v
        if report is not None and report.outcome is not None:
            if p.name == "replay":
                o = report.outcome
                attrs.update({ATTR["decoded"]: len(o.decoded), ATTR["rematerialised"]: len(o.rematerialised),
                              ATTR["from_record"]: len(o.from_record), ATTR["executed"]: len(o.executed),
                              ATTR["deferred"]: len(report.deferred_side_effects)})
            elif p.name == "turn" and "turn" in p.attrs:
                counts, links = _turn_part(p.attrs["turn"], report, t)
                attrs.update(counts)
        parent = 0 if p.parent is None else p.parent + 1
        out.append(SpanSpec(f"{WORKFLOW}.{p.name}", p.start_ns, p.end_ns or time.time_ns(), attrs, parent=parent,
                            error=p.error, links=links))
    return out


def _route_spans(result: Any, erase: SpanSpec, parent: int, conv: dict) -> list[SpanSpec]:
    """One span per route of the receipt, at the times its erase step took (``result.times``:
    wall-clock start/end per route), else the erase phase's."""
    times = getattr(result, "times", {}) or {}
    out = []
    for r in result.receipt.routes:
        start, end = times.get(r.name, (erase.start_ns, erase.end_ns))
        out.append(SpanSpec(f"unsee.erasure {r.name}", start, end,
                            {**conv, ATTR["route"]: r.name, ATTR["method"]: r.method,
                             ATTR["before"]: r.copies_before, ATTR["after"]: r.copies_after}, parent=parent))
    return out
