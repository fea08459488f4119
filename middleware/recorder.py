"""The recorder: turns agent events into artifacts, checkpoints and spans.

``Recorder`` is framework-neutral bookkeeping plus span emission; the
LangChain hook adapter lives in ``hooks.py`` and the memory middleware in
``memory.py``. Every public entry point is an observer: it logs, counts and
marks the session incomplete on failure instead of raising into the agent.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode, Tracer

from . import semconv as sc
from .deferred import MAX_EVENTS_PER_SPAN, DeferredRecording, TaskQueue, session_attributes  # noqa: F401
from .agent_registry import AgentRegistry
from .leases import LeaseTable
from .hashing import ContentHasher, short_id
from .interception import InterceptorRegistry
from .run_activity import RunActivity
from .run_leases import RunLeases
from .records import Artifact, ArtifactType, Checkpoint, CheckpointKind
from .session_state import SessionState
from .state_flow import prompt_parents
from .store import Batch, ProvenanceStore
from .tokens import TokenCounter

log = logging.getLogger("unsee.recorder")

#: Optional hook returning an environment snapshot id for a session (sandbox).
EnvSnapshotter = Callable[[str], "str | None"]


@dataclass
class ModelCallScope:
    """Shared between the recorder and the memory middleware during one model call.

    Whichever of the two wraps the other, both find the same scope in a
    context variable: the memory middleware adds the prompt blocks it
    injected, the recorder puts them in the call's prompt manifest.
    """

    blocks: list[tuple[str, str]] = field(default_factory=list)  # (artifact id, injected text)
    _prompt: tuple[tuple[str, str], ...] | None = field(default=None, repr=False)
    _prompt_of: Any = field(default=None, repr=False, compare=False)

    @property
    def prompt(self) -> tuple[tuple[str, str], ...]:
        """The recorded prompt of the call as the recorder saw it: (artifact id, content hash)
        of each manifest entry, in order (a replay compares it with a recorded turn's). Made
        when first asked for: a long thread's prompt is long, and only a replay asks."""
        if self._prompt is None:
            self._prompt = self._prompt_of() if self._prompt_of is not None else ()
            self._prompt_of = None
        return self._prompt

    @prompt.setter
    def prompt(self, value: tuple[tuple[str, str], ...]) -> None:
        self._prompt, self._prompt_of = tuple(value), None

    def prompt_from(self, manifest: list[str], hashes: dict[str, str]) -> None:
        """The prompt is ``manifest`` with the content hashes ``hashes`` holds (made when asked)."""
        self._prompt, self._prompt_of = None, lambda: tuple(zip(manifest, map(hashes.get, manifest, repeat(""))))


current_scope: contextvars.ContextVar[ModelCallScope | None] = contextvars.ContextVar(
    "unsee_model_call_scope", default=None
)
#: (session id, artifact id) of the tool call or model turn now executing.
current_producer: contextvars.ContextVar[tuple[str, str] | None] = contextvars.ContextVar(
    "unsee_current_producer", default=None
)


def _after_tasks(fn):
    """A synchronous primitive: the queued recording work is done first (its token offsets and
    span contexts are this one's input), and none runs elsewhere meanwhile."""

    @functools.wraps(fn)
    def call(self, *args, **kwargs):
        with self.tasks.lock:
            self.tasks.run()
            return fn(self, *args, **kwargs)

    return call


class Recorder(DeferredRecording):
    """Records one or many sessions into a store through OpenTelemetry spans.

    The hooks hand most of the work to :attr:`tasks` (:mod:`.deferred`); the
    primitives below are the synchronous ones (the memory middleware's)."""

    def __init__(
        self,
        store: ProvenanceStore,
        tracer: Tracer,
        hasher: ContentHasher,
        counter_factory: Callable[[object | None], TokenCounter],
        content_in_spans: bool = False,
        env_snapshotter: EnvSnapshotter | None = None,
        leases: LeaseTable | None = None,
    ):
        self.store = store
        self.built = getattr(store, "built", None)
        self.tracer = tracer
        self.hasher = hasher
        self.counter_factory = counter_factory
        self.content_in_spans = content_in_spans
        self.env_snapshotter = env_snapshotter
        self.failures = 0
        self._states: dict[str, SessionState] = {}
        #: session id -> (artifacts, checkpoints) its state is first built from (``seed_state``)
        self._seeds: dict[str, tuple[list, list]] = {}
        self._states_lock = threading.Lock()
        self._span_content: dict[str, str] = {}
        self.interceptors = InterceptorRegistry()
        #: the compiled agent that ran each session (learned on first run)
        self.agents = AgentRegistry()
        #: memory after a fork (``fork_watch.ForkWatch``): orphaned store items found at a run's start
        self.forks: Any = None  # (typed loosely: fork_watch imports the recording middleware)
        #: recording work handed off by the hooks; the store's writer runs it before each write
        self.tasks = TaskQueue()
        #: runs in progress and calls waited on: when the store's writer may work
        self.activity = RunActivity(store, self.tasks)
        #: the run lease of each session this process runs (``leases``: the home's lease table;
        #: None: this process only)
        self.run_leases = RunLeases(leases, store, self.tasks)
        add_producer = getattr(store, "add_producer", None)
        if add_producer is not None:
            add_producer(self.tasks.run, self.activity.agent_busy)
        after_marks = getattr(store, "after_marks", None)
        if after_marks is not None and leases is not None:
            after_marks(leases.flush_releases)  # (the run leases one write covered: one transaction)
        #: system prompt text -> its artifact id (hashing a long prompt on every call costs)
        self._system_ids: dict[str, str] = {}

    # -- session state ----------------------------------------------------
    def state(self, session_id: str, model: object | None = None) -> SessionState:
        with self._states_lock:
            st = self._states.get(session_id)
            if st is None:
                counter = self.counter_factory(model)
                seed = self._seeds.pop(session_id, None)
                if seed is not None:
                    st = SessionState.rebuild(session_id, counter, *seed)
                elif self.store.has_session(session_id, flush=False):
                    st = SessionState.rebuild(
                        session_id, counter, self.store.artifacts(session_id),
                        self.store.checkpoints(session_id),
                    )
                else:
                    st = SessionState(session_id=session_id, counter=counter)
                self._states[session_id] = st
            return st

    def seed_state(self, session_id: str, artifacts: list, checkpoints: list) -> None:
        """Build ``session_id``'s state, when first needed, from these records instead of
        reading the store: a replay's fork hands over its source's prefix, which the caller
        already holds, so the fork's first turn does not read the whole session back."""
        with self._states_lock:
            self._states.pop(session_id, None)
            self._seeds[session_id] = (list(artifacts), list(checkpoints))

    # -- runs -------------------------------------------------------------
    @contextlib.contextmanager
    def exclusive(self, session_id: str, wait: bool = True) -> Iterator[None]:
        """No run on the session, in this process or another, while the block runs (a forget,
        an erasure): waits for this process's runs, then holds the session's forget lease."""
        self.activity.wait_idle(session_id, wait=wait)
        self.store.flush()  # (runs the queued tasks first; the run leases this process's runs gave back, once their records are written)
        # a run of this process that starts from here on takes the run lease: the forget lease waits for it
        with self.run_leases.forget_lease(session_id, wait=wait):
            yield

    def forget_state(self, session_id: str) -> None:
        """Drop cached bookkeeping (the store stays the source of truth)."""
        with self._states_lock:
            self._states.pop(session_id, None)
            self._seeds.pop(session_id, None)

    def fail(self, session_id: str | None, exc: BaseException) -> None:
        self.failures += 1
        log.warning("recording failed for session %s: %r", session_id, exc, exc_info=exc)
        if session_id:
            self.store.mark_failure(session_id, repr(exc))

    def fail_span(self, session_id: str, span: Span, exc: BaseException) -> None:
        """A recording failure inside an operation: count it and still close the span."""
        self.fail(session_id, exc)
        try:
            self.tasks.run()  # (what is queued for the span first)
            span.end()
        except Exception:
            log.debug("ending the span of a failed recording failed", exc_info=True)

    # -- primitives -------------------------------------------------------
    @_after_tasks
    def artifact(
        self,
        st: SessionState,
        type_: ArtifactType,
        aid: str,
        content: str,
        *,
        parents: Iterable[str] = (),
        source_ids: Iterable[str] = (),
        step: int | None = None,
        committed: bool = True,
        attrs: dict[str, Any] | None = None,
        count_tokens: bool = True,
    ) -> Artifact:
        """Build an artifact (not yet emitted) and queue its content for the vault."""
        n = st.counter.count(content) if count_tokens and content else 0
        a = Artifact(
            id=aid,
            session_id=st.session_id,
            type=type_,
            parents=tuple(dict.fromkeys(parents)),
            source_ids=tuple(source_ids),
            token_span=st.advance(n),
            turn=st.turn,
            step=st.step if step is None else step,
            seq=st.next_seq(),
            committed=committed,
            content_hash=self.hasher.hash(content),
            attrs=attrs or {},
        )
        self.store.submit(Batch(session_id=st.session_id, content={aid: content}))
        if self.content_in_spans:
            self._span_content[aid] = content
        return a

    def links_for(self, st: SessionState, parents: Iterable[str]) -> list[Link]:
        links = []
        for p in parents:
            ctx = st.context_of(p)
            if ctx is not None:
                links.append(Link(ctx, {"unsee.link.artifact": p}))
        return links

    @_after_tasks
    def start_span(
        self,
        st: SessionState,
        name: str,
        primary: Artifact | None = None,
        attributes: dict[str, Any] | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
    ) -> Span:
        parent_ctx = trace.set_span_in_context(st.root) if st.root is not None else None
        attrs: dict[str, Any] = {
            **session_attributes(st),
            sc.TURN: st.turn,
            sc.TOKENIZER: st.counter.name,
        }
        if attributes:
            attrs.update(attributes)
        links = []
        if primary is not None:
            attrs.update(sc.artifact_attributes(primary, self._content(st, primary)))
            links = self.links_for(st, primary.parents)
        span = self.tracer.start_span(name, context=parent_ctx, kind=kind, attributes=attrs, links=links)
        if primary is not None:
            self._note(span, primary)
        return span

    @_after_tasks
    def link(self, st: SessionState, span: Span, artifact_ids: Iterable[str]) -> None:
        """Add span links to the spans that recorded ``artifact_ids`` (data-flow parents)."""
        add = getattr(span, "add_link", None)
        if add is None:
            return
        for aid in artifact_ids:
            ctx = st.context_of(aid)
            if ctx is not None:
                add(ctx, {"unsee.link.artifact": aid})

    @_after_tasks
    def set_primary(self, st: SessionState, span: Span, a: Artifact) -> None:
        """Attach the primary artifact once it is known (after the operation ran).

        The caller has linked the parents; the ``unsee.artifact.parents``
        attribute carries them too, since Jaeger's graph does not draw links.
        """
        span.set_attributes(sc.artifact_attributes(a, self._content(st, a)))
        self._note(span, a)
        st.remember(a, span.get_span_context())

    @_after_tasks
    def add_artifact_event(self, st: SessionState, span: Span, a: Artifact) -> None:
        # Span processors cap events per span (128 by default, and a user's
        # provider may set less): past a margin, an artifact gets its own span.
        if len(getattr(span, "events", ()) or ()) >= MAX_EVENTS_PER_SPAN:
            self.emit(st, a.type.value, a)
            return
        span.add_event(sc.ARTIFACT_EVENT, sc.artifact_attributes(a, self._content(st, a)))
        self._note(span, a)
        st.remember(a, span.get_span_context())

    @_after_tasks
    def emit(self, st: SessionState, name: str, a: Artifact, attributes: dict[str, Any] | None = None) -> None:
        """A short span whose only job is to carry one artifact."""
        span = self.start_span(st, name, a, attributes)
        st.remember(a, span.get_span_context())
        span.end()

    def _content(self, st: SessionState, a: Artifact) -> str | None:
        if not self.content_in_spans:
            return None
        return self._span_content.pop(a.id, None)

    @_after_tasks
    def checkpoint(
        self,
        st: SessionState,
        kind: CheckpointKind,
        *,
        step: int | None = None,
        langgraph_checkpoint_id: str | None = None,
        env: bool = False,
    ) -> Checkpoint:
        """Register a checkpoint (metadata only) in its own short span."""
        env_id = self._env_snapshot(st, env)
        seq = st.next_seq()
        cid = short_id("ckpt", st.session_id, str(seq))
        manifest, ref = st.checkpoint_contexts.encode(cid, tuple(st.live))
        cp = Checkpoint(
            id=cid,
            session_id=st.session_id,
            kind=kind,
            step=st.step + 1 if step is None else step,
            turn=st.turn,
            seq=seq,
            token_offset=st.cache_offset if st.cache_offset is not None else st.offset,
            cache_handle=st.cache_handle,
            env_snapshot_id=env_id,
            prompt_manifest=manifest,
            context=ref,
            langgraph_checkpoint_id=langgraph_checkpoint_id,
            langgraph_thread_id=st.session_id if langgraph_checkpoint_id else None,
            created_ns=time.time_ns(),
        )
        span = self.start_span(st, f"checkpoint {kind.value}", attributes=sc.checkpoint_attributes(cp))
        self._note(span, cp)
        span.end()
        return cp

    def _env_snapshot(self, st: SessionState, env: bool) -> str | None:
        """The session's environment snapshot id for a checkpoint, when one is asked and taken."""
        if not env or self.env_snapshotter is None:
            return None
        try:
            return self.env_snapshotter(st.session_id)
        except Exception as exc:  # a snapshot failure must not stop the agent
            self.fail(st.session_id, exc)
            return None

    # -- ids --------------------------------------------------------------
    def system_prompt_id(self, st: SessionState, text: str) -> str:
        aid = self._system_ids.get(text)
        if aid is None:
            if len(self._system_ids) >= 256:
                self._system_ids.clear()
            aid = self._system_ids[text] = short_id("sys", self.hasher.hash(text))
        return aid

    def ensure_system_prompt(self, st: SessionState, text: str) -> str:
        """The system prompt's artifact id, recorded in the session the first time (its token
        count is taken once per prompt text, not once per session)."""
        aid = self.system_prompt_id(st, text)
        if aid not in st.known:
            # (a middleware may build it from state, e.g. a todo list: the state writes it holds)
            p = self.record(st, ArtifactType.PROMPT_BLOCK, aid, text, parents=prompt_parents(self, st, text),
                            source_ids=("system_prompt",), attrs={"role": "system"}, count_once=True)
            self.emit_later(st, "prompt_block system", p)
        return aid


def record_json(value: Any) -> str:
    """The JSON text of a recorded artifact's body (a tool call, a model turn's calls).

    Readable and stable (sorted keys, non-ASCII kept, ``str`` for what JSON
    cannot hold): it is the text the content vault stores and hashes, not an
    identity. Argument identity is :func:`unsee.sandbox.ledger.canonical_json`.
    """
    return json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)


def error_status(span: Span, exc: BaseException) -> None:
    span.record_exception(exc)
    span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
