"""The IFC interceptor: the thin adapter between the pure policy and agents.

Installed for every session (``u.ifc(...)``), it sees each tool call inside
the recording. For tools with identifier sinks it labels the session's
provenance graph, collects identifiers by label and lets the policy decide
(labels and identifiers kept per session and brought up to date as its graph
grows, :class:`~.index.SessionDecisions`: a decision costs what the call
carries, not the session's length):
``block`` answers the model with an error tool message that says why (the
tool never runs), ``ask`` raises a LangGraph interrupt for a human (resume
with ``Command(resume=True)`` to allow), ``audit`` lets it run. Every
decision is a span event on the tool's span with its evidence (artifact ids,
labels, sinks, keyed hashes of the identifiers: never their text), and a
``run_guardrail unsee.ifc`` span under it (:mod:`.trace`): the agent's thread
takes the decision's times and the tool span's context, and hands the span to
:class:`GuardrailSpans` (laid out and sent later, off the agent's path).

Endorsement (``u.ifc(..., endorse=u.detect(...))``): when a call would be
flagged, the untrusted observations that introduced its identifiers are put to
an *endorser* (anything with ``endorsed(session, graph, artifact_ids) ->
set[str]``, such as the injection-detection service): those whose recorded
content it vets become ``trusted`` + ``endorsed`` and the call is decided
again. A sink call is thus where a detector's verdict is awaited: with the
detector screening synchronously, or forgetting late verdicts (B7), the
observations left in the state are the vetted ones, and identifiers the task
legitimately read from them (the IBAN on a bill the user asked to pay) pass.

Interceptors fail closed: an error in deciding propagates to the run.

What the interceptor reads of the recording is :class:`RecordedSessions`
(whether a session was recorded, and its provenance graph), a
:class:`Hasher` (keyed hashes for span events) and :class:`GuardrailSpans`
(where guardrail spans go: the facade hands the home's tracer over the
recorder's deferred queue, ``unsee.middleware.trace_after.AfterSpans``; without
one they are sent at once through the global tracer provider); the facade hands
over its pieces (:class:`SessionGraphs`), never itself.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, MutableMapping
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

from langchain_core.messages import ToolMessage
from opentelemetry import trace

from unsee.middleware.context import configurable, current_session
from unsee.middleware.graph import ProvenanceGraph
from unsee.middleware.tools import not_executed
from unsee.middleware.trace_after import AfterSpans, SpanSpec

from .decision import Decision
from .index import SessionDecisions
from .policy import SinkSpec, _check_mode, declared_sinks, parse_sinks
from .trace import decision_span

EVENT = "unsee.ifc.decision"


class RecordedSessions(Protocol):
    """The recorded sessions the interceptor decides on."""

    def has_session(self, session_id: str) -> bool: ...
    def graph(self, session_id: str) -> ProvenanceGraph: ...


class Hasher(Protocol):
    """The keyed hash span events carry instead of an identifier."""

    def hash(self, text: str) -> str: ...


class GuardrailSpans(Protocol):
    """Where the decisions' guardrail spans go: ``later(build)`` calls the layout function
    ``build`` (returning a ``SpanSpec`` or a list of them) and sends them, later and off the
    agent's path, in the order handed over (``unsee.middleware.trace_after.AfterSpans``)."""

    def later(self, build: Callable[[], SpanSpec | Iterable[SpanSpec]]) -> None: ...


@dataclass(frozen=True)
class SessionGraphs:
    """A :class:`RecordedSessions` made of two functions (what a facade hands over)."""

    has_session: Callable[[str], bool]
    graph: Callable[[str], ProvenanceGraph]


class Endorser(Protocol):
    """Vets observations for the IFC policy (e.g. ``DetectionService``)."""

    def endorsed(self, session: str, graph: Any, artifact_ids: Iterable[str]) -> set[str]: ...


class BoundedLRU(MutableMapping):
    """A size-bounded, thread-safe mapping (least recently used entries go first)."""

    def __init__(self, size: int):
        self.size = size
        self._d: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    def __getitem__(self, k):
        with self._lock:
            self._d.move_to_end(k)
            return self._d[k]

    def __setitem__(self, k, v):
        with self._lock:
            self._d[k] = v
            self._d.move_to_end(k)
            while len(self._d) > self.size:
                self._d.popitem(last=False)

    def __delitem__(self, k):
        with self._lock:
            del self._d[k]

    def __contains__(self, k):
        with self._lock:
            return k in self._d

    def __iter__(self):
        return iter(list(self._d))

    def __len__(self):
        return len(self._d)


class IFCInterceptor:
    def __init__(self, sessions: RecordedSessions, hasher: Hasher, sinks: Iterable[SinkSpec | str] = (), *,
                 mode: str = "block", trusted_sources: Iterable[str] = (), reset_at_trusted_sources: bool = True,
                 endorse: Endorser | None = None, spans: GuardrailSpans | None = None):
        self.sessions = sessions
        self.hasher = hasher
        #: (no port handed over: sent at once, through the global tracer provider)
        self.spans: GuardrailSpans = spans if spans is not None else AfterSpans(trace.get_tracer("unsee.ifc"))
        self.endorser: Endorser | None = None
        self.set_endorser(endorse)
        self.sinks = tuple(parse_sinks(list(sinks)))
        self.mode = _check_mode(mode)  # (refused here, not at the first tool call it would decide)
        self.trusted_sources = tuple(trusted_sources)
        self.reset_at_trusted_sources = reset_at_trusted_sources
        self._revoked: dict[str, set[str]] = {}
        self._lock = threading.Lock()
        # identifiers per (artifact, content hash): a long session is extracted once, not at every sink call
        self._extracted: BoundedLRU = BoundedLRU(200_000)
        # per session: labels and an identifier index kept up to date as the graph grows (plugins/ifc/index.py)
        self._sessions: BoundedLRU = BoundedLRU(64)
        self.decisions: list[Decision] = []

    def set_endorser(self, endorse: Endorser | None) -> None:
        if endorse is not None and not callable(getattr(endorse, "endorsed", None)):
            raise TypeError("endorse= needs an object with endorsed(session, graph, artifact_ids), "
                            f"not {type(endorse).__name__}")
        self.endorser = endorse

    # -- revocation (B8/B9) ------------------------------------------------
    def revoke(self, session: str, artifact_ids: Iterable[str]) -> None:
        """Label these artifacts of ``session`` revoked (identifiers from them are blocked)."""
        with self._lock:
            self._revoked.setdefault(session, set()).update(artifact_ids)

    def revoked(self, session: str) -> frozenset[str]:
        with self._lock:
            return frozenset(self._revoked.get(session, ()))

    # -- interception --------------------------------------------------------
    def _sinks_for(self, request) -> tuple[SinkSpec, ...]:
        name = request.tool_call.get("name", "")
        own = tuple(s for s in self.sinks if s.tool == name)
        tool = getattr(request, "tool", None)
        return own + (declared_sinks(tool, name) if tool is not None else ())

    def _decide(self, request) -> Decision | None:
        sinks = self._sinks_for(request)
        if not sinks:
            return None
        thread, _ = current_session()
        if not self.sessions.has_session(thread):
            return None
        name, args = request.tool_call.get("name", ""), request.tool_call.get("args", {}) or {}
        start = time.time_ns()
        decision = self.decision_for(thread, name, args, sinks)
        end = time.time_ns()
        span = trace.get_current_span()  # (the tool call's execute_tool span)
        span.add_event(EVENT, decision.to_event(hash_of=self.hasher.hash))
        self.decisions.append(decision)
        # its guardrail span: only what changes or is cheap is taken here; the layout, the hashes
        # and the span itself are made off the agent's path
        session = str(configurable().get("unsee_session") or thread)  # (a replay's: the session it rebuilds)
        self.spans.later(partial(decision_span, decision, session=session, thread=thread,
                                 tool_call_id=str(request.tool_call.get("id") or ""), parent=span.get_span_context(),
                                 hash_text=self.hasher.hash, start_ns=start, end_ns=end))
        return decision

    def decision_for(self, thread: str, tool: str, args: dict, sinks: Iterable[SinkSpec]) -> Decision:
        """The policy's decision on one call of ``tool`` with ``args`` in session ``thread``
        (endorsement included; no span event, not added to ``decisions``).

        Costs what was recorded since the session's last decision and what the call's sink
        values may hold, not the session's length (``SessionDecisions``); the decision is
        :func:`~.policy.evaluate`'s on the session's graph.
        """
        graph = self.sessions.graph(thread)
        revoked = self.revoked(thread) | self.revoked(graph.session_id or thread)
        state = self._state(thread)

        def run(endorsed=frozenset()):
            return state.evaluate(graph, tool, args, sinks, trusted_sources=self.trusted_sources, revoked=revoked,
                                  mode=self.mode, reset_at_trusted_sources=self.reset_at_trusted_sources,
                                  endorsed=endorsed)

        decision = run()
        if decision.flagged and self.endorser is not None:
            asked = state.unvetted_sources(graph, decision.artifact_ids)
            endorsed = frozenset(self.endorser.endorsed(thread, graph, asked)) & frozenset(asked)
            if endorsed:
                decision = run(endorsed)
        return decision

    def _state(self, thread: str) -> SessionDecisions:
        with self._lock:
            try:
                return self._sessions[thread]
            except KeyError:
                state = self._sessions[thread] = SessionDecisions(cache=self._extracted)
                return state

    def _blocked(self, request, decision: Decision) -> ToolMessage:
        tc = request.tool_call
        return not_executed(f"[blocked by unsee IFC] {decision.reason}", tc.get("id"), tc.get("name"), "ifc")

    def _gate(self, request, decision: Decision | None) -> ToolMessage | None:
        if decision is None or decision.allowed or decision.action == "audit":
            return None
        if decision.action == "ask":
            from langgraph.types import interrupt

            answer = interrupt({"unsee_ifc": decision.to_event(hash_of=self.hasher.hash),
                                "reason": decision.reason})
            return None if answer in (True, "approve", "yes") else self._blocked(request, decision)
        return self._blocked(request, decision)

    def model_call(self, request, handler):
        return handler(request)

    async def amodel_call(self, request, handler):
        return await handler(request)

    def tool_call(self, request, handler):
        blocked = self._gate(request, self._decide(request))
        return blocked if blocked is not None else handler(request)

    async def atool_call(self, request, handler):
        blocked = self._gate(request, self._decide(request))
        return blocked if blocked is not None else await handler(request)
