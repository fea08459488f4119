"""Spans made after the fact: work timed while it ran (a forget, a detector's verdict) sent
as spans once it is over, with the times it really took, from a thread of its own choosing,
never from inside an agent's run.

:class:`SpanSpec` is what a pure layout function returns (tested by table); :func:`emit`
is the thin adapter onto an OpenTelemetry ``Tracer``. Work timed *on* an agent's path (an IFC
decision at a sink call, a detector screening a tool return) hands its spans to
:class:`AfterSpans`: the agent's thread keeps the times and the span context of the call they
belong to, and the spans are laid out and sent later, by whoever drains the ``defer`` queue it
was given (the recorder's deferred tasks: the store's writer while the agent waits, or a flush).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["AfterSpans", "SpanSpec", "emit"]

log = logging.getLogger("unsee.trace")


@dataclass(frozen=True)
class SpanSpec:
    """One span to emit: ``parent`` is the index of its parent in the list (None: a new trace's
    root); ``links``: span contexts it links to (e.g. the verdict that raised a forget), each
    bare or as ``(span context, link attributes)``. ``parent_context``: for a spec without a
    ``parent``, the span context of a span made elsewhere that it is a child of (the tool call's
    ``execute_tool`` span, captured on the agent's thread); ``events``: ``(name, attributes)``
    pairs added at ``end_ns`` (e.g. a guardrail's findings)."""

    name: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    parent: int | None = None
    error: str | None = None
    links: tuple[Any, ...] = ()
    parent_context: Any = None
    events: tuple[tuple[str, dict[str, Any]], ...] = ()


def emit(tracer: Any, specs: list[SpanSpec]) -> list[Any]:
    """Send ``specs`` (a root and its descendants, parents first) as one trace, or as children of
    their ``parent_context``: never of whatever span is current. Returns the span contexts, in
    the order of ``specs``."""
    from opentelemetry import context as otel_context
    from opentelemetry import trace as otel_trace
    from opentelemetry.trace import Status, StatusCode

    spans: list[Any] = []
    for spec in specs:
        if spec.parent is not None:
            ctx = otel_trace.set_span_in_context(spans[spec.parent])
        elif spec.parent_context is not None and spec.parent_context.is_valid:
            ctx = otel_trace.set_span_in_context(otel_trace.NonRecordingSpan(spec.parent_context),
                                                 otel_context.Context())
        else:
            ctx = otel_context.Context()
        span = tracer.start_span(spec.name, context=ctx, kind=otel_trace.SpanKind.INTERNAL,
                                 attributes=spec.attributes, start_time=spec.start_ns, links=_links(spec.links))
        if spec.error:
            span.set_attribute("error.type", spec.error)
            span.set_status(Status(StatusCode.ERROR))
        for name, attrs in spec.events:
            span.add_event(name, attrs, timestamp=spec.end_ns)
        spans.append(span)
    for spec, span in reversed(list(zip(specs, spans))):  # children end before their parents
        span.end(end_time=spec.end_ns)
    return [s.get_span_context() for s in spans]


def _links(links: tuple[Any, ...]) -> list[Any]:
    from opentelemetry.trace import Link, SpanContext

    out = []
    for item in links:
        # (a SpanContext is itself a tuple: only a pair that is not one carries attributes)
        ctx, attrs = (item, None) if item is None or isinstance(item, SpanContext) else item
        if ctx is not None and ctx.is_valid:
            out.append(Link(ctx, attrs))
    return out


class AfterSpans:
    """Spans laid out and sent after the work they describe (an observer: a failure is logged,
    never raised). ``later(build)`` calls ``build()`` — a layout function returning a
    :class:`SpanSpec` or a list of them — and emits them, by ``defer(fn, *args)`` (run ``fn(*args)`` later, in
    the order handed over, off the agent's path: the facade hands the recorder's deferred queue),
    or at once when no ``defer`` is given."""

    def __init__(self, tracer: Any, defer: Callable[..., None] | None = None):
        self.tracer = tracer
        self.defer = defer

    def later(self, build: Callable[[], SpanSpec | Iterable[SpanSpec]]) -> None:
        if self.defer is None:
            self._send(build)
            return
        try:
            self.defer(self._send, build)
        except Exception:  # (a queue that refuses: the spans are lost, the agent goes on)
            log.warning("could not hand over guardrail spans", exc_info=True)

    def _send(self, build: Callable[[], SpanSpec | Iterable[SpanSpec]]) -> None:
        try:
            made = build()
            emit(self.tracer, [made] if isinstance(made, SpanSpec) else list(made))
        except Exception:
            log.warning("could not send spans made after the fact", exc_info=True)
