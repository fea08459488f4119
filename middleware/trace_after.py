"""Spans made after the fact: work timed while it ran (a forget, a detector's verdict) sent
as spans once it is over, with the times it really took, from a thread of its own choosing,
never from inside an agent's run.

:class:`SpanSpec` is what a pure layout function returns (tested by table); :func:`emit`
is the thin adapter onto an OpenTelemetry ``Tracer``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["SpanSpec", "emit"]


@dataclass(frozen=True)
class SpanSpec:
    """One span to emit: ``parent`` is the index of its parent in the list (None: a new trace's
    root); ``links``: span contexts it links to (e.g. the verdict that raised a forget)."""

    name: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    parent: int | None = None
    error: str | None = None
    links: tuple[Any, ...] = ()


def emit(tracer: Any, specs: list[SpanSpec]) -> list[Any]:
    """Send ``specs`` (a root and its descendants, parents first) as one trace: never a child of
    whatever span is current. Returns the span contexts, in the order of ``specs``."""
    from opentelemetry import context as otel_context
    from opentelemetry import trace as otel_trace
    from opentelemetry.trace import Link, Status, StatusCode

    spans: list[Any] = []
    for spec in specs:
        ctx = (otel_context.Context() if spec.parent is None
               else otel_trace.set_span_in_context(spans[spec.parent]))
        span = tracer.start_span(spec.name, context=ctx, kind=otel_trace.SpanKind.INTERNAL,
                                 attributes=spec.attributes, start_time=spec.start_ns,
                                 links=[Link(c) for c in spec.links if c is not None and c.is_valid])
        if spec.error:
            span.set_attribute("error.type", spec.error)
            span.set_status(Status(StatusCode.ERROR))
        spans.append(span)
    for spec, span in reversed(list(zip(specs, spans))):  # children end before their parents
        span.end(end_time=spec.end_ns)
    return [s.get_span_context() for s in spans]
