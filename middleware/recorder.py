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
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode, Tracer

from . import semconv as sc
from .deferred import MAX_EVENTS_PER_SPAN, DeferredRecording, TaskQueue, session_attributes  # noqa: F401
from .errors import SessionBusy
from .leases import NAMESPACE_MARK
from .hashing import ContentHasher, short_id
from .interception import InterceptorRegistry
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


#: a run that loaded its state less than this before a forget ended re-checks that state is the head
STALE_WINDOW_S = 60.0
#: queued recording tasks at which an agent that never waits hands them over (``hand_over_backlog``)
TASK_BACKLOG = 2048
#: a run that ended less than this ago (seconds) may be one of runs in a loop (``agent_busy``)
RUN_GAP_S = 0.02
#: calls that take less than this, lately, do not wake the store's writer (``worth_waking``)
WAKE_FOR_CALL_S = 0.002


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
        leases: Any = None,
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
        #: session id -> the compiled agent that ran it (learned on first run)
        self.agents: dict[str, Any] = {}
        self.last_agent: Any = None
        self._running: dict[str, int] = {}
        self._running_cond = threading.Condition()
        #: cross-process session leases (``leases.LeaseTable``); None: this process only
        self.leases: Any = leases
        #: sessions whose run lease this process's runs hold (one hold per session)
        self._leased: set[str] = set()
        #: memory after a fork (``fork_watch.ForkWatch``): orphaned store items found at a run's start
        self.forks: Any = None
        #: recording work handed off by the hooks; the store's writer runs it before each write
        self.tasks = TaskQueue()
        #: model and tool calls in progress (the agent waits on them: the writer's time to work)
        self._waiting = 0
        self._waiting_lock = threading.Lock()
        #: when the last run of this process ended (monotonic; ``agent_busy``)
        self._last_end = 0.0
        #: kind of call -> seconds such calls took lately (``worth_waking``)
        self._call_time: dict[object, float] = {}
        add_producer = getattr(store, "add_producer", None)
        if add_producer is not None:
            add_producer(self.tasks.run, self.agent_busy)
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

    # -- runs and agents -------------------------------------------------
    def mark_running(self, session_id: str, running: bool) -> None:
        with self._running_cond:
            n = self._running.get(session_id, 0) + (1 if running else -1)
            if n > 0:
                self._running[session_id] = n
            else:
                self._running.pop(session_id, None)
                self._last_end = time.monotonic()
            self._running_cond.notify_all()

    def acquire_run(self, session_id: str) -> str | None:
        """Take the session's run lease for this process's runs there (once: a run that resumes,
        or goes on after a retried error, keeps or re-takes it). Waits while a forget, in any
        process, has the session. Returns why the state this run loaded must be checked:
        ``"waited"`` (it overlapped a forget), ``"recent"`` (a forget ended shortly before),
        else None."""
        if self.leases is None:
            return None
        if session_id in self._leased:
            self.leases.touch(session_id)
            return None
        t0 = time.time_ns()
        if self.leases.try_acquire(session_id, "run"):
            self._leased.add(session_id)
            return "recent" if self.leases.forgot_since(session_id, t0 - int(STALE_WINDOW_S * 1e9)) else None
        self.leases.acquire(session_id, "run")  # SessionBusy after the timeout: the run fails, nothing written
        self._leased.add(session_id)
        return "waited"

    def release_run(self, session_id: str) -> None:
        """Give the run lease back (idempotent: only the first call of a run releases).

        The lease row is updated by the store's writer once the run's records are written (a
        task queues the release after them): a forget in another process, which polls for the
        lease, never plans on a partial record; one of this process flushes first
        (``exclusive``)."""
        if self.leases is not None and session_id in self._leased:
            self._leased.discard(session_id)
            self.tasks.put(self._release_after_write, session_id)

    def _release_after_write(self, session_id: str) -> None:
        after_write = getattr(self.store, "after_write", None)
        if after_write is None:
            self.leases.release(session_id, "run")
            return
        # once the run's records (queued before this) are written, the lease's release is queued;
        # the writer writes the releases of that write together (``after_marks``)
        after_write(functools.partial(self.leases.release, session_id, "run", flush=False))

    @contextlib.contextmanager
    def exclusive(self, session_id: str, wait: bool = True):
        """No run on the session, in this process or another, while the block runs (a forget,
        an erasure): waits for this process's runs, then holds the session's forget lease."""
        self.wait_idle(session_id, wait=wait)
        self.store.flush()  # (runs the queued tasks first; the run leases this process's runs gave back, once their records are written)
        if self.leases is None:
            yield
            return
        # a run of this process that starts from here on takes the run lease: the forget lease waits for it
        with self.leases.held(session_id, "forget", wait=wait):
            self.reap_dead_runs(session_id)  # (a run lease left now is a dead holder's)
            yield

    def reap_dead_runs(self, session_id: str | None = None) -> list[str]:
        """Sessions (all, or ``session_id``) whose run lease a dead process left held: each is
        marked ``run_died`` in the store (its records may stop short of its LangGraph state),
        then the lease row goes. The mark is written before the row is dropped: a crash between
        the two marks it again next time."""
        if self.leases is None:
            return []
        found = []
        try:
            for session, owner in self.leases.dead_runs(session_id):
                if not session.startswith(NAMESPACE_MARK):  # (a memory namespace's lease names no session)
                    self.store.mark_run_died(session, owner)
                    found.append(session)
                    log.warning("a run of session %s died before its records were all written (%s); the "
                                "next forget checks them against the agent's state", session, owner)
                self.leases.drop(session, owner)
        except Exception:  # observer: the next open, or the forget's own lease, tries again
            log.exception("could not check for runs that died holding their lease")
        return found

    def call_began(self, kind: object = None) -> float:
        """A model or tool call starts: the agent waits on it (until :meth:`call_ended`, given
        what this returns and the same ``kind``)."""
        with self._waiting_lock:
            self._waiting += 1
        return time.perf_counter()

    def call_ended(self, kind: object = None, began: float | None = None) -> None:
        with self._waiting_lock:
            self._waiting -= 1
            if began is not None:  # (how long calls of this kind take: an average of the recent ones)
                took = time.perf_counter() - began
                avg = self._call_time.get(kind)
                self._call_time[kind] = took if avg is None else avg + (took - avg) * 0.2

    def worth_waking(self, kind: object = None) -> bool:
        """Whether the store's writer should be woken for a call of ``kind``: calls of that kind
        have lately taken long enough for it to work meanwhile. Waking it for a call that
        returns at once (a scripted model, a quick tool) only makes the two threads trade the
        interpreter lock (each hand-over costs the agent a thread switch)."""
        avg = self._call_time.get(kind)
        return avg is None or avg >= WAKE_FOR_CALL_S

    def hand_over_backlog(self) -> None:
        """An agent that keeps running Python (a scripted or instant model: no wait for the
        writer to work in) flushes what the writer left it, now, between two of its steps
        (``BatchWriter.backlog_due``); an observer: a failure is logged."""
        due = getattr(self.store, "backlog_due", None)
        if due is None or not (len(self.tasks) >= TASK_BACKLOG or due()):
            return
        try:
            self.store.flush()
        except Exception:
            log.exception("could not hand the recording backlog over")

    def agent_busy(self) -> bool:
        """Whether an agent runs Python now: a run is in progress and no model or tool call of
        it waits, or a run ended a moment ago (``RUN_GAP_S``: runs in a loop, the next one
        starting). The store's writer leaves its work to the next wait then (``store_writer``)."""
        if self._waiting > 0:
            return False
        return bool(self._running) or time.monotonic() - self._last_end < RUN_GAP_S

    def is_running(self, session_id: str) -> bool:
        with self._running_cond:
            return session_id in self._running

    def wait_idle(self, session_id: str, wait: bool = True, timeout: float = 300.0) -> None:
        """Return once no run is in progress on the session (or raise ``SessionBusy``)."""
        with self._running_cond:
            if session_id in self._running and not wait:
                raise SessionBusy(session_id)
            if not self._running_cond.wait_for(lambda: session_id not in self._running, timeout):
                raise SessionBusy(session_id, waited=timeout)

    def learn_agent(self, session_id: str, agent: Any) -> None:
        self.agents[session_id] = agent
        self.last_agent = agent

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
