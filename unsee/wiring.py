"""The ports a home hands the plugins: the facade builds them here and decides nothing.

Like OpenTelemetry's ``TracerProvider`` wiring processors it never implements,
``Unsee`` makes its parts (store, recorder, hasher, environments, ledger) and
these functions put them into the plugins' context objects: the revocation
pipeline's (``unsee.plugins.forget.RevocationContext``) and the erasure
plugin's (``unsee.plugins.erasure.ErasureContext``). Parts made after the
facade exists (the local model, the IFC interceptor, the ledger) are read
when a forget or an erasure runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from .config import version

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

    from unsee.middleware.graph import ProvenanceGraph
    from unsee.middleware.hashing import ContentHasher
    from unsee.middleware.recorder import Recorder
    from unsee.middleware.records import SessionInfo
    from unsee.middleware.store import ProvenanceStore
    from unsee.sandbox import Ledger


class Unsee(Protocol):
    """What the wiring reads from the facade (``unsee.core.Unsee`` is one): its parts and the
    actions a port forwards to, never its decisions. A protocol, not the class: core imports
    this module."""

    home: Path
    store: ProvenanceStore
    recorder: Recorder
    hasher: ContentHasher
    tracer_provider: TracerProvider
    #: the session sandboxes (``unsee.plugins.tools.SessionEnvironments``), None without Docker/local
    environments: Any
    #: the local model (its KV cache is cropped by a replay), None until one is made
    local_model: Any
    #: the IFC interceptor, None until ``ifc()`` enables it
    ifc_interceptor: Any
    #: the default retention policy (``unsee.plugins.erasure.RetentionPolicy``), None: keep everything
    retention_policy: Any

    @property
    def ledger(self) -> Ledger: ...

    def existing_ledger(self) -> Ledger | None: ...

    @property
    def revocations(self) -> Any: ...

    def flush(self) -> None: ...

    def session(self, thread_id: str) -> SessionInfo: ...

    def sessions(self) -> list[SessionInfo]: ...

    def graph(self, thread_id: str) -> ProvenanceGraph: ...

    def erase(self, thread_id: str, event: Any, *, agent: Any = None) -> Any: ...

    def erase_subject(self, threads: Any = (), namespaces: Any = (), targets: Any = (), *, agent: Any = None,
                      subject: Any = None) -> Any: ...

    def _shared_db(self) -> Any: ...


def revocation_pipeline(u: Unsee) -> Any:
    """The ``RevocationPipeline`` over ``u``'s ports."""
    from unsee.plugins.forget import ForgetContext, RevocationContext, RevocationPipeline, SessionView
    from unsee.plugins.view import ForgetRecordKeeper

    from .reconciling import ReconcileAfterForget

    forget = ForgetContext(records=u.store, runs=u.recorder, hasher=u.hasher,
                           sessions=SessionView(session=u.session, graph=u.graph, sessions=u.sessions),
                           environments=u.environments, cache=lambda: u.local_model,
                           revoker=lambda: u.ifc_interceptor)
    return RevocationPipeline(RevocationContext(forget=forget, erasure=lambda: erasure_context(u), flush=u.flush,
                                                records=ForgetRecordKeeper(u.home),
                                                tracer=lambda: u.tracer_provider.get_tracer("unsee.forget",
                                                                                            version()),
                                                after=lambda: ReconcileAfterForget(u)))


def erasure_context(u: Unsee) -> Any:
    """The erasure plugin's ports over ``u``'s home. A process without a sandbox (e.g. ``unsee
    erase`` without ``--agent``) still reaches the sandboxes the home's sessions stored."""
    from unsee.plugins.erasure import ErasureContext

    envs = u.environments
    if envs is None:
        from unsee.plugins.tools import SessionEnvironments

        envs = SessionEnvironments.stored(u.home, db=u._shared_db())
    return ErasureContext(home=u.home, records=u.store, hasher=u.hasher, ledger=u.existing_ledger, environments=envs,
                          runs=u.recorder, content_in_spans=u.recorder.content_in_spans, version=version())


def traced_erasure(u: Unsee, kind: str, run: Any, *, session: str | None = None, event_id: str | None = None) -> Any:
    """``run()`` (an erasure on its own: ``u.erase``, ``u.erase_subject``), then its trace through
    ``u``'s tracer provider (``unsee.plugins.forget.erasure_spans``); sending it is an observer:
    a failure is logged, never raised into the erasure."""
    import logging
    import time

    from unsee.plugins.forget import emit, erasure_spans

    start = time.time_ns()
    result = run()
    try:
        emit(u.tracer_provider.get_tracer("unsee.erasure", version()),
             erasure_spans(result, kind=kind, start_ns=start, end_ns=time.time_ns(), session=session,
                           event_id=event_id))
    except Exception:
        logging.getLogger("unsee.erasure").warning("could not emit the trace of an erasure", exc_info=True)
    return result


def guardrail_spans(u: Unsee, scope: str) -> Any:
    """Where a plugin's guardrail spans timed on an agent's path go: ``u``'s tracer provider, over
    the recorder's deferred queue (laid out and sent by the store's writer while the agent
    waits on a model or a tool, or by a flush), never on the agent's thread."""
    from unsee.middleware.trace_after import AfterSpans

    return AfterSpans(u.tracer_provider.get_tracer(scope, version()), defer=u.recorder.tasks.put)


def enable_ifc(u: Unsee, sinks: Any, *, on_violation: str, trusted_sources: Any, endorse: Any) -> Any:
    """``u``'s IFC interceptor, installed on its recorder the first time; a later call only
    changes the endorser. ``on_violation`` is the IFC plugin's policy ``mode``."""
    from unsee.plugins.ifc import IFCInterceptor, SessionGraphs

    if u.ifc_interceptor is not None:
        if endorse is not None:
            u.ifc_interceptor.set_endorser(endorse)
        return u.ifc_interceptor
    interceptor = IFCInterceptor(SessionGraphs(u.store.has_session, u.graph), u.hasher, sinks, mode=on_violation,
                                 trusted_sources=trusted_sources, endorse=endorse,
                                 spans=guardrail_spans(u, "unsee.ifc"))
    u.recorder.interceptors.add_global(interceptor)
    return interceptor


def detection_service(u: Unsee, detectors: Any, *, timing: str, **settings: Any) -> Any:
    """A ``DetectionService`` whose verdicts go through ``u``'s revocation pipeline, installed
    on the recorder as an interceptor whatever the timing: it learns the agent's tools from model
    calls (and, ``timing="sync"``, screens tool returns before the model sees them). ``timing``
    is the service's ``mode``."""
    from unsee.plugins.detect import DetectionService, SignalDetector

    pipeline = u.revocations
    svc = DetectionService(pipeline.ctx.forget, list(detectors or [SignalDetector()]), forget=pipeline.run,
                           tracer=u.tracer_provider.get_tracer("unsee.detect", version()),
                           spans=guardrail_spans(u, "unsee.detect"), mode=timing, **settings)
    u.recorder.interceptors.add_global(svc)
    return svc


def apply_retention(u: Unsee, thread_id: str, policy: Any, agent: Any) -> Any:
    """``policy`` (None: ``u``'s default, ``Unsee(retention=...)``) applied to the session's LangGraph
    history by the erasure plugin over ``u``'s erasure ports (it holds the session meanwhile)."""
    from unsee.plugins.erasure import apply_retention as apply

    u.flush()
    return apply(erasure_context(u), agent, thread_id, policy if policy is not None else (u.retention_policy or "all"))
