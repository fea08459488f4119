"""Automatic revocation: detector findings become revocation events.

Two ways a verdict arrives (``u.detect(detectors, timing=..., policy=...)``; the service's ``mode``):

- ``timing="sync"``: detectors run on each tool return as it happens, inside
  the recording. With ``policy="auto"`` the flagged spans are removed before
  the model or the record ever see them (that observation *is* the
  counterfactual one: nothing to replay later). Each screening's verdict
  (``allow`` or ``deny``) is a ``run_guardrail`` span under the tool call's
  span, timed on the agent's thread and sent off its path (``spans``).
- ``timing="async"`` (the common case: the verdict is late): ``scan(session)``
  runs detectors over the recorded observations after the agent processed
  them; each finding becomes ``RevocationEvent(target=<flagged span>,
  source=<observation artifact>, raised_by="detector")`` and, per policy,
  is forgotten at once (``auto``: B7, waiting for a run in progress to end),
  queued for an operator (``queue``: ``pending``/``apply_pending``) or only
  reported (``alert``). ``start(interval)`` scans in a background thread.

The service is also an *endorser* for the IFC plugin
(``u.ifc(sinks, endorse=svc)``): :meth:`DetectionService.endorsed` vets
observations as recorded now (detectors find nothing in them), caching each
verdict per content hash, so an observation sanitized by a forget is vetted
again; each observation it is asked about gets a guardrail span under the sink
call's span, like a sync screening.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal

from langchain_core.messages import ToolMessage
from opentelemetry import trace

from unsee.middleware.context import current_session, logical_session
from unsee.middleware.hooks import tool_return_artifact_id
from unsee.middleware.records import OBSERVATION_TYPES, ArtifactType
from unsee.middleware.trace_after import AfterSpans, emit

from .base import Finding, ToolSpec, bind_tools
from .errors import DetectorFailed, InvalidSetting
from .hooks import run_detectors
from .trace import screening_span, verdict_span

log = logging.getLogger("unsee.detect")
Policy = Literal["auto", "queue", "alert"]
Mode = Literal["sync", "async"]


def redact(text: str, findings: Iterable[Finding]) -> str:
    """``text`` without the flagged spans (merged findings do not overlap)."""
    out, pos = [], 0
    for f in sorted(findings, key=lambda f: f.start):
        out.append(text[pos:f.start])
        pos = max(pos, f.end)
    out.append(text[pos:])
    return "".join(out)


def tool_specs(tools: Iterable[Any]) -> tuple[ToolSpec, ...]:
    """The agent's LangChain tools as :class:`~.base.ToolSpec` (name, description, argument names,
    declared effect); provider-side tools given as dicts are left out."""
    from unsee.middleware.tools import effect_of

    out = []
    for t in tools or ():
        name = getattr(t, "name", None)
        if not isinstance(name, str) or isinstance(t, dict):
            continue
        try:
            args = tuple(getattr(t, "args", None) or ())
        except Exception:  # a tool whose schema cannot be built still has a name
            args = ()
        out.append(ToolSpec(name, str(getattr(t, "description", "") or ""), args, effect_of(t)))
    return tuple(out)


@dataclass
class Verdict:
    session_id: str
    artifact_id: str
    finding: Finding
    event: Any
    #: superseded: an earlier forget already removed the flagged text or its observation
    status: Literal["applied", "queued", "alerted", "failed", "superseded"]
    report: Any = None
    error: str | None = None
    #: the span context of its ``run_guardrail`` span (None: not traced); a forget it raises links to it
    span: Any = None


@dataclass
class DetectionService:
    #: what a forget needs (``unsee.plugins.forget.ForgetContext``): sessions to read, the operator's ports
    ctx: Any
    detectors: list
    mode: Mode = "async"
    policy: Policy = "auto"
    min_score: float = 0.5
    strategy: str = "B7"
    #: what B7 does with external calls only the counterfactual makes: "defer" | "ask" | "execute"
    side_effects: str = "defer"
    #: the forget to apply a verdict with: ``forget(session, event, strategy, wait=, side_effects=)``
    #: (the facade passes its revocation pipeline's ``run``, which also erases the record); default:
    #: a pipeline over ``ctx`` alone (no erasure)
    forget: Callable[..., Any] | None = None
    verdicts: list[Verdict] = field(default_factory=list)
    #: where each acted-on verdict goes as a ``run_guardrail`` span (``trace.py``; an OpenTelemetry
    #: ``Tracer``; None: not traced)
    tracer: Any = None
    #: where the guardrail spans of screenings on an agent's path go (``later(build)``, e.g.
    #: ``unsee.middleware.trace_after.AfterSpans`` over the recorder's deferred queue); None: sent
    #: at once through ``tracer`` (None too: not traced)
    spans: Any = None
    #: session -> (artifact id, content hash) that scan() has acted on
    _scanned: dict[str, set[tuple[str, str]]] = field(default_factory=dict)
    #: (artifact id, content hash) -> the detectors' findings in that content; shared by scan()
    #: and endorsed(), so a detector (an LLM judge: a model call) reads each content once
    _findings: dict[tuple[str, str], tuple[Finding, ...]] = field(default_factory=dict)
    #: session -> the agent's tools, as its model calls list them (tool-aware detectors use them)
    _tools: dict[str, tuple[ToolSpec, ...]] = field(default_factory=dict)
    #: the detectors bound to one set of tools
    _bound: dict[tuple[ToolSpec, ...], list] = field(default_factory=dict)
    #: the last model call's tool objects and their specs (a tool's argument schema is built
    #: once per agent, not on every model call)
    _specs: tuple[tuple, tuple[ToolSpec, ...]] = ((), ())
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __post_init__(self) -> None:
        for name, allowed in (("mode", ("sync", "async")), ("policy", ("auto", "queue", "alert")),
                              ("side_effects", ("defer", "ask", "execute"))):
            if getattr(self, name) not in allowed:
                raise InvalidSetting(name, getattr(self, name), allowed)
        if self.spans is None and self.tracer is not None:
            self.spans = AfterSpans(self.tracer)

    # -- an interceptor: tools learned from model calls, tool returns screened (sync) -----
    def _learn(self, request) -> None:
        tools = tuple(getattr(request, "tools", None) or ())
        seen, specs = self._specs
        if len(seen) != len(tools) or any(a is not b for a, b in zip(seen, tools)):
            try:
                specs = tool_specs(tools)
            except Exception:  # learning the tools must never stop the agent
                return
            self._specs = (tools, specs)
        if specs:  # (a replay's scratch thread screens for the session it rebuilds)
            self._tools[logical_session()] = specs

    def detectors_for(self, session: str) -> list:
        """The detectors, bound to the session's tools (as its agent's model calls listed them)."""
        tools = self._tools.get(session, ())
        if not tools:
            return self.detectors
        with self._lock:
            bound = self._bound.get(tools)
            if bound is None:
                if len(self._bound) >= 64:
                    self._bound.clear()
                bound = self._bound[tools] = [bind_tools(d, tools) for d in self.detectors]
        return bound

    def model_call(self, request, handler):
        self._learn(request)
        return handler(request)

    async def amodel_call(self, request, handler):
        self._learn(request)
        return await handler(request)

    def _screen(self, result, request=None):
        if self.mode != "sync" or not isinstance(result, ToolMessage) or not isinstance(result.content, str):
            return result
        aid = tool_return_artifact_id(result.tool_call_id or "")
        session = current_session()[0] or ""
        logical = logical_session()
        start = time.time_ns()
        found = run_detectors(self.detectors_for(logical), result.content, aid, min_score=self.min_score)
        if self.spans is not None:  # (laid out and sent off the agent's path)
            tool = (getattr(request, "tool_call", None) or {}).get("name") or result.name
            self.spans.later(partial(screening_span, logical, aid, tuple(found), screening="sync",
                                     policy=self.policy, hash_text=self.ctx.hasher.hash, start_ns=start,
                                     end_ns=time.time_ns(), parent=trace.get_current_span().get_span_context(),
                                     tool_call_id=result.tool_call_id or None, tool_name=tool))
        if not found:
            return result
        for f in found:
            self.verdicts.append(Verdict(session, aid, f, None, "applied" if self.policy == "auto" else "alerted"))
        if self.policy != "auto":
            return result
        return result.model_copy(update={"content": redact(result.content, found)})

    def tool_call(self, request, handler):
        return self._screen(handler(request), request)

    async def atool_call(self, request, handler):
        return self._screen(await handler(request), request)

    # -- async: late verdicts ---------------------------------------------------
    def scan(self, session: str, *, wait: bool = True, max_rounds: int = 8) -> list[Verdict]:
        """Run the detectors over observations not scanned yet; act per policy.

        An observation is scanned once per content (artifact id + content
        hash). With ``policy="auto"`` each forget changes the state, so the
        findings left are checked against it before they are applied: one whose
        observation or flagged text the counterfactual no longer has is
        ``superseded``; observations the replay recorded anew are scanned in a
        further round (at most ``max_rounds``).
        """
        out: list[Verdict] = []
        for _ in range(max_rounds):
            t0 = time.time_ns()
            found = self._unscanned_findings(session)
            t1 = time.time_ns()
            if not found:
                break
            changed = False
            state = None  # the graph after the last applied forget, loaded when a finding needs it
            for aid, f in found:
                v = self._verdict(session, aid, f)
                if self.policy == "auto":
                    if changed:
                        state = state or self.ctx.sessions.graph(session)
                    if state is not None and not (aid in state and f.text in (state.content(aid) or "")):
                        v.status = "superseded"
                    else:
                        self._trace(v, t0, t1)
                        self._apply(v, wait)
                        if v.status == "applied":
                            changed, state = True, None
                else:
                    self._trace(v, t0, t1)
                out.append(v)
                self.verdicts.append(v)
            if not changed:
                break
        return out

    def _findings_in(self, graph: Any, a: Any, session: str = "") -> tuple[Finding, ...]:
        """The detectors' findings in an artifact's recorded content (memoized per content hash)."""
        key = (a.id, a.content_hash)
        with self._lock:
            hit = self._findings.get(key)
        if hit is None:
            hit = tuple(run_detectors(self.detectors_for(session), graph.content(a.id) or "", a.id,
                                      min_score=self.min_score))
            with self._lock:
                self._findings[key] = hit
        return hit

    def _unscanned_findings(self, session: str) -> list[tuple[str, Finding]]:
        g = self.ctx.sessions.graph(session)
        new: list[tuple[str, Finding]] = []
        for a in g:
            if a.type not in OBSERVATION_TYPES or a.type is ArtifactType.USER_INPUT:
                continue
            with self._lock:
                seen = self._scanned.setdefault(session, set())
                if (a.id, a.content_hash) in seen:
                    continue
                seen.add((a.id, a.content_hash))
            new += [(a.id, f) for f in self._findings_in(g, a, session)]
        return new

    def _trace(self, v: Verdict, start_ns: int, end_ns: int) -> Any:
        """The verdict's guardrail span (sent now; its span context, None when not traced). An
        observer: a failure to send it is logged, never raised into the scan."""
        if self.tracer is None:
            return None
        try:
            spec = verdict_span(v.session_id, v.artifact_id, v.finding, policy=self.policy,
                                hash_text=self.ctx.hasher.hash, start_ns=start_ns, end_ns=end_ns,
                                event_id=getattr(v.event, "event_id", None))
            v.span = emit(self.tracer, [spec])[0]
            return v.span
        except Exception:
            log.warning("could not emit the guardrail span of a verdict in %s", v.session_id, exc_info=True)
            return None

    def _verdict(self, session: str, aid: str, f: Finding) -> Verdict:
        from unsee.plugins.forget import RevocationEvent

        event = RevocationEvent(target=f.text, source=aid, reason=f"{f.detector}: {f.reason}", raised_by="detector")
        return Verdict(session, aid, f, event, {"auto": "applied", "queue": "queued", "alert": "alerted"}[self.policy])

    def _apply(self, v: Verdict, wait: bool = True) -> None:
        from unsee.plugins.forget import RevocationContext, RevocationPipeline, raised_from

        forget = self.forget or RevocationPipeline(RevocationContext(forget=self.ctx)).run
        try:
            with raised_from(v.span):  # the forget's trace links to the verdict's guardrail span
                v.report = forget(v.session_id, v.event, self.strategy, wait=wait, side_effects=self.side_effects)
            v.status = "applied"
        except Exception as exc:  # reported on the verdict, never lost
            log.warning("automatic revocation failed: %s", exc)
            v.status, v.error = "failed", f"{type(exc).__name__}: {exc}"

    # -- endorsement for the IFC plugin ----------------------------------------
    def endorsed(self, session: str, graph: Any, artifact_ids: Iterable[str]) -> set[str]:
        """The observations among ``artifact_ids`` whose recorded content the detectors vet.

        Run on demand (the IFC asks at a sink call, so this is where a verdict
        is awaited), cached per content hash. A detector that fails vets
        nothing (the call stays blocked) and is logged. Each verdict is a guardrail span under
        the current span (the sink call's), sent off the caller's path (``spans``).
        """
        out: set[str] = set()
        screened: list[tuple[str, tuple[Finding, ...], str, bool, int, int]] = []
        for aid in artifact_ids:
            if aid not in graph:
                continue
            a = graph.get(aid)
            if a.type not in (ArtifactType.TOOL_RETURN, ArtifactType.MEMORY_READ) or not a.attrs.get("executed", True):
                continue  # only observations of the world: never unsee's own "not executed" messages
            try:
                cached = (a.id, a.content_hash) in self._findings
                start = time.time_ns()
                found = self._findings_in(graph, a, session)
                screened.append((aid, found, "memory" if a.type is ArtifactType.MEMORY_READ else "tool_call",
                                 cached, start, time.time_ns()))
                if not found:
                    out.add(aid)
            except DetectorFailed as exc:
                log.warning("endorsement of %s in %s failed: %s", aid, session, exc)
        if screened and self.spans is not None:
            self.spans.later(partial(_endorsements, logical_session(), screened, policy=self.policy,
                                     hash_text=self.ctx.hasher.hash,
                                     parent=trace.get_current_span().get_span_context()))
        return out

    def pending(self) -> list[Verdict]:
        return [v for v in self.verdicts if v.status == "queued"]

    def apply_pending(self) -> list[Verdict]:
        done = []
        for v in self.pending():
            self._apply(v)
            done.append(v)
        return done

    def start(self, interval: float = 1.0) -> None:
        """Scan every session in a background thread until ``stop()``."""
        from unsee.plugins.forget import is_scratch_thread

        def loop():
            while not self._stop.wait(interval):
                for s in self.ctx.sessions.sessions():
                    if is_scratch_thread(s.session_id):
                        continue
                    try:
                        self.scan(s.session_id)
                    except Exception:
                        log.exception("detector scan of %s failed", s.session_id)

        self._stop.clear()
        self._thread = threading.Thread(target=loop, name="unsee-detect", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)


def _endorsements(session: str, screened: list, *, policy: str, hash_text: Callable[[str], str],
                  parent: Any) -> list[Any]:
    """The guardrail spans of one endorsement request, one per observation screened."""
    return [screening_span(session, aid, found, screening="endorsement", policy=policy, hash_text=hash_text,
                           start_ns=start, end_ns=end, parent=parent, target_subtype=subtype, cached=cached)
            for aid, found, subtype, cached, start, end in screened]
