"""The records the recorder put on each span, handed to the span processor as built.

A finished span is what exporters and users see, and the store keeps it as a row; the
artifacts and checkpoints it carries were built by the recorder, which notes them here
under the span's ids as it puts them on (an attribute set, an event). The processor takes
them back when the span ends instead of decoding the span's attributes into records again;
a span it finds nothing for (another process's, one made by a user's code) is decoded as
before. Bounded: entries of spans that never end are dropped oldest first.
"""

from __future__ import annotations

import threading
from opentelemetry.trace import Span

from .records import Artifact, Checkpoint

#: spans with notes kept at once (a span ends within its run: far fewer are open)
LIMIT = 50_000


class BuiltRecords:
    """(trace id, span id) -> the records noted for that span, in the order they went on."""

    def __init__(self, limit: int = LIMIT):
        self._by_span: dict[tuple[int, int], list[Artifact | Checkpoint]] = {}
        self._lock = threading.Lock()
        self._limit = limit

    def note(self, span: Span, record: Artifact | Checkpoint) -> None:
        ctx = span.get_span_context()
        key = (ctx.trace_id, ctx.span_id)
        with self._lock:
            held = self._by_span.get(key)
            if held is None:
                if len(self._by_span) >= self._limit:
                    del self._by_span[next(iter(self._by_span))]
                held = self._by_span[key] = []
            held.append(record)

    def take(self, trace_id: int, span_id: int) -> list[Artifact | Checkpoint] | None:
        with self._lock:
            return self._by_span.pop((trace_id, span_id), None)
