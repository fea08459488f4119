"""The first step of a revocation event: where the target entered (tau) and what it reached (I(z)).

``locate`` reads the session as recorded now, through the ``SessionReader``
port, before anything changes: the pipeline uses it to find the other
sessions the target spread to and to keep, for the view, the graph as it was
before the forget (the erasure removes that graph's target-bearing parts).
It never raises for an event the forget will refuse: it returns None and the
forget says what is wrong, with the right error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from unsee.middleware.graph import ProvenanceGraph

from .event import RevocationEvent
from .plan import observed_entries
from .ports import SessionReader


@dataclass(frozen=True)
class Located:
    """The target in one session before a forget: its graph, entry artifact and closure I(z)."""

    graph: ProvenanceGraph
    entry: Any
    closure: frozenset[str]


def locate(sessions: SessionReader, session: Any, event: Any) -> Located | None:
    """``event.target``'s entry and I(z) in ``session``; None where the forget will refuse the
    event (bad arguments, unknown session, target not found, ...: the forget raises for those)."""
    if not isinstance(event, RevocationEvent) or not isinstance(session, str):
        return None
    try:
        g = sessions.graph(session)
        hit = g.locate(event.target, event.source)
        entries = observed_entries(g, event.target, hit, event.source)
        return Located(g, g.get(hit.artifact_id), frozenset(g.taint(sorted(entries))))
    except Exception:
        return None
