"""The data of ``unsee view`` for one session, gathered from the records (a thin adapter).

``session_payload`` reads what the page shows through a ``SessionRecords`` port
(the session's provenance graph, its recorded spans for the IFC decisions, its
vault texts only when asked) and the forget records under the home, runs the
default detector over the observations, and hands it all to ``build_payload``
(pure). Unknown session, event or target: typed errors; nothing is written.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, Protocol

from unsee.middleware.errors import InvalidArgument

from .errors import UnknownEvent
from .payload import build_payload, detector_findings, ifc_decisions
from .records import load_forget_record


class SessionRecords(Protocol):
    """What the page reads of a session's records (the provenance store satisfies it)."""

    def require(self, session_id: str) -> None: ...
    def contents(self, session_id: str) -> dict[str, str]: ...
    def spans(self, session_id: str) -> list[Any]: ...


def default_findings(graph: Any) -> dict[str, list[dict[str, Any]]]:
    """The default detector's findings on the graph's observations, bound to the session's tools."""
    from unsee.plugins.detect import SignalDetector, ToolSpec, bind_tools, run_detectors

    tools = {a.attrs.get("tool"): a.attrs.get("effect") for a in graph if a.type.value == "tool_call"}
    det = bind_tools(SignalDetector(), [ToolSpec(n, effect=e) for n, e in tools.items() if n])
    return detector_findings(graph, lambda text, aid: run_detectors([det], text, aid, min_score=0.5))


def session_payload(records: SessionRecords, graph_of: Callable[[str], Any], home: str | os.PathLike,
                    thread_id: str, *, target: str | None = None, source: str | None = None,
                    event: str | None = None, content: bool = False, detect: bool = True,
                    collapse: bool | None = None, orphaned: Callable[[str], list] | None = None) -> dict[str, Any]:
    """The page's data (see ``Unsee.view``); ``graph_of`` gives the session's graph as recorded now,
    ``orphaned`` the session's orphaned memory after a fork (JSON records)."""
    if target is not None and (not isinstance(target, str) or not target.strip()):
        raise InvalidArgument("target must be a non-empty text")
    records.require(thread_id)
    g = graph_of(thread_id)
    record = load_forget_record(home, event, graph=g) if event is not None else None
    if record is not None and record.session_id != thread_id:
        raise UnknownEvent(f"forget {event} was of session {record.session_id!r}, not {thread_id!r}")
    entry, closure = None, frozenset()
    if target is not None:
        hit = g.locate(target, source)
        entry, closure = g.get(hit.artifact_id), g.taint(hit)
    return build_payload(g, closure=closure, entry=entry, source=source,
                         contents=records.contents(thread_id) if content else None,
                         findings=default_findings(g) if detect else {},
                         decisions=ifc_decisions(records.spans(thread_id)), forget=record, collapse=collapse,
                         orphaned=orphaned(thread_id) if orphaned is not None else ())
