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
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from unsee.middleware.semconv import GEN_AI_CONVERSATION_ID, GEN_AI_OPERATION
from unsee.middleware.trace_after import SpanSpec, emit

__all__ = ["ForgetTiming", "SpanSpec", "phase", "timing", "record_erasure", "forget_spans", "emit",
           "raised_from", "WORKFLOW", "ATTR"]

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
}


@dataclass
class _Phase:
    name: str
    start_ns: int
    end_ns: int
    error: str | None = None


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
def phase(name: str) -> Iterator[None]:
    """Time one phase of the forget being traced (nothing when none is)."""
    t = _current.get()
    if t is None:
        yield
        return
    start, error = time.time_ns(), None
    try:
        yield
    except BaseException as e:
        error = type(e).__name__
        raise
    finally:
        t.phases.append(_Phase(name, start, time.time_ns(), error))


def record_erasure(result: Any) -> None:
    """Keep the erasure's result for the trace of the forget being timed (if any)."""
    t = _current.get()
    if t is not None:
        t.erasure = result


def _receipt_digest(path: str | None) -> str | None:
    if not path:
        return None
    try:
        return "sha256:" + hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


def forget_spans(report: Any, t: ForgetTiming, *, raised_by: str = "user") -> list[SpanSpec]:
    """The spans of one forget (pure): the root, then a span per timed phase, a span per erasure
    route (inside the ``erase`` phase, at the times the route's erase step took) and the
    receipt. ``report``: the ``ForgetReport``."""
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
    specs = [SpanSpec(f"{OP_INVOKE_WORKFLOW} {WORKFLOW}", t.start_ns, t.end_ns or time.time_ns(), root,
                      links=(t.raised_from,) if t.raised_from is not None else ())]
    erase_at = None
    for p in t.phases:
        attrs: dict[str, Any] = dict(conv)
        if p.name == "replay" and report.outcome is not None:
            o = report.outcome
            attrs.update({ATTR["decoded"]: len(o.decoded), ATTR["rematerialised"]: len(o.rematerialised),
                          ATTR["from_record"]: len(o.from_record), ATTR["executed"]: len(o.executed),
                          ATTR["deferred"]: len(report.deferred_side_effects)})
        specs.append(SpanSpec(f"{WORKFLOW}.{p.name}", p.start_ns, p.end_ns, attrs, parent=0, error=p.error))
        if p.name == "erase":
            erase_at = len(specs) - 1
    result = t.erasure
    if result is not None and erase_at is not None:
        specs += _route_spans(result, specs[erase_at], erase_at, conv)
        digest = _receipt_digest(report.receipt)
        if digest:
            end = specs[erase_at].end_ns
            specs.append(SpanSpec(f"{WORKFLOW}.receipt", end, end, {**conv, ATTR["receipt"]: digest}, parent=0))
    return specs


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
