"""The ``Unsee`` facade: one object per unsee home.

It owns the provenance store, the tracer provider (ours, or the user's with
our processor added), the recorder, and hands out the middleware pieces.
"""

from __future__ import annotations

import atexit
import logging
import os
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider

from unsee.middleware.errors import InvalidArgument, InvalidStoreUrl, StoreUnavailable
from unsee.middleware.graph import ProvenanceGraph
from unsee.middleware.graph_cache import GraphCache
from unsee.middleware.hashing import ContentHasher
from unsee.middleware.leases import LeaseTable
from unsee.middleware.processor import ProvenanceSpanProcessor
from unsee.middleware.recorder import EnvSnapshotter, Recorder
from unsee.middleware.records import SessionInfo
from unsee.middleware.sqldb import is_postgres_url
from unsee.middleware.store import ProvenanceStore
from unsee.middleware.store_files import ensure_home
from unsee.middleware.tokens import TokenCounter, counter_for_model, tiktoken_counter
from unsee.sandbox import Ledger, open_environment

from .config import DEFAULT_HOME, resolve_home, resolve_store, version

if TYPE_CHECKING:  # (imported where used: langchain is not needed to open a home and read it)
    from unsee.middleware.hooks import UnseeMiddleware
    from unsee.middleware.memory import Namespace, NamespaceFn, RecordingStore
    from unsee.plugins.tools import SessionEnvironments

log = logging.getLogger("unsee")

__all__ = ["DEFAULT_HOME", "Unsee", "resolve_home", "resolve_store", "version"]


def _no_sandbox():
    raise InvalidArgument("this Unsee has no sandbox: give Unsee(sandbox=...) to run sandboxed tools")


class Unsee:
    """Entry point: ``u = Unsee(home=".unsee")``; ``u.middleware()``; ``u.graph(thread_id)``.

    - ``tracer_provider``: bring your own; unsee adds its span processor to it.
      Otherwise unsee makes a private provider (the global one is untouched).
    - ``content_in_spans``: opt in to payload text on spans (off by default:
      spans carry ids, keyed hashes and token spans; text lives in the vault).
    - ``tokenizer``: a ``TokenCounter`` for token spans; by default the model's
      own tokenizer where it exposes one, else tiktoken for its name.
    - ``span_processors``: extra processors (e.g. a BatchSpanProcessor with an
      OTLP exporter to send spans live to Jaeger).
    - ``store``: ``"postgresql://..."`` keeps the provenance store, vault, journals
      and leases in that database, shared by every process and machine on it
      (docs/deployment.md); default ``$UNSEE_STORE``, else SQLite under the home.
    """

    #: id(recorder) -> the Unsee that owns it (weak: an Unsee that is gone drops out)
    _owners: weakref.WeakValueDictionary[int, Unsee] = weakref.WeakValueDictionary()

    @classmethod
    def owning(cls, recorder: Recorder) -> Unsee | None:
        """The live Unsee whose recorder this is (e.g. found on an agent's middleware), else None."""
        u = cls._owners.get(id(recorder))
        return u if u is not None and u.recorder is recorder else None

    def __init__(
        self,
        home: str | os.PathLike | None = None,
        *,
        tracer_provider: TracerProvider | None = None,
        content_in_spans: bool = False,
        tokenizer: TokenCounter | None = None,
        span_processors: list[SpanProcessor] | None = None,
        env_snapshotter: EnvSnapshotter | None = None,
        sandbox: str | Callable[[], Any] | None = None,
        sandbox_setup: Callable[[str, Any], None] | None = None,
        model: str | os.PathLike = "cpu",
        service_name: str = "unsee",
        store: str | None = None,
    ):
        url = resolve_store(store)
        if url is not None and not is_postgres_url(url):  # (before the home is made: bad input changes nothing)
            raise InvalidStoreUrl(url, "expected 'sqlite' or a postgresql:// URL")
        self.home = ensure_home(resolve_home(home))  # HomeNotADirectory
        self.store = ProvenanceStore(self.home, url)  # StoreDamaged, StoreUnavailable
        shared = self.store.shared_key("hash_key")  # one key for every machine on a shared store
        self.hasher = ContentHasher(shared) if shared else ContentHasher.from_home(self.home)
        self.processor = ProvenanceSpanProcessor(self.store)
        self._own_provider = tracer_provider is None
        if tracer_provider is None:
            tracer_provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
        tracer_provider.add_span_processor(self.processor)
        for p in span_processors or []:
            tracer_provider.add_span_processor(p)
        self.tracer_provider = tracer_provider
        self._tokenizer = tokenizer
        self.model_spec = model
        #: one sandbox environment per session when ``sandbox`` is given
        #: ("auto" = Docker when a daemon and the image are there, else local)
        self.environments: SessionEnvironments | None = None
        if sandbox is not None:
            from unsee.plugins.tools import SessionEnvironments

            factory = sandbox if callable(sandbox) else self._sandbox_factory(sandbox)
            self.environments = SessionEnvironments(factory, sandbox_setup,
                                                    registry=self.home / "sandboxes" / "registry.json")
            if env_snapshotter is None:
                env_snapshotter = self.environments.snapshot_for_thread
        self._ledger: Ledger | None = None
        self._keystore: Any = None
        self.recorder = Recorder(
            self.store,
            tracer_provider.get_tracer("unsee", "0.1.0"),
            self.hasher,
            self._counter_for,
            content_in_spans=content_in_spans,
            env_snapshotter=env_snapshotter,
        )
        # a forget and a run on one session never interleave, in any process using this home
        self.recorder.leases = LeaseTable(self.store.lease_db() or self.home / "leases.sqlite")
        # session graphs extended as sessions grow, rebuilt whenever their records may have been rewritten
        self._graphs = GraphCache(self.store, self.hasher.hash, forgot_since=self.recorder.leases.forgot_since)
        Unsee._owners[id(self.recorder)] = self  # ``Unsee.owning(recorder)``
        self._middleware: UnseeMiddleware | None = None
        #: the local chat model, when one was made by ``chat_model()`` (its caches are cropped on forget)
        self.local_model: Any = None
        #: the IFC interceptor once ``ifc()`` enabled it
        self.ifc_interceptor: Any = None
        atexit.register(self.close)

    def _sandbox_factory(self, name: str) -> Callable[[], Any]:
        """Environments whose snapshots outlive this process (kept roots/images under the home)."""
        import uuid

        from unsee.sandbox import backend_options

        def make():
            root = self.home / "sandboxes" / uuid.uuid4().hex[:12]
            wanted = {"root": root, "keep": True, "keep_snapshots": True}
            accepted = backend_options(name)  # what the backend declares (auto: either of its two)
            opts = {k: v for k, v in wanted.items() if accepted is None or k in accepted}
            return open_environment(name, **opts)

        return make

    def _counter_for(self, model: object | None) -> TokenCounter:
        if self._tokenizer is not None:
            return self._tokenizer
        model = model if model is not None else self.local_model  # the local model's own tokenizer
        if model is not None:
            return counter_for_model(model)
        return tiktoken_counter()

    # -- pieces for create_agent ------------------------------------------
    def middleware(self) -> UnseeMiddleware:
        """The recording middleware (one per Unsee; safe to share between agents)."""
        if self._middleware is None:
            from unsee.middleware.hooks import UnseeMiddleware

            self._middleware = UnseeMiddleware(self.recorder)
        return self._middleware

    def memory_middleware(self, store: Any, namespace: Namespace | NamespaceFn, *, limit: int = 10):
        """Middleware that injects memories from ``store`` into the prompt, recorded."""
        from unsee.middleware.memory import MemoryInjectionMiddleware

        return MemoryInjectionMiddleware(self.recorder, store, namespace, limit=limit)

    def encrypted(self, saver: Any):
        """A checkpointer whose values are encrypted under per-thread keys kept in
        ``<home>/keys.sqlite`` (AES-GCM): erasure destroys a thread's old keys, so
        copies beyond unsee's reach (a PostgreSQL WAL, backups) become unreadable.

        ``saver``: a factory taking ``serde=`` (``lambda serde: SqliteSaver(conn, serde=serde)``,
        ``InMemorySaver``), or a saver whose serializer is wrapped in place.
        """
        from unsee.plugins.erasure import encrypting

        return encrypting(saver, self.keystore)

    @property
    def keystore(self):
        """The per-thread encryption keys (``<home>/keys.sqlite``), opened on first use."""
        if self._keystore is None:
            from unsee.plugins.erasure import KeyStore

            self._keystore = KeyStore(self.home / "keys.sqlite")
        return self._keystore

    def recorded_store(self, store: Any) -> RecordingStore:
        """Wrap a LangGraph ``BaseStore`` so writes by tools/middleware are recorded."""
        from unsee.middleware.memory import RecordingStore

        return RecordingStore(store, self.recorder)

    @property
    def ledger(self) -> Ledger:
        """The call ledger (``<home>/ledger.sqlite``): external effects fire at most once."""
        if self._ledger is None:
            self._ledger = Ledger(self.home / "ledger.sqlite")
        return self._ledger

    def tool(self, func=None, *, effect: str, sandboxed: bool = False, **kw):
        """Make a LangChain tool that declares ``effect``, routed through the ledger.

        ``sandboxed=True`` injects the session's sandbox environment as the
        ``env`` argument (the restored shadow during a replay).
        """
        env = None
        if sandboxed:
            if self.environments is None:
                raise InvalidArgument("sandboxed tools need Unsee(sandbox='auto'|'local'|'docker')")
            env = self.environments.current
        from unsee.plugins.tools import unsee_tool

        return unsee_tool(func, effect=effect, ledger=self.ledger, env=env, **kw)

    def span_processor(self) -> ProvenanceSpanProcessor:
        """The processor to add to your own TracerProvider (done for you if you pass it)."""
        return self.processor

    # -- reading ----------------------------------------------------------
    def flush(self) -> None:
        self.tracer_provider.force_flush()
        self.store.flush()

    def sessions(self) -> list[SessionInfo]:
        self.flush()
        return self.store.sessions()

    def graph(self, thread_id: str) -> ProvenanceGraph:
        """The provenance graph of one session (session id = LangGraph thread_id).

        Kept per session and extended with what was recorded since the last read
        (``middleware/graph_cache.py``); a graph returned earlier never changes."""
        self.flush()
        return self._graphs.graph(thread_id)

    def session(self, thread_id: str) -> SessionInfo:
        self.flush()
        return self.store.session(thread_id)

    # -- export -----------------------------------------------------------
    def export_otlp(self, thread_id: str, endpoint: str, *, protocol: str | None = None, timeout: float = 10.0) -> int:
        """Send a recorded session to an OTLP receiver (gRPC for ``grpc://`` or port 4317, else HTTP)."""
        from unsee.middleware.export import export_otlp

        self.flush()
        self.store.require(thread_id)
        n = export_otlp(self.store.spans(thread_id), endpoint, protocol=protocol, timeout=timeout)
        self._log_export(thread_id, "otlp", endpoint, n)
        return n

    def export_jaeger_json(self, thread_id: str, path: str | os.PathLike) -> int:
        from unsee.middleware.export import write_jaeger_json

        self.flush()
        self.store.require(thread_id)
        n = write_jaeger_json(self.store.spans(thread_id), Path(path))
        self._log_export(thread_id, "jaeger-json", str(Path(path).resolve()), n)
        return n

    # -- the page of a session (unsee view) ---------------------------------
    def view(self, thread_id: str, *, target: str | None = None, source: str | None = None,
             event: str | None = None, content: bool = False, detect: bool = True,
             collapse: bool | None = None) -> dict[str, Any]:
        """The data of ``unsee view`` for one session (``unsee.plugins.view.render_html`` makes
        the page): its graph, ``target``'s entry and I(z) (``source`` restricts the target as in
        ``forget``), the IFC decisions recorded on its spans, the default detector's findings on
        its observations (``detect``), and the forget ``event`` (an event id kept by this home)
        with the graph before it. Texts only with ``content=True``. Unknown session, event or
        target: typed errors; nothing is written."""
        from unsee.plugins.detect import SignalDetector, ToolSpec, bind_tools, run_detectors
        from unsee.plugins.view import build_payload, detector_findings, ifc_decisions, load_forget_record

        if target is not None and (not isinstance(target, str) or not target.strip()):
            raise InvalidArgument("target must be a non-empty text")
        self.flush()
        self.store.require(thread_id)
        record = load_forget_record(self.home, event) if event is not None else None
        if record is not None and record.session_id != thread_id:
            from unsee.plugins.view import UnknownEvent

            raise UnknownEvent(f"forget {event} was of session {record.session_id!r}, not {thread_id!r}")
        g = self.graph(thread_id)
        entry, closure = None, frozenset()
        if target is not None:
            hit = g.locate(target, source)
            entry, closure = g.get(hit.artifact_id), g.taint(hit)
        found = {}
        if detect:
            tools = {a.attrs.get("tool"): a.attrs.get("effect") for a in g if a.type.value == "tool_call"}
            det = bind_tools(SignalDetector(), [ToolSpec(n, effect=e) for n, e in tools.items() if n])
            found = detector_findings(g, lambda text, aid: run_detectors([det], text, aid, min_score=0.5))
        return build_payload(g, closure=closure, entry=entry, source=source,
                             contents=self.store.contents(thread_id) if content else None, findings=found,
                             decisions=ifc_decisions(self.store.spans(thread_id)), forget=record,
                             collapse=collapse)

    def _log_export(self, thread_id: str, kind: str, to: str, spans: int) -> None:
        """What left the machine, for erasure receipts (spans carry payload only with content_in_spans)."""
        from unsee.plugins.erasure import log_export

        log_export(self.home, thread_id, kind, to, spans, self.recorder.content_in_spans)

    # -- information-flow control -------------------------------------------
    def ifc(self, sinks=(), *, mode: str = "block", trusted_sources=(), endorse=None):
        """Block (or ``ask``/``audit``) tool calls whose identifier sinks carry an
        identifier that came from an untrusted or revoked observation.

        ``sinks``: ``["send_money.recipient", "send_email.to", ...]`` (or mark
        tool functions with ``@identifier_sinks("recipient")``). ``endorse``:
        an endorser such as ``u.detect(...)``; observations whose recorded
        content it vets count as trusted (see ``docs/ifc.md``).
        """
        from unsee.plugins.ifc.adapter import IFCInterceptor, SessionGraphs

        if self.ifc_interceptor is None:
            self.ifc_interceptor = IFCInterceptor(SessionGraphs(self.store.has_session, self.graph), self.hasher,
                                                  sinks, mode=mode, trusted_sources=trusted_sources,
                                                  endorse=endorse)
            self.recorder.interceptors.add_global(self.ifc_interceptor)
        elif endorse is not None:
            self.ifc_interceptor.set_endorser(endorse)
        return self.ifc_interceptor

    def detect(self, detectors=None, *, mode: str = "async", policy: str = "auto", min_score: float = 0.5,
               side_effects: str = "defer"):
        """Injection detectors whose findings become revocation events (see
        ``unsee.plugins.detect.revocation``). Default detector: ``SignalDetector``, bound to
        each session's tools as its model calls list them (detectors that are ``ToolAware``).
        ``side_effects``: what an automatic forget does with external calls only
        the counterfactual makes (``defer`` | ``ask`` | ``execute``)."""
        from unsee.plugins.detect.revocation import DetectionService
        from unsee.plugins.detect.signals import SignalDetector

        svc = DetectionService(self._forget_context(), list(detectors or [SignalDetector()]), mode=mode,
                               policy=policy, min_score=min_score, side_effects=side_effects, forget=self.forget)
        # an interceptor in both modes: it learns the agent's tools from model calls (and, sync,
        # screens tool returns before the model sees them)
        self.recorder.interceptors.add_global(svc)
        return svc

    # -- the local model ----------------------------------------------------
    def chat_model(self, **fields: Any):
        """A LangChain chat model on the local runtime (``Unsee(model="cpu"|"exllamav2"|path)``).

        Its KV cache persists per session and is cropped at checkpoints on
        forget; token spans are counted with its tokenizer. One per Unsee.
        """
        if self.local_model is None:
            from unsee.plugins.model.chat_model import LocalChatModel

            self.local_model = LocalChatModel.from_spec(self.model_spec, self.home, **fields)
        return self.local_model

    # -- forgetting -------------------------------------------------------
    def forget(self, thread_id: str, event, strategy: str = "B7", *, agent=None, dry_run: bool = False,
               commit: bool = True, wait: bool = True, side_effects: str = "defer", erase: bool = True,
               scope: str = "session"):
        """Make the session's state the counterfactual where ``event.target`` was never seen.

        Returns a ``ForgetReport`` (or, with ``dry_run``, the ``ForgetPlan``).
        ``agent`` (a compiled LangGraph agent, not a ``"module:attr"`` string) is
        needed only when this process did not run the session. Every argument
        is checked before anything is written (``InvalidArgument``,
        ``UnknownStrategy``); ``side_effects`` is ``defer`` | ``ask`` | ``execute``.
        ``erase`` (default): once a replay is committed, erase the target from
        every stored record too (``erase()``); ``erase=False`` keeps the old
        record (e.g. to compare strategies on it). ``scope``: ``"session"`` forgets in this
        session and names in ``report.other_sessions`` the sessions the target reached through
        shared memory; ``"all"`` forgets it there too, in dependency order
        (``report.also_forgotten``).
        """
        from unsee.plugins.forget import Forgetter

        if not isinstance(erase, bool):
            raise InvalidArgument(f"erase must be True or False, got {type(erase).__name__} {erase!r}")
        if scope not in ("session", "all"):
            raise InvalidArgument(f"scope must be 'session' or 'all', got {type(scope).__name__} {scope!r}")
        forgetter = Forgetter(self._forget_context())
        located = None if dry_run else self._located(thread_id, event)
        reached = self._spread(thread_id, event, located)
        report = forgetter.forget(thread_id, event, strategy, agent=agent, dry_run=dry_run,
                                  commit_result=commit, wait=wait, side_effects=side_effects)
        if dry_run:
            return report
        if not reached or scope == "session" or not report.committed:
            report = self._erase_after(forgetter, report, thread_id, event, agent, erase)
            self._keep_forget_record(report, event, located)
            named = [f"{r.session_id} (via {r.via_key})" for r in reached]
            return report.model_copy(update={"other_sessions": named}) if named else report
        done, left = [(thread_id, event, report)], []
        for r in reached:
            if r.entry is None:
                left.append(f"{r.session_id} (via {r.via_key}: read the key, but no read held the target itself)")
                continue
            ev = type(event)(target=event.target, source=r.entry, reason=f"spread from {thread_id} via {r.via_key}",
                             raised_by=event.raised_by)
            try:
                done.append((r.session_id, ev, self.forget(r.session_id, ev, strategy, agent=agent, commit=commit,
                                                           wait=wait, side_effects=side_effects, erase=False)))
            except Exception as exc:  # one session failing never hides the others, nor skips the erasure
                left.append(f"{r.session_id} (via {r.via_key}: its forget failed: {type(exc).__name__}: {exc})")
        # The byte-level audit spans sessions (shared files): an erasure is clean only once every
        # affected session is erased, so the receipts are made again after the last one.
        for _ in range(2 if erase and len(done) > 1 else 1):
            done = [(s, ev, self._erase_after(forgetter, rep, s, ev, agent, erase)) for s, ev, rep in done]
        self._keep_forget_record(done[0][2], event, located)
        return done[0][2].model_copy(update={"also_forgotten": [rep for _, _, rep in done[1:]], "other_sessions": left})

    def _located(self, thread_id: str, event):
        """(graph, entry artifact, I(z)) of ``event.target`` in the session before a forget, or
        None where the forget will refuse the event (unknown session, target not found, ...)."""
        from unsee.plugins.forget import RevocationEvent

        if not isinstance(event, RevocationEvent) or not isinstance(thread_id, str):
            return None  # the forget refuses it with the right error
        try:
            g = self.graph(thread_id)
            hit = g.locate(event.target, event.source)
            return g, g.get(hit.artifact_id), g.taint(hit)
        except Exception:
            return None  # the forget says what is wrong

    def _keep_forget_record(self, report, event, located) -> None:
        """What ``unsee view --event`` shows of this forget (ids only, beside the receipts).
        An observer: a failure to write it is logged, never raised into the forget."""
        if located is None or getattr(report, "outcome", None) is None:
            return  # (only a replay has transitions to show; an edit's report says what it did)
        try:
            from unsee.plugins.view import forget_record, save_forget_record

            g, entry, closure = located
            save_forget_record(self.home, forget_record(report, g, entry=entry, closure=closure,
                                                        raised_by=getattr(event, "raised_by", "user")))
        except Exception:
            log.warning("could not keep the record of forget %s for unsee view", report.event_id, exc_info=True)

    def _spread(self, thread_id: str, event, located=None) -> list:
        """The sessions ``event.target`` reached from ``thread_id`` through shared memory."""
        from unsee.plugins.forget import find_spread, is_scratch_thread

        if located is None:
            return []
        g, _, closure = located
        sessions = [s.session_id for s in self.store.sessions() if not is_scratch_thread(s.session_id)]
        return find_spread(thread_id, g, closure, event.target, sessions, self.graph)

    def _erase_after(self, forgetter, report, thread_id: str, event, agent, erase: bool):
        """Erase the record after a committed replay (the default of ``forget``)."""
        from unsee.plugins.erasure import ErasureInterrupted, NotForgotten
        from unsee.plugins.forget import Strategy

        if not erase or not report.committed or not Strategy.parse(report.strategy).spec.replays:
            return report  # only a committed replay leaves a counterfactual history to erase toward
        try:
            result = self.erase(thread_id, event, agent=forgetter.agent_for(thread_id, agent))
        except NotForgotten:
            # the event named one source; the same text is still in the state through another
            # observation: its copies cannot be told apart, so the record waits for that one's forget
            return report.model_copy(update={"notes": [*report.notes, (
                "record not erased: the target is still in the session through another observation "
                "(forget that one too; the last forget erases the record)")]})
        except (ErasureInterrupted, StoreUnavailable) as e:
            # the forget is committed; its record is not erased yet: said, never hidden
            return report.model_copy(update={"erased_clean": False, "notes": [*report.notes, (
                f"record not erased yet: {e}")]})
        return report.model_copy(update={"receipt": str(result.path), "erased_clean": result.clean})

    def erase(self, thread_id: str, event, *, agent=None):
        """Erase ``event.target`` from every route the runtime wrote for a forgotten session:
        checkpoint history (rewritten), memory store, records, ledger, sandbox snapshots.

        Returns an ``ErasureResult`` (``.receipt``, signed; ``.path``; ``.after``, the audit;
        ``.clean``). A rerun with the same event finishes an interrupted erasure.
        Raises ``NotForgotten`` if the session's state still holds the target.
        """
        from unsee.plugins.erasure import Eraser

        self.flush()
        return Eraser(self._erasure_context()).erase(thread_id, event, agent=self._agent_for(thread_id, agent))

    def audit(self, thread_id: str, target: str, *, agent=None):
        """Scan every route for ``target`` (bytes and values); an ``AuditReport``. Changes nothing."""
        from unsee.plugins.erasure import Eraser

        self.flush()
        return Eraser(self._erasure_context()).audit(thread_id, target, agent=self._agent_for(thread_id, agent))

    def _agent_for(self, thread_id: str, agent: Any = None) -> Any:
        """``agent``, else the one that ran the session in this process (None: none known)."""
        return agent or self.recorder.agents.get(thread_id) or self.recorder.last_agent

    # -- the same from an event loop (LangChain's a-prefixed convention) -----------------------
    async def aforget(self, thread_id: str, event, strategy: str = "B7", **kw):
        """``forget`` without holding the event loop: the replay runs in a worker thread."""
        import asyncio

        return await asyncio.to_thread(self.forget, thread_id, event, strategy, **kw)

    async def aerase(self, thread_id: str, event, **kw):
        """``erase`` without holding the event loop."""
        import asyncio

        return await asyncio.to_thread(self.erase, thread_id, event, **kw)

    async def aaudit(self, thread_id: str, target: str, **kw):
        """``audit`` without holding the event loop."""
        import asyncio

        return await asyncio.to_thread(self.audit, thread_id, target, **kw)

    def _erasure_context(self):
        from unsee.plugins.erasure import ErasureContext

        def ledger():
            return self.ledger if self._ledger is not None or (self.home / "ledger.sqlite").exists() else None

        envs = self.environments
        registry = self.home / "sandboxes" / "registry.json"
        if envs is None and registry.exists():
            # a process without a sandbox (e.g. `unsee erase` without --agent) still reaches
            # the sandboxes the home's sessions stored: read them through the registry
            from unsee.plugins.tools import SessionEnvironments

            envs = SessionEnvironments(_no_sandbox, registry=registry)
        return ErasureContext(home=self.home, records=self.store, hasher=self.hasher, ledger=ledger,
                              environments=envs, runs=self.recorder, content_in_spans=self.recorder.content_in_spans,
                              version=version())

    def _forget_context(self):
        """The ports a forget (and the detection service's automatic forgets) work through.

        The local model and the IFC interceptor are read when a forget runs
        (``chat_model()``/``ifc()`` may make them after this context exists).
        """
        from unsee.plugins.forget import ForgetContext, SessionView

        return ForgetContext(
            records=self.store,
            sessions=SessionView(session=self.session, graph=self.graph, sessions=self.sessions),
            runs=self.recorder,
            hasher=self.hasher,
            environments=self.environments,
            cache=lambda: self.local_model,
            revoker=lambda: self.ifc_interceptor,
        )

    def close(self) -> None:
        if self.environments is not None:
            self.environments.close()
        try:
            self.tracer_provider.force_flush()
            if self._own_provider:
                self.tracer_provider.shutdown()
        except Exception:
            log.debug("tracer provider shutdown failed", exc_info=True)
        self.recorder.leases.close()  # before the store: on PostgreSQL they share its pool
        self.store.close()
        if self._keystore is not None:
            self._keystore.close()
