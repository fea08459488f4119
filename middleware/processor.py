"""The span processor that turns finished unsee spans into the provenance store.

Add it to any TracerProvider (ours or the user's): spans without an
``unsee.session.id`` attribute are ignored, except those of unsee's describing
tracers (``semconv.DESCRIBING_SCOPES``: a forget's trace, a detector's
verdicts), kept with their conversation's spans while that session exists. It is
an observer: it never raises into the code that ended the span.
"""

from __future__ import annotations

import logging
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from . import semconv as sc
from .built_records import BuiltRecords
from .records import Checkpoint
from .store import Batch, ProvenanceStore, SpanRow

log = logging.getLogger("unsee.processor")


def _hex(value: int, width: int) -> str:
    return format(value, f"0{width}x")


def span_row(span: ReadableSpan, session_id: str) -> SpanRow:
    """A storable, exportable copy of a finished span."""
    ctx = span.context
    parent = span.parent
    resource = span.resource
    return SpanRow(
        session_id=session_id,
        trace_id=_hex(ctx.trace_id, 32),
        span_id=_hex(ctx.span_id, 16),
        parent_span_id=_hex(parent.span_id, 16) if parent is not None else None,
        name=span.name,
        kind=span.kind.name,
        start_ns=span.start_time or 0,
        end_ns=span.end_time or 0,
        attributes=_plain(span.attributes),
        events=[
            {"name": e.name, "timestamp": e.timestamp, "attributes": _plain(e.attributes)}
            for e in span.events
        ],
        links=[
            {
                "trace_id": _hex(link.context.trace_id, 32),
                "span_id": _hex(link.context.span_id, 16),
                "attributes": _plain(link.attributes),
            }
            for link in span.links
        ],
        status_code=span.status.status_code.name,
        status_description=span.status.description,
        resource=_resource(resource) if resource else {},
        scope=span.instrumentation_scope.name if span.instrumentation_scope else "",
    )


def _plain(attrs: Any) -> dict[str, Any]:
    if not attrs:
        return {}
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in attrs.items()}


_resources: dict[int, tuple[Any, dict[str, Any]]] = {}


def _resource(resource: Any) -> dict[str, Any]:
    """The plain attributes of a (frozen) resource, made once per resource (a copy each time)."""
    hit = _resources.get(id(resource))
    if hit is None or hit[0] is not resource:
        if len(_resources) >= 64:
            _resources.clear()
        hit = _resources[id(resource)] = (resource, _plain(resource.attributes))
    return dict(hit[1])


def records_session(attrs: Any) -> str | None:
    """The session whose records a span goes to: the thread it was recorded in (a replay's
    scratch session until the commit renames it), which is the session itself otherwise."""
    sid = attrs.get(sc.RECORDED_IN) or attrs.get(sc.SESSION)
    return str(sid) if sid else None


def batch_from_span(span: ReadableSpan, built: list | None = None) -> Batch | None:
    """The artifacts, checkpoints and commits one span carries: ``built``, the records the
    recorder put on it (``built_records``), or, when None, decoded from its attributes."""
    attrs = span.attributes or {}
    session_id = records_session(attrs)
    if not session_id:
        return None
    session_id = str(session_id)
    trace_id = _hex(span.context.trace_id, 32)
    span_id = _hex(span.context.span_id, 16)
    row = span_row(span, session_id)
    batch = Batch(session_id=session_id, span=row)
    # decoded from the row's plain dicts (the span's own mappings answer through Python code)
    attrs = row.attributes
    batch.tokenizer = attrs.get(sc.TOKENIZER)
    batch.commits.extend(str(x) for x in attrs.get(sc.COMMITS, ()))
    if built is not None:
        ids = {"trace_id": trace_id, "span_id": span_id}
        for r in built:
            if isinstance(r, Checkpoint):
                batch.checkpoints.append(r)
            else:  # (the ids of the span that carries it, as decoding gives them)
                batch.artifacts.append(r.model_copy(update=ids))
        return batch
    primary = sc.artifact_from_attributes(attrs, session_id, trace_id, span_id)
    if primary is not None:
        batch.artifacts.append(primary)
    cp = sc.checkpoint_from_attributes(attrs, session_id)
    if cp is not None:
        batch.checkpoints.append(cp)
    for event in row.events:
        eattrs = event["attributes"]
        if event["name"] == sc.ARTIFACT_EVENT:
            a = sc.artifact_from_attributes(eattrs, session_id, trace_id, span_id)
            if a is not None:
                batch.artifacts.append(a)
        elif event["name"] == sc.CHECKPOINT_EVENT:
            c = sc.checkpoint_from_attributes(eattrs, session_id)
            if c is not None:
                batch.checkpoints.append(c)
    return batch


def describing_session(span: ReadableSpan) -> str | None:
    """The session a span made by one of unsee's describing tracers is about (its
    ``gen_ai.conversation.id``), None for any other span."""
    scope = span.instrumentation_scope.name if span.instrumentation_scope else ""
    if scope not in sc.DESCRIBING_SCOPES:
        return None
    sid = (span.attributes or {}).get(sc.GEN_AI_CONVERSATION_ID)
    return str(sid) if sid else None


class _Describe:
    """Store a describing span's row with its session's spans, if the session still exists (a
    verdict or a forget trace never makes a session, e.g. one erased meanwhile)."""

    __slots__ = ("span", "session_id", "store")

    def __init__(self, span: ReadableSpan, session_id: str, store: ProvenanceStore):
        self.span, self.session_id, self.store = span, session_id, store

    def __call__(self) -> Batch | None:
        try:
            if not self.store.has_session(self.session_id, flush=False):
                return None
        except Exception:  # (not a record: losing it never marks the session incomplete)
            log.warning("could not keep span %s of session %s", self.span.name, self.session_id, exc_info=True)
            return None
        return Batch(session_id=self.session_id, span=span_row(self.span, self.session_id), describes=True)


class _Decode:
    __slots__ = ("span", "session_id", "built")

    def __init__(self, span: ReadableSpan, session_id: str, built: BuiltRecords | None):
        self.span = span
        self.session_id = session_id
        self.built = built

    def __call__(self) -> Batch | None:
        ctx = self.span.context
        noted = self.built.take(ctx.trace_id, ctx.span_id) if self.built is not None else None
        return batch_from_span(self.span, noted)


class ProvenanceSpanProcessor(SpanProcessor):
    """Feeds finished unsee spans into a ``ProvenanceStore``."""

    def __init__(self, store: ProvenanceStore):
        self.store = store
        self.failures = 0

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        return None

    def on_end(self, span: ReadableSpan) -> None:
        try:
            sid = records_session(span.attributes or {})
            if not sid:
                about = describing_session(span)
                if about:
                    self.store.submit(_Describe(span, about, self.store))
                return
            thunk = _Decode(span, str(sid), getattr(self.store, "built", None))
            self.store.submit(thunk)  # decoded on the writer thread, in order
        except Exception:
            self.failures += 1
            log.exception("could not queue span %s", getattr(span, "name", "?"))

    def shutdown(self) -> None:
        self.store.flush()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        self.store.flush(timeout_millis / 1000)
        return True
