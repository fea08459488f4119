"""The memory part of a forget's trace: a span per operation the forget made on the agent's
memory store away from an agent's path, named and attributed after the GenAI conventions' memory
span (``semconv.MEMORY``: ``delete_memory`` / ``upsert_memory``, ``gen_ai.memory.store.id``,
``.record.count``, ``.record.id`` for one record).

- the commit's store rollback (the replay's overlay applied: items written since the fork point
  put back or deleted, the replay's own writes put): children of ``unsee.forget.commit``;
- an erasure route's deletes (``ErasureResult.memory``): children of ``unsee.erasure <route>``.
  The memory store route of a forget's erasure deletes no record today (the commit rolled the
  items back before it runs); a route that does shows up here.

Pure (changes in, span specs out), tested by table. The changes carry keyed hashes only
(``middleware.memory.MemoryChange``): no namespace, key or value reaches the trace, which
outlives the erasure in trace backends.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from unsee.middleware.semconv import MEMORY, memory_attributes
from unsee.middleware.trace_after import SpanSpec

__all__ = ["memory_spans"]


def memory_spans(specs: list[SpanSpec], placed: Iterable[tuple[str, Iterable[Any]]],
                 conv: dict[str, Any]) -> list[SpanSpec]:
    """A span per change (``MemoryChange``), the child of the last span of ``specs`` of the name
    its place gives, at the change's own times (else its parent's). ``placed``: (parent span
    name, changes) pairs; changes whose parent is not in ``specs`` are left out (a commit the
    trace has no phase for). ``conv``: attributes every span of the trace carries."""
    at = {s.name: i for i, s in enumerate(specs)}  # (the last of a name wins)
    out: list[SpanSpec] = []
    for name, changes in placed:
        parent = at.get(name)
        if parent is None:
            continue
        p = specs[parent]
        for c in changes:
            one = c.records[0] if c.count == 1 and len(c.records) == 1 else None
            attrs = {**conv, **memory_attributes(c.op, c.store, c.count, one)}
            if one is None and c.records:
                attrs[MEMORY["record_ids"]] = list(c.records)
            start, end = (c.start_ns, c.end_ns) if c.start_ns and c.end_ns else (p.start_ns, p.end_ns)
            out.append(SpanSpec(c.op, start, end, attrs, parent=parent))
    return out
