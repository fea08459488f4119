"""The ``Unsee`` facade: one object per unsee home.

It holds the configuration and builds the parts: the provenance store, the
tracer provider (ours, or the user's with our processor added), the recorder,
the middleware pieces, and the ports the plugins work through. It decides
nothing itself: a revocation event goes to the revocation pipeline
(``unsee.plugins.forget.RevocationPipeline``), erasure to the erasure plugin,
the page of a session to the view plugin.
"""

from __future__ import annotations

import atexit
import logging
import os
import weakref
from functools import cached_property
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider

from unsee.middleware.errors import InvalidArgument, InvalidStoreUrl
from unsee.middleware.fork_memory import OrphanedMemory, parse_fork_policy
from unsee.middleware.fork_watch import ForkWatch
from unsee.middleware.graph import ProvenanceGraph
from unsee.middleware.graph_cache import GraphCache
from unsee.middleware.hashing import ContentHasher
from unsee.middleware.leases import LeaseTable
from unsee.middleware.processor import ProvenanceSpanProcessor
from unsee.middleware.recorder import EnvSnapshotter, Recorder
from unsee.middleware.records import SessionInfo
from unsee.middleware.sqldb import PostgresDb, is_postgres_url
from unsee.middleware.store import ProvenanceStore
from unsee.middleware.store_files import ensure_home
from unsee.middleware.tokens import TokenCounter, counter_for_model, tiktoken_counter
from unsee.sandbox import Ledger

from .config import DEFAULT_HOME, resolve_home, resolve_registry, resolve_store, version
from .keywords import renamed_keyword

if TYPE_CHECKING:  # (imported where used: langchain is not needed to open a home and read it)
    from langgraph.prebuilt import ToolNode

    from unsee.middleware.graph_adapter import RecordedChatModel
    from unsee.middleware.hooks import UnseeMiddleware
    from unsee.middleware.memory import Namespace, NamespaceFn, RecordingStore
    from unsee.plugins.forget import RevocationPipeline
    from unsee.plugins.tools import SessionEnvironments

log = logging.getLogger("unsee")

__all__ = ["DEFAULT_HOME", "Unsee", "resolve_home", "resolve_store", "version"]

def _in_thread(name: str):
    """An ``async`` twin of the method ``name`` that does not hold the event loop."""

    async def method(self, *args: Any, **kw: Any) -> Any:
        import asyncio

        return await asyncio.to_thread(getattr(self, name), *args, **kw)

    method.__name__ = f"a{name}"
    method.__doc__ = f"``{name}`` without holding the event loop: it runs in a worker thread."
    return method


def _retention_policy(value: Any) -> Any:
    """The parsed policy (None: keep everything, today's behaviour, without importing LangGraph)."""
    if value is None:
        return None
    from unsee.plugins.erasure import RetentionPolicy

    return RetentionPolicy.parse(value)


#: id(recorder) -> the Unsee that owns it (weak: an Unsee that is gone drops out)
_OWNERS: weakref.WeakValueDictionary[int, Unsee] = weakref.WeakValueDictionary()


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
    - ``retention``: the default retention policy of the agents' histories (``"all"``,
      ``"semantic"``, ``"latest"``, a ``RetentionPolicy``), applied by ``retention()``
      (never inside a run; docs/retention.md).
    - ``on_fork``: what a run that starts a new branch of its thread (time travel, ``update_state``
      on an older checkpoint) does with store items only the abandoned branch justified:
      ``"flag"`` (default: reported, unchanged), ``"rollback"`` (put back as they were before
      the abandoned write), ``"keep"`` (recorded only); ``on_fork(thread_id, policy)`` per
      session (docs/provenance.md "Memory after a fork").
    - ``store``: ``"postgresql://..."`` keeps the provenance store, vault, journals
      and leases in that database, shared by every process and machine on it
      (docs/deployment.md); default ``$UNSEE_STORE``, else SQLite under the home.
    - ``registry``: ``"host:port"`` of an OCI registry (default ``$UNSEE_REGISTRY``): every
      sandbox snapshot is pushed there, to the session's own repository ``unsee/s-<keyed
      hash>``, and any worker restores it from there. Without one, on a PostgreSQL store the
      local backend's snapshots go to the store and Docker's stay on the machine (logged).
    - ``reconcile``: what follows each committed forget (docs/reconcile.md): ``"plan"`` (the
      default) keeps its reconciliation plan and runs nothing without a decision;
      ``"compensate"`` also runs its compensations at once (deferred calls still wait for
      ``reconcile(event_id, run="all")``); ``"never"`` keeps no plan.
    """

    @classmethod
    def owning(cls, recorder: Recorder) -> Unsee | None:
        """The live Unsee whose recorder this is (e.g. found on an agent's middleware), else None."""
        u = _OWNERS.get(id(recorder))
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
        retention: Any = None,
        on_fork: str = "flag",
        registry: str | None = None,
        reconcile: str = "plan",
    ):
        #: the home's default retention policy (``retention()`` applies it; docs/retention.md)
        self.retention_policy = _retention_policy(retention)  # UnknownRetentionPolicy before anything is made
        fork_policy = parse_fork_policy(on_fork)  # InvalidArgument, before anything is made
        from .reconciling import RECONCILE_DEFAULTS

        if reconcile not in RECONCILE_DEFAULTS:
            raise InvalidArgument(f"reconcile must be one of {', '.join(RECONCILE_DEFAULTS)}, not {reconcile!r}")
        #: what follows a committed forget: ``never``, ``plan`` (kept; nothing runs without a
        #: decision) or ``compensate`` (kept, and its compensations run); docs/reconcile.md
        self.reconcile_default = reconcile
        #: the tools ``tool()`` made, by name (a reconciliation finds compensators and deferred
        #: tools here when no agent is given)
        self.made_tools: dict[str, Any] = {}
        url = resolve_store(store)
        if url is not None and not is_postgres_url(url):  # (before the home is made: bad input changes nothing)
            raise InvalidStoreUrl(url, "expected 'sqlite' or a postgresql:// URL")
        #: the OCI registry sandbox snapshots are pushed to (``host:port``; None: none)
        self.registry = resolve_registry(registry)  # InvalidArgument, before anything is made
        self.home = ensure_home(resolve_home(home))  # HomeNotADirectory
        self.store = ProvenanceStore(self.home, url)  # StoreDamaged, StoreUnavailable
        shared = self.store.shared.key("hash_key")  # one key for every machine on a shared store
        self.hasher = ContentHasher(shared) if shared else ContentHasher.from_home(self.home)
        self.processor = ProvenanceSpanProcessor(self.store)
        self._own_provider = tracer_provider is None  # (ours is shut down on close; the user's is not)
        self.tracer_provider = tracer_provider or TracerProvider(
            resource=Resource.create({"service.name": service_name}))
        for p in [self.processor, *(span_processors or [])]:
            self.tracer_provider.add_span_processor(p)
        self._tokenizer = tokenizer
        self.model_spec = model
        #: one sandbox environment per session when ``sandbox`` is given
        #: ("auto" = Docker when a daemon and the image are there, else local)
        self.environments: SessionEnvironments | None = None
        if sandbox is not None:
            from unsee.plugins.tools import SessionEnvironments

            self.environments = SessionEnvironments.under_home(
                self.home, sandbox, sandbox_setup, db=self._shared_db(), registry=self.registry, hasher=self.hasher)
            env_snapshotter = env_snapshotter or self.environments.snapshot_for_thread
        # a forget and a run on one session never interleave, in any process using this home
        leases = LeaseTable(self.store.shared.lease_db() or self.home / "leases.sqlite")
        self.recorder = Recorder(self.store, self.tracer_provider.get_tracer("unsee", "0.1.0"), self.hasher,
                                 self._counter_for, content_in_spans=content_in_spans,
                                 env_snapshotter=env_snapshotter, leases=leases)
        self.recorder.forks = ForkWatch(self.store, fork_policy)
        # a process that died in a run (or before that run's records were written) left its lease
        self.recorder.run_leases.reap_dead()
        # session graphs extended as sessions grow, rebuilt whenever their records may have been rewritten
        self._graphs = GraphCache(self.store, self.hasher.hash, forgot_since=leases.forgot_since)
        _OWNERS[id(self.recorder)] = self  # ``Unsee.owning(recorder)``
        #: the local chat model, when one was made by ``chat_model()`` (its caches are cropped on forget)
        self.local_model: Any = None
        #: the IFC interceptor once ``ifc()`` enabled it
        self.ifc_interceptor: Any = None
        atexit.register(self.close)

    def _shared_db(self) -> Any:
        """unsee's tables in the shared PostgreSQL store (None: SQLite under the home)."""
        return PostgresDb(self.store.pool) if self.store.pool is not None else None

    def _counter_for(self, model: object | None) -> TokenCounter:
        """The given tokenizer, else the model's own (the local model's by default), else tiktoken's."""
        model = model if model is not None else self.local_model
        if self._tokenizer is not None:
            return self._tokenizer
        return counter_for_model(model) if model is not None else tiktoken_counter()

    # -- pieces for create_agent ------------------------------------------
    def middleware(self) -> UnseeMiddleware:
        """The recording middleware (one per Unsee; safe to share between agents)."""
        return self._recording_middleware

    @cached_property
    def _recording_middleware(self) -> UnseeMiddleware:
        from unsee.middleware.hooks import UnseeMiddleware

        return UnseeMiddleware(self.recorder)

    # -- pieces for any LangGraph graph (hand-written StateGraph, create_react_agent) ----------
    def recorded_model(self, model: Any) -> RecordedChatModel:
        """``model`` (a LangChain chat model) recorded and intercepted as ``middleware()`` records a
        ``create_agent``'s model calls, for a graph written by hand or ``create_react_agent``:
        its first call in a graph run begins the run's turn. ``bind_tools`` keeps it recorded.
        Use it with ``tool_node`` in the same graph (docs/architecture.md "Any LangGraph graph");
        inside a ``create_agent`` that runs ``middleware()`` it leaves the recording to that."""
        from unsee.middleware.graph_adapter import RecordedChatModel

        return RecordedChatModel.wrap(model, self.middleware())

    def tool_node(self, tools: Any, **kwargs: Any) -> ToolNode:
        """A ``langgraph.prebuilt.ToolNode`` for ``tools`` whose calls are recorded and, during a
        forget's replay, answered from the record, deferred or run (``kwargs`` go to ``ToolNode``)."""
        from unsee.middleware.graph_adapter import recorded_tool_node

        return recorded_tool_node(self.middleware(), tools, **kwargs)

    def memory_middleware(self, store: Any, namespace: Namespace | NamespaceFn, *, limit: int = 10):
        """Middleware that injects memories from ``store`` into the prompt, recorded."""
        from unsee.middleware.memory import MemoryInjectionMiddleware

        return MemoryInjectionMiddleware(self.recorder, store, namespace, limit=limit)

    def encrypted(self, saver: Any):
        """A checkpointer whose values are encrypted (AES-GCM) under per-thread keys in ``keystore``:
        erasure destroys a thread's old keys, so copies beyond unsee's reach (a PostgreSQL WAL,
        backups) become unreadable. ``saver``: a factory taking ``serde=`` (``lambda serde:
        SqliteSaver(conn, serde=serde)``, ``InMemorySaver``), or a saver whose serializer is wrapped."""
        from unsee.plugins.erasure import encrypting

        return encrypting(saver, self.keystore)

    @cached_property
    def keystore(self):
        """The per-thread encryption keys (``<home>/keys.sqlite``), opened on first use."""
        from unsee.plugins.erasure import KeyStore

        return KeyStore(self.home / "keys.sqlite")

    def recorded_store(self, store: Any) -> RecordingStore:
        """Wrap a LangGraph ``BaseStore`` so writes by tools/middleware are recorded."""
        from unsee.middleware.memory import RecordingStore

        return RecordingStore(store, self.recorder)

    @cached_property
    def ledger(self) -> Ledger:
        """The call ledger: external effects fire at most once. ``<home>/ledger.sqlite``; with a
        PostgreSQL store the ``unsee.calls`` table there, shared by every worker on the store
        (a call fires at most once across processes and machines)."""
        if self.store.pool is not None:
            return Ledger.on_postgres(self.store.pool)
        return Ledger(self.home / "ledger.sqlite")

    def existing_ledger(self) -> Ledger | None:
        """The call ledger if one is made (by this process, or on PostgreSQL by any worker on the
        store), else None: what only reads it (an erasure, a reconciliation's plan) never makes one."""
        made = "ledger" in vars(self) or (
            Ledger.exists_on_postgres(self.store.pool) if self.store.pool is not None
            else (self.home / "ledger.sqlite").exists())
        return self.ledger if made else None

    def tool(self, func=None, *, effect: str, sandboxed: bool = False, **kw):
        """Make a LangChain tool that declares ``effect``, routed through the ledger. ``sandboxed=True``
        injects the session's sandbox environment as ``env`` (the restored shadow during a replay)."""
        from unsee.plugins.tools import unsee_tool

        if sandboxed and self.environments is None:
            raise InvalidArgument("sandboxed tools need Unsee(sandbox='auto'|'local'|'docker')")
        env = self.environments.current if sandboxed else None
        made = unsee_tool(func, effect=effect, ledger=self.ledger, env=env, **kw)
        if func is not None:
            self.made_tools[made.name] = made
            return made

        def register(fn):
            tool = made(fn)
            self.made_tools[tool.name] = tool
            return tool

        return register

    def span_processor(self) -> ProvenanceSpanProcessor:
        """The processor to add to your own TracerProvider (done for you if you pass it)."""
        return self.processor

    # -- reading ----------------------------------------------------------
    def flush(self) -> None:
        """Wait until everything recorded so far is written (and handed to the tracer provider's
        processors). A run returns before its records are written; every reader here calls this
        first."""
        self.recorder.run_tasks()  # (the spans a run left to the writer end before the exporters flush)
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

    # -- memory after a fork ------------------------------------------------------------------
    def on_fork(self, thread_id: str, policy: str) -> None:
        """This session's fork policy (``"flag"`` | ``"rollback"`` | ``"keep"``), instead of
        ``Unsee(on_fork=...)``'s. Kept in the home: every process of it (and a later one) runs
        the session with it. The session need not be recorded yet. ``InvalidArgument`` changes
        nothing."""
        if not isinstance(thread_id, str) or not thread_id:
            raise InvalidArgument("thread_id must be a non-empty string")
        self.recorder.forks.set_policy(thread_id, policy)

    def fork_policy(self, thread_id: str) -> str:
        """The fork policy a run of this session applies: the one set by ``on_fork``, else
        ``Unsee(on_fork=...)``'s."""
        if not isinstance(thread_id, str) or not thread_id:
            raise InvalidArgument("thread_id must be a non-empty string")
        return self.recorder.forks.policy(thread_id)

    def orphaned_memory(self, thread_id: str, *, include_kept: bool = False) -> list[OrphanedMemory]:
        """The store items of a session found orphaned when a run started a new branch (the
        write that made their value is justified only by the abandoned branch), oldest first:
        flagged ones, rolled-back ones (``action``), and with ``include_kept`` those the
        ``"keep"`` policy recorded. ``SessionNotFound`` for an unknown thread."""
        self.flush()
        self.store.require(thread_id)
        return self.recorder.forks.records(thread_id, include_kept=include_kept)

    # -- export (each export is logged: what left the machine, for erasure receipts) -----------
    def export_otlp(self, thread_id: str, endpoint: str, *, protocol: str | None = None, timeout: float = 10.0,
                    connect_timeout: float | None = None) -> int:
        """Send a recorded session to an OTLP receiver (gRPC for ``grpc://`` or port 4317, else HTTP).
        ``EndpointUnreachable`` (an ``ExportError``, exit 3) when no TCP connection is made within
        ``connect_timeout`` seconds (default ``export.CONNECT_TIMEOUT``, 1.5): nothing is sent."""
        from unsee.middleware.export import CONNECT_TIMEOUT, export_otlp

        wait = CONNECT_TIMEOUT if connect_timeout is None else connect_timeout
        return self._export(thread_id, "otlp", endpoint,
                            lambda spans: export_otlp(spans, endpoint, protocol=protocol, timeout=timeout,
                                                      connect_timeout=wait))

    def export_jaeger_json(self, thread_id: str, path: str | os.PathLike) -> int:
        """Write a recorded session as a Jaeger JSON file (Jaeger's UI opens it)."""
        from unsee.middleware.export import write_jaeger_json

        return self._export(thread_id, "jaeger-json", str(Path(path).resolve()),
                            lambda spans: write_jaeger_json(spans, Path(path)))

    def _export(self, thread_id: str, kind: str, to: str, send: Callable[[list], int]) -> int:
        from unsee.plugins.erasure import log_export

        self.flush()
        self.store.require(thread_id)
        n = send(self.store.spans(thread_id))
        log_export(self.home, thread_id, kind, to, n, self.recorder.content_in_spans)
        return n

    # -- the page of a session (unsee view) ---------------------------------
    def view(self, thread_id: str, *, target: str | None = None, source: str | None = None,
             event: str | None = None, content: bool = False, detect: bool = True,
             collapse: bool | None = None) -> dict[str, Any]:
        """The data of ``unsee view`` for one session (``unsee.plugins.view.render_html`` makes the
        page): graph, ``target``'s I(z), IFC decisions, detector findings (``detect``), the forget
        ``event`` with the graph before it; texts only with ``content``. See docs/view.md."""
        from unsee.plugins.view import session_payload

        self.flush()
        forks = self.recorder.forks
        return session_payload(self.store, self.graph, self.home, thread_id, target=target, source=source,
                               event=event, content=content, detect=detect, collapse=collapse,
                               orphaned=lambda t: [o.model_dump(mode="json") for o in forks.records(t)])

    # -- information-flow control and detection ------------------------------
    def ifc(self, sinks=(), *, on_violation: str | None = None, trusted_sources=(), endorse=None,
            mode: str | None = None):
        """Block (or ``ask``/``audit``) tool calls whose identifier sinks (``["send_money.recipient",
        ...]``, or ``@identifier_sinks`` on the tool) carry an identifier from an untrusted or revoked
        observation. ``on_violation``: what happens to such a call, ``block`` (default) | ``ask`` |
        ``audit`` (``mode=`` is its deprecated alias). ``endorse``: e.g. ``u.detect(...)``; what it
        vets counts as trusted (docs/ifc.md)."""
        from .wiring import enable_ifc

        on_violation = renamed_keyword("on_violation", on_violation, "mode", mode, "block")
        self.ifc_interceptor = enable_ifc(self, sinks, on_violation=on_violation, trusted_sources=trusted_sources,
                                          endorse=endorse)
        return self.ifc_interceptor

    def detect(self, detectors=None, *, timing: str | None = None, policy: str = "auto", min_score: float = 0.5,
               side_effects: str = "defer", mode: str | None = None):
        """Injection detectors whose findings become revocation events, applied through
        ``revocations`` (docs/ifc.md). Default: ``SignalDetector``, bound to each session's tools.
        ``timing``: when detectors run, ``async`` (default: over recorded sessions, ``scan``) or
        ``sync`` (on each tool return, before the model sees it); ``mode=`` is its deprecated
        alias. ``side_effects``: what an automatic forget does with external calls only the
        counterfactual makes (``defer`` | ``ask`` | ``execute``)."""
        from .wiring import detection_service

        timing = renamed_keyword("timing", timing, "mode", mode, "async")
        return detection_service(self, detectors, timing=timing, policy=policy, min_score=min_score,
                                 side_effects=side_effects)

    # -- the local model ----------------------------------------------------
    def chat_model(self, **fields: Any):
        """A LangChain chat model on the local runtime (``Unsee(model="cpu"|"exllamav2"|path)``).

        Its KV cache persists per session and is cropped at checkpoints on
        forget; token spans are counted with its tokenizer. One per Unsee.
        """
        if self.local_model is None:
            from unsee.plugins.model import LocalChatModel

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
        (``report.also_forgotten``). The work is the revocation pipeline's (``revocations``).
        """
        return self.revocations.run(thread_id, event, strategy, agent=agent, dry_run=dry_run, commit=commit,
                                    wait=wait, side_effects=side_effects, erase=erase, scope=scope)

    def reconcile(self, event_id: str, run: str = "plan", *, approve=None, retry: bool = False, agent=None):
        """Reconcile the world with the counterfactual of the forget ``event_id`` (a
        ``ReconcileOutcome``: the plan with each item's state, and what this call did).

        ``run="plan"`` reads the plan and changes nothing; ``"compensate"`` runs the compensators of
        the side effects only the forgotten world made; ``"all"`` also runs the calls only the
        counterfactual wants (deferred). Each runs at most once, whoever reconciles, in any process
        on this store. ``approve``: a callable given LangChain's human-in-the-loop request (the
        items that would run) returning the decisions (``{"decisions": [{"type": "approve" |
        "reject"}, ...]}``, booleans, or True/False); ``interrupt_approval`` asks through LangGraph's
        ``interrupt()``; None: this call is the decision. ``retry``: run failed items again.
        ``agent``: the agent whose tools declare the compensators (default: the one that ran the
        session here, and the tools ``tool()`` made). See docs/reconcile.md."""
        return self.reconciler.run(event_id, run, approve=approve, retry=retry, agent=agent)

    async def areconcile(self, event_id: str, run: str = "plan", *, approve=None, retry: bool = False, agent=None):
        """``reconcile`` from an event loop: compensators and tools that can only be awaited (MCP
        tools, ``async def``) run on it."""
        return await self.reconciler.arun(event_id, run, approve=approve, retry=retry, agent=agent)

    @cached_property
    def reconciler(self):
        """The reconcile plugin's ``Reconciler`` over this home (its plans live in the call ledger)."""
        from unsee.plugins.reconcile import Reconciler

        from .reconciling import reconcile_context

        return Reconciler(reconcile_context(self))

    @cached_property
    def revocations(self) -> RevocationPipeline:
        """The one pipeline every revocation event goes through (``forget``, ``detect()``'s
        automatic revocations, ``unsee serve``), built on first use over this home's ports."""
        from .wiring import revocation_pipeline

        return revocation_pipeline(self)

    def erase(self, thread_id: str, target, *, agent=None):
        """Erase ``target`` (the text, as ``audit`` takes it, or the ``RevocationEvent`` of the
        forget) from every route the runtime wrote for a forgotten session (checkpoint history
        rewritten, memory store, records, ledger, sandbox snapshots): an ``ErasureResult``
        (``.receipt``, signed; ``.path``; ``.after``, the audit; ``.clean``). A rerun with the same
        event (its ``event_id``) finishes an interrupted one; a text is a new event each call.
        ``NotForgotten`` if the state still holds it."""
        from unsee.plugins.forget import RevocationEvent

        from .wiring import traced_erasure

        event = RevocationEvent(target=target, reason="erase") if isinstance(target, str) else target
        eraser, agent = self._eraser(), self._agent_for(thread_id, agent)
        return traced_erasure(self, "erase", lambda: eraser.erase(thread_id, event, agent=agent),
                              session=thread_id, event_id=getattr(event, "event_id", None))

    def retention(self, thread_id: str, policy=None, *, agent=None):
        """Apply a retention policy (default: ``Unsee(retention=...)``) to the session's LangGraph
        history: a ``RetentionRecord`` of what was kept and dropped (also appended to
        ``<home>/erasures/retention.jsonl``). Dropped bytes are scrubbed (SQLite) or vacuumed
        (PostgreSQL). ``UnknownRetentionPolicy`` / ``RetentionRefused`` change nothing; a rerun
        finishes an interrupted one. See docs/retention.md."""
        from .wiring import apply_retention

        return apply_retention(self, thread_id, policy, self._agent_for(thread_id, agent))

    def audit(self, thread_id: str, target: str, *, agent=None):
        """Scan every route for ``target`` (bytes and values); an ``AuditReport``. Changes nothing."""
        return self._eraser().audit(thread_id, target, agent=self._agent_for(thread_id, agent))

    def surface(self, *, agent=None, marker: str | None = None, target: str | None = None):
        """The rollback surface of this home and ``agent`` (a ``SurfaceReport``): which routes
        they write, which sit inside LangGraph's recovery boundary, what each deletion primitive
        (``delete_thread``, ``RemoveMessage``, ``store.delete``, ``u.forget``, ``u.erase``,
        ``u.erase_subject``, ``u.retention``) mutates on each, and with ``target`` (the word
        ``audit`` uses; ``marker`` is the same) how many copies of it each route holds now, per
        session. Changes nothing. See docs/surface.md."""
        if target is not None and marker is not None:
            from unsee.middleware.errors import InvalidArgument

            raise InvalidArgument("marker is target: give one of them")
        marker = target if target is not None else marker
        offered = {name: None if callable(getattr(self, name.removeprefix("u."), None)) else "not in this version"
                   for name in ("u.forget", "u.erase", "u.erase_subject", "u.retention")}
        return self._eraser().surface(agent or self.recorder.agents.last, marker, offered=offered)

    def erase_subject(self, threads=(), namespaces=(), targets=(), *, agent=None, subject=None):
        """Erase a data subject: ``threads`` deleted whole (every checkpoint, write and blob, scratch
        and staging threads, keys under ``u.encrypted``), every item under ``namespaces`` (tuples of
        str) deleted atomically under its lease, those sessions' records, vault, ledger texts
        (facts kept as keyed hashes), sandboxes and exports dropped; every route then audited for
        ``targets`` and for keyed fingerprints of the sessions' recorded content; ONE signed receipt
        (a ``SubjectErasureResult``: ``.receipt``, ``.path``, ``.before``/``.after``, ``.clean``). A
        rerun with the same arguments finishes an interrupted one. See docs/erasure.md."""
        from unsee.plugins.erasure import SubjectEraser

        from .wiring import erasure_context

        self.flush()
        first = threads[0] if isinstance(threads, (list, tuple)) and threads and isinstance(threads[0], str) else None
        agent = agent or self.recorder.agents.for_session(first)
        from .wiring import traced_erasure

        eraser = SubjectEraser(erasure_context(self), self.recorder.run_leases.table)
        result = traced_erasure(self, "erase_subject",
                                lambda: eraser.erase(threads, namespaces, targets, agent=agent, subject=subject))
        if self.recorder.forks is not None:  # (fork-memory rows hold ids only; the sessions are gone)
            for thread in threads:
                self.recorder.forks.journal.drop(thread)
        return result

    def _eraser(self):
        from unsee.plugins.erasure import Eraser

        self.flush()
        from .wiring import erasure_context

        return Eraser(erasure_context(self))

    def _agent_for(self, thread_id: str, agent: Any = None) -> Any:
        """``agent``, else the one that ran the session in this process (None: none known)."""
        return agent or self.recorder.agents.for_session(thread_id)

    # -- the same from an event loop (LangChain's a-prefixed convention: the work runs in a thread)
    async def aforget(self, thread_id: str, event, strategy: str = "B7", **kw: Any):
        """``forget``, async end to end: the forget's own steps run in a worker thread (they never
        hold the event loop), and a replay runs the agent with ``ainvoke`` on this event loop, so
        ``async def`` tools, MCP tools (their sessions live on this loop) and models only
        ``ainvoke`` answers replay. A session whose agent has such tools needs it: ``forget``
        raises ``NeedsAsync`` there, before anything changes."""
        import asyncio

        from unsee.plugins.forget import replay_loop

        token = replay_loop.set(asyncio.get_running_loop())
        try:  # (to_thread copies this context: the worker sees the loop)
            return await asyncio.to_thread(self.forget, thread_id, event, strategy, **kw)
        finally:
            replay_loop.reset(token)

    # every other action, the same way (its work is the database's and the disk's: a worker thread)
    aerase = _in_thread("erase")
    aaudit = _in_thread("audit")
    aretention = _in_thread("retention")
    aerase_subject = _in_thread("erase_subject")
    asurface = _in_thread("surface")
    aview = _in_thread("view")
    aexport_otlp = _in_thread("export_otlp")
    aexport_jaeger_json = _in_thread("export_jaeger_json")

    def close(self) -> None:
        if self.environments is not None:
            self.environments.close()
        try:
            self.recorder.run_tasks()  # (a run's last spans end before the exporters flush)
            self.tracer_provider.force_flush()
            if self._own_provider:
                self.tracer_provider.shutdown()
        except Exception:
            log.debug("tracer provider shutdown failed", exc_info=True)
        self.recorder.run_leases.table.close()  # before the store: on PostgreSQL they share its pool
        self.recorder.forks.close()
        if "ledger" in self.__dict__:
            # PostgreSQL: its connections hold calls' locks (the store's pool closes below); SQLite:
            # one connection per thread that used it, each with the file, its WAL and shared memory.
            # A later ``u.ledger`` opens the file again.
            self.__dict__.pop("ledger").close()
        self.store.close()
        if "keystore" in self.__dict__:  # (opened only if used)
            self.keystore.close()
        # the exit hook holds this object: once closed, nothing is left for it to do, and dropping
        # it lets a closed Unsee (its local model's weights, caches and records) be freed
        atexit.unregister(self.close)
