"""Where the target entered a session (tau) and what it reached (I(z)): located once.

``locate`` reads the session as recorded now, through the ``SessionReader``
port, and is the forget's only search for the target: the plan, the spread to
other sessions and the view's record all take the ``Located`` it returns (the
graph as it was before the forget; the erasure removes its target-bearing
parts). It raises the typed error of an event the forget cannot take:
``SessionNotFound``, ``IncompleteSession`` (a recording failed), ``AmbiguousTarget``
(no ``source`` and the target entered through several), ``TargetNotFound``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from unsee.middleware.errors import AmbiguousTarget, IncompleteSession
from unsee.middleware.graph import Hit, ProvenanceGraph

from .event import RevocationEvent
from .plan import observed_entries
from .ports import SessionReader


@dataclass(frozen=True)
class Located:
    """The target in one session before a forget: its graph, entry artifact and closure I(z)."""

    graph: ProvenanceGraph
    entry: Any
    closure: frozenset[str]
    #: where the graph found it (tau's step, every occurrence)
    hit: Hit | None = None
    #: the observations the replay removes it from (``plan.observed_entries``)
    entries: frozenset[str] = frozenset()
    #: the session's record (``SessionInfo``) as read before the graph
    info: Any = None


def locate(sessions: SessionReader, session: str, event: RevocationEvent,
           records_complete: Callable[[Any, ProvenanceGraph], None] | None = None) -> Located:
    """``event.target``'s entry and I(z) in ``session`` (the typed errors in the module docstring).
    ``records_complete(info, graph)``: a check that the records hold the whole session, run before
    the search (a target in messages the records lack is not "not found": the check says why)."""
    info = sessions.session(session)  # SessionNotFound
    if info.incomplete:
        raise IncompleteSession(session, info.failures)
    g = sessions.graph(session)
    if records_complete is not None:
        records_complete(info, g)
    if event.source is None:
        sources = g.entry_sources(event.target)
        if len(sources) > 1:
            raise AmbiguousTarget(sources)
    hit = g.locate(event.target, event.source)  # TargetNotFound / InvalidArgument
    entries = observed_entries(g, event.target, hit, event.source)
    return Located(g, g.get(hit.artifact_id), g.taint(sorted(entries)), hit, entries, info)
