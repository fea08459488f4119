"""Where a target spread beyond its session: through shared memory (pure).

Taint inside a session follows the provenance graph; between sessions it
follows memory keys. A memory write in I(z) of session A puts a value under a
key; a later read of that key in session B that holds the target is where the
target *entered* B (a ``memory_read`` observation). ``find_spread`` walks this
breadth first — B's own I(z) may write keys C reads — and returns the
affected sessions in dependency order, each with the read it entered through
(the ``source`` a forget of it names): the earliest read of any tainted key
that holds the target. A session whose reads of tainted keys hold only
something derived from the target is listed last, as reached but not
locatable (``entry`` None): a forget cannot name it; the report says so. A
read made before the write holds an older value, so it does not hold the
target and does not count.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from unsee.middleware.graph import ProvenanceGraph
from unsee.middleware.records import ArtifactType

from .ports import SessionReader


@dataclass(frozen=True)
class Spread:
    """One session the target reached from another one through a memory key."""

    session_id: str
    via_key: str
    from_session: str
    #: the memory read the target entered through (None: only something derived from it was read)
    entry: str | None


def _written_keys(g: ProvenanceGraph, closure: Iterable[str]) -> list[str]:
    keys = []
    for aid in sorted(closure, key=lambda i: g.get(i).seq if i in g else 0):
        a = g.get(aid) if aid in g else None
        if a is not None and a.type is ArtifactType.MEMORY_WRITE:
            keys.extend(k for k in a.source_ids if k not in keys)
    return keys


def find_spread(origin: str, origin_graph: ProvenanceGraph, closure: Iterable[str], target: str,
           sessions: Iterable[str], graph_of: Callable[[str], ProvenanceGraph]) -> list[Spread]:
    """Sessions other than ``origin`` the target reached through memory written in ``closure``."""
    others = [s for s in sessions if s != origin]
    out: list[Spread] = []
    entered: set[str] = {origin}
    reached: dict[str, Spread] = {}  # sessions that read a tainted key but only something derived
    queue = [(origin, origin_graph, frozenset(closure))]
    graphs: dict[str, ProvenanceGraph] = {}
    while queue:
        src_session, g, clos = queue.pop(0)
        keys = _written_keys(g, clos)
        for s in others:
            if s in entered:
                continue
            gs = graphs.setdefault(s, graph_of(s))
            reads = [a for a in gs if a.type is ArtifactType.MEMORY_READ and set(a.source_ids) & set(keys)]
            if not reads:
                continue
            # the earliest read that holds the target is where it entered this session
            holding = [a for a in reads if target in (gs.content(a.id) or "")]
            if not holding:
                key = next(k for k in reads[0].source_ids if k in keys)
                reached.setdefault(s, Spread(s, key, src_session, None))
                continue
            entry = holding[0]
            key = next(k for k in entry.source_ids if k in keys)
            entered.add(s)
            reached.pop(s, None)
            out.append(Spread(s, key, src_session, entry.id))
            queue.append((s, gs, gs.taint(entry.id)))
    return out + [r for s, r in reached.items() if s not in entered]


def spread_from(sessions: SessionReader, origin: str, target: str, closure: Iterable[str],
                origin_graph: ProvenanceGraph) -> list[Spread]:
    """``find_spread`` over every user session the ``SessionReader`` knows (replays' scratch
    threads are not sessions)."""
    from .replay import is_scratch_thread

    closure = frozenset(closure)
    if not _written_keys(origin_graph, closure):
        return []  # I(z) wrote no memory key: no other session can have read it (and none is listed)
    names = [s.session_id for s in sessions.sessions() if not is_scratch_thread(s.session_id)]
    return find_spread(origin, origin_graph, closure, target, names, sessions.graph)
