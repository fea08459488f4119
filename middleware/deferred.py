"""Recording work the agent's thread hands off: token counts, records, span attributes and ends.

What the agent's thread must do itself is small: take the ids, seq and step
numbers (they fix the order), hash the content (a replay compares prompt
hashes during the run), snapshot what changes under it (the live message
list, the environment), and start the spans that are *current* while a model
or tool runs (nested instrumentation hangs under them). Everything else —
counting tokens, building the records and their attributes, putting the
records made outside a model or tool call (checkpoints, inputs, prompt
blocks) as events onto the span that follows them, adding links and events,
ending spans — is a task in :class:`TaskQueue`.

Tasks run in the order they were queued, once, by whichever thread drains the
queue first: the store's writer thread (kicked as the agent starts to wait on
a model or a tool, so the work overlaps the wait, and pausing when the agent
runs Python again), a flush (readers see everything), or a synchronous
recorder call (which needs the token offsets and span contexts the queued
tasks produce). So the records and token spans are the ones synchronous
recording made, in the same order; spans reach the tracer provider's
processors when the tasks run.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind

from . import semconv as sc
from .context import configurable
from .built_records import BuiltRecords
from .hashing import short_id
from .records import Artifact, ArtifactType, Checkpoint, CheckpointKind, ContextRef
from .store_writer import Batch

if TYPE_CHECKING:
    from .session_state import SessionState

log = logging.getLogger("unsee.recorder")

#: artifact events per span before an artifact gets a span of its own (span processors cap
#: events per span: 128 by default, and a user's provider may set less)
MAX_EVENTS_PER_SPAN = 100


def session_attributes(st: SessionState) -> dict[str, Any]:
    """The session a thread's spans belong to: the thread itself, or — in a forget's replay,
    which rebuilds the session in a scratch thread (``configurable.unsee_session``) — the
    session, with the scratch thread and the event in their own attributes. So a trace
    backend finds the rebuilt part under the session's id."""
    if st.span_attrs is None:
        conf = configurable()
        real = str(conf.get("unsee_session") or st.session_id)
        attrs: dict[str, Any] = {sc.SESSION: real, sc.GEN_AI_CONVERSATION_ID: real}
        if real != st.session_id:
            attrs[sc.RECORDED_IN] = st.session_id
            if conf.get("unsee_event"):
                attrs[sc.REPLAY_EVENT] = str(conf["unsee_event"])
        st.span_attrs = attrs
    return st.span_attrs


class TaskQueue:
    """Tasks run in order, once, by one thread at a time (``run``)."""

    def __init__(self) -> None:
        self._q: collections.deque[tuple[Callable[..., None], tuple]] = collections.deque()
        #: held while tasks run, and by a synchronous recorder call (reentrant for its thread)
        self.lock = threading.RLock()
        self._running: int | None = None
        #: tasks run so far (tests count them)
        self.done = 0

    def put(self, fn: Callable[..., None], *args: Any) -> None:
        self._q.append((fn, args))  # (atomic: no lock on the agent's thread)

    def __bool__(self) -> bool:
        return bool(self._q)

    def __len__(self) -> int:
        return len(self._q)

    def run(self, pause: Callable[[], bool] | None = None) -> None:
        """Run every task queued so far (and those queued meanwhile); return once they are done,
        by this thread or another. ``pause``: asked before each task; when it says so, return
        and leave the rest queued (the store's writer, when the agent gets busy)."""
        if self._running == threading.get_ident():
            return  # (a task that ends up here again must not run later tasks before it is done)
        with self.lock:  # (also when none is queued: one may be running on another thread)
            self._running = threading.get_ident()
            q = self._q
            try:
                while q:
                    if pause is not None and pause():
                        return
                    fn, args = q.popleft()
                    try:
                        fn(*args)
                    except Exception:  # tasks record their own failures; this is a bug in one
                        log.exception("a recording task failed")
                    self.done += 1
            finally:
                self._running = None


class Pending:
    """An artifact whose record (token span) is made by a task; its id, type, hash and parents
    are known at once."""

    __slots__ = ("id", "type", "parents", "content_hash", "fields", "artifact")

    def __init__(self, aid: str, type_: ArtifactType, parents: tuple[str, ...], content_hash: str,
                 fields: dict[str, Any]):
        self.id = aid
        self.type = type_
        self.parents = parents
        self.content_hash = content_hash
        self.fields = fields
        #: the record, once its task ran (None if it failed: the failure is recorded)
        self.artifact: Artifact | None = None


class DeferredRecording:
    """The recorder's hand-off primitives (mixed into :class:`~.recorder.Recorder`, whose
    ``tracer``, ``store``, ``hasher``, ``fail``, ``links_for``, ``_content`` and ``_env_snapshot``
    they use)."""

    tasks: TaskQueue
    #: where the records put on spans are noted for the span processor (None: it decodes them)
    built: BuiltRecords | None = None

    def run_tasks(self) -> None:
        """Do the queued recording work now (in order, on this thread)."""
        self.tasks.run()

    def _note(self, span: Span, record: Artifact | Checkpoint) -> None:
        """``record`` went onto ``span``: the span processor takes it from here as built
        (``built_records``) instead of decoding the span's attributes back into it."""
        built = self.built
        if built is not None:
            built.note(span, record)

    def _base(self, st: SessionState) -> tuple[dict[str, Any], Any]:
        """(the attributes every span of the session starts with, its parent), as now."""
        attrs = {**session_attributes(st), sc.TURN: st.turn, sc.TOKENIZER: st.counter.name}
        return attrs, st.root

    @staticmethod
    def _context(parent: Span | None):
        return trace.set_span_in_context(parent) if parent is not None else None

    # -- records ------------------------------------------------------------
    def record(self, st: SessionState, type_: ArtifactType, aid: str, content: str, *,
               parents: Iterable[str] = (), source_ids: Iterable[str] = (), step: int | None = None,
               committed: bool = True, attrs: dict[str, Any] | None = None, count_tokens: bool = True,
               count_once: bool = False, distinct: bool = False, context: ContextRef | None = None) -> Pending:
        """:meth:`~.recorder.Recorder.artifact`, with the token count, the record and the vault
        write left to a task (the order of the offsets is the order of these calls).
        ``count_once``: the count of this text is kept (a system prompt each session repeats);
        ``distinct``: the parents are known to be distinct (no pass to drop repeats);
        ``context``: the parents are a model turn's manifest stored as a delta (``context_delta``)."""
        parents = tuple(parents) if distinct else tuple(dict.fromkeys(parents))
        p = Pending(aid, type_, parents, self.hasher.hash(content), {
            "source_ids": tuple(source_ids), "turn": st.turn, "step": st.step if step is None else step,
            "seq": st.next_seq(), "committed": committed, "attrs": attrs or {}, "context": context})
        self.tasks.put(self._make_record, st, p, content, count_tokens, count_once)
        return p

    def _count(self, st: SessionState, p: Pending, content: str, once: bool) -> int:
        if not once:
            return st.counter.count(content)
        counts: dict[tuple[str, str], int] = self.__dict__.setdefault("_counts", {})
        key = (st.counter.name, p.content_hash)
        n = counts.get(key)
        if n is None:
            if len(counts) >= 256:
                counts.clear()
            n = counts[key] = st.counter.count(content)
        return n

    def _make_record(self, st: SessionState, p: Pending, content: str, count_tokens: bool, once: bool) -> None:
        try:
            n = self._count(st, p, content, once) if count_tokens and content else 0
            f = p.fields
            p.artifact = Artifact(id=p.id, session_id=st.session_id, type=p.type, parents=p.parents,
                                  source_ids=f["source_ids"], token_span=st.advance(n), turn=f["turn"],
                                  step=f["step"], seq=f["seq"], committed=f["committed"],
                                  content_hash=p.content_hash, attrs=f["attrs"], context=f["context"])
            self.store.submit(_content_batch(st.session_id, p.id, content))
            if self.content_in_spans:
                self._span_content[p.id] = content
        except Exception as exc:
            self.fail(st.session_id, exc)

    # -- records that no operation span carries yet --------------------------------------
    # A record made outside a model or tool call (the turn's checkpoint and its input, a system
    # prompt block, a compaction's summary, a consequential tool's checkpoint) used to get a
    # short span of its own. It is now an event on the next operation span the run opens (the
    # chat or execute_tool span that follows it), or on the run's span if none opens: the same
    # attributes, a span fewer each (what a span costs is most of what recording costs).
    def emit_later(self, st: SessionState, name: str, p: Pending, attributes: dict[str, Any] | None = None) -> None:
        """The artifact ``p`` as an event on the next operation span (see above); ``name`` is
        its kind (``user_input``, ``prompt_block system``, ...), kept on the event."""
        st.remember(p, None)  # (known at once; its span context is the host span's, set by the task)
        extra = {sc.RECORD_KIND: name}
        if attributes:
            extra.update(attributes)
        st.pending_events.append((p, extra, time.time_ns()))

    def checkpoint_later(self, st: SessionState, kind: CheckpointKind, *, step: int | None = None,
                         langgraph_checkpoint_id: str | None = None, env: bool = False) -> None:
        """:meth:`~.recorder.Recorder.checkpoint`: what changes under it is taken now (the
        environment snapshot, the live messages, the cache), the record by a task queued now
        (its token offset is the one the records queued before it reach), and it goes onto the
        next operation span as an event."""
        env_id = self._env_snapshot(st, env)
        seq = st.next_seq()
        cid = short_id("ckpt", st.session_id, str(seq))
        manifest, ref = st.checkpoint_contexts.encode(cid, tuple(st.live))
        fields = {
            "id": cid, "session_id": st.session_id, "kind": kind, "step": st.step + 1 if step is None else step,
            "turn": st.turn, "seq": seq, "cache_handle": st.cache_handle, "env_snapshot_id": env_id,
            "prompt_manifest": manifest, "context": ref, "langgraph_checkpoint_id": langgraph_checkpoint_id,
            "langgraph_thread_id": st.session_id if langgraph_checkpoint_id else None,
            "created_ns": time.time_ns(),
        }
        held = _HeldCheckpoint()
        self.tasks.put(self._make_checkpoint, st, fields, st.cache_offset, held)
        st.pending_events.append((held, None, fields["created_ns"]))

    def _make_checkpoint(self, st: SessionState, fields: dict[str, Any], cache_offset: int | None,
                         held: "_HeldCheckpoint") -> None:
        try:
            held.checkpoint = Checkpoint(token_offset=cache_offset if cache_offset is not None else st.offset,
                                         **fields)
        except Exception as exc:
            self.fail(st.session_id, exc)

    def _take_events(self, st: SessionState, span: Span) -> None:
        """The records waiting for a span go onto ``span`` (by a task, after their records')."""
        if st.pending_events:
            events, st.pending_events = st.pending_events, []
            self.tasks.put(self._attach, st, span, events)

    def settle_events(self, st: SessionState, root: Span | None) -> None:
        """The run ends: records no operation span took go onto its span ``root``, or get short
        spans of their own when it has none."""
        if not st.pending_events:
            return
        if root is not None:
            self._take_events(st, root)
            return
        events, st.pending_events = st.pending_events, []
        base, parent = self._base(st)
        self.tasks.put(self._own_spans, st, events, base, parent)

    def _attach(self, st: SessionState, span: Span, events: list) -> None:
        start = getattr(span, "start_time", None) or 0
        for what, extra, at in events:
            try:
                if isinstance(what, _HeldCheckpoint):
                    cp = what.checkpoint
                    if cp is not None:
                        span.add_event(sc.CHECKPOINT_EVENT, sc.checkpoint_attributes(cp), timestamp=max(at, start))
                        self._note(span, cp)
                        self._link_base(st, span, cp)
                    continue
                a = what.artifact
                if a is None:
                    continue  # (its record failed, and says so)
                if len(getattr(span, "events", ()) or ()) >= MAX_EVENTS_PER_SPAN:
                    base, parent = self._base(st)
                    base.update(extra)
                    self._emit(st, str(extra.get(sc.RECORD_KIND) or a.type.value), what, base, parent, at)
                    continue
                attrs = sc.artifact_attributes(a, self._content(st, a))
                attrs.update(extra)
                span.add_event(sc.ARTIFACT_EVENT, attrs, timestamp=max(at, start))
                self._note(span, a)
                if a.parents:
                    self._link(st, span, list(a.parents))
                st.known[a.id] = span.get_span_context()
            except Exception as exc:
                self.fail(st.session_id, exc)

    @staticmethod
    def _link_base(st: SessionState, span: Span, cp: Checkpoint) -> None:
        """The span that holds a checkpoint's base (a reader of a delta finds it), once per span."""
        ctx = span.get_span_context()
        held = st.checkpoint_spans
        held[cp.id] = ctx
        if len(held) > 16:
            del held[next(iter(held))]
        base = held.get(cp.context.base) if cp.context is not None else None
        add = getattr(span, "add_link", None)
        if base is not None and add is not None and base.span_id != ctx.span_id:
            add(base, {"unsee.link.checkpoint": cp.context.base})

    def _own_spans(self, st: SessionState, events: list, base: dict[str, Any], parent: Span | None) -> None:
        for what, extra, at in events:
            attrs = dict(base)
            if isinstance(what, _HeldCheckpoint):
                if what.checkpoint is not None:
                    self._checkpoint_span(st, what.checkpoint, attrs, parent, at)
                continue
            attrs.update(extra)
            self._emit(st, str(extra.get(sc.RECORD_KIND) or what.type.value), what, attrs, parent, at)

    def _emit(self, st: SessionState, name: str, p: Pending, attrs: dict[str, Any], parent: Span | None,
              at: int) -> None:
        """A short span carrying one artifact (when no span can take it as an event)."""
        a = p.artifact
        if a is None:
            return  # (its record failed, and says so)
        try:
            attrs.update(sc.artifact_attributes(a, self._content(st, a)))
            span = self.tracer.start_span(name, context=self._context(parent), kind=SpanKind.INTERNAL,
                                          attributes=attrs, links=self.links_for(st, a.parents), start_time=at)
        except Exception as exc:
            self.fail(st.session_id, exc)
            return
        st.known[a.id] = span.get_span_context()
        self._note(span, a)
        span.end(end_time=at)

    def _checkpoint_span(self, st: SessionState, cp: Checkpoint, attrs: dict[str, Any], parent: Span | None,
                         at: int) -> None:
        try:
            attrs.update(sc.checkpoint_attributes(cp))
            span = self.tracer.start_span(f"checkpoint {cp.kind.value}", context=self._context(parent),
                                          kind=SpanKind.INTERNAL, attributes=attrs, start_time=at)
        except Exception as exc:
            self.fail(st.session_id, exc)
            return
        self._note(span, cp)
        span.end(end_time=at)

    # -- operation spans (current while the model or tool runs) ------------------
    def open_span(self, st: SessionState, name: str, attributes: dict[str, Any] | None = None,
                  kind: SpanKind = SpanKind.INTERNAL) -> Span:
        """Start an operation's span now (no record on it yet: :meth:`set_primary_later`)."""
        attrs, parent = self._base(st)
        if attributes:
            attrs.update(attributes)
        span = self.tracer.start_span(name, context=self._context(parent), kind=kind, attributes=attrs)
        self._take_events(st, span)  # (the records made since the previous operation span)
        return span

    def link_later(self, st: SessionState, span: Span, artifact_ids: Iterable[str]) -> None:
        """:meth:`~.recorder.Recorder.link`, by a task (the spans of the ids may be tasks too)."""
        ids = list(artifact_ids)
        if ids:
            self.tasks.put(self._link, st, span, ids)

    def _link(self, st: SessionState, span: Span, ids: list[str]) -> None:
        add = getattr(span, "add_link", None)
        if add is None:
            return
        context_of = st.context_of
        try:
            for aid in ids:
                ctx = context_of(aid)
                if ctx is not None:
                    add(ctx, {"unsee.link.artifact": aid})
        except Exception as exc:
            self.fail(st.session_id, exc)

    def set_attributes_later(self, st: SessionState, span: Span,
                             attributes: dict[str, Any] | Callable[[], dict[str, Any]]) -> None:
        """``span.set_attributes``, by a task (``attributes`` may be a function of the records)."""
        self.tasks.put(self._set_attributes, st, span, attributes)

    def _set_attributes(self, st: SessionState, span: Span, attributes) -> None:
        try:
            span.set_attributes(attributes() if callable(attributes) else attributes)
        except Exception as exc:
            self.fail(st.session_id, exc)

    def set_primary_later(self, st: SessionState, span: Span, p: Pending) -> None:
        """:meth:`~.recorder.Recorder.set_primary`, by a task."""
        st.remember(p, None)
        self.tasks.put(self._set_primary, st, span, p)

    def _set_primary(self, st: SessionState, span: Span, p: Pending) -> None:
        a = p.artifact
        if a is None:
            return
        try:
            span.set_attributes(sc.artifact_attributes(a, self._content(st, a)))
        except Exception as exc:
            self.fail(st.session_id, exc)
            return
        self._note(span, a)
        st.known[a.id] = span.get_span_context()

    def add_artifact_event_later(self, st: SessionState, span: Span, p: Pending) -> None:
        """:meth:`~.recorder.Recorder.add_artifact_event`, by a task."""
        st.remember(p, None)
        self.tasks.put(self._add_artifact_event, st, span, p, st.turn, st.root, time.time_ns())

    def _add_artifact_event(self, st: SessionState, span: Span, p: Pending, turn: int, parent: Span | None,
                            at: int) -> None:
        a = p.artifact
        if a is None:
            return
        if len(getattr(span, "events", ()) or ()) >= MAX_EVENTS_PER_SPAN:
            base = {**session_attributes(st), sc.TURN: turn, sc.TOKENIZER: st.counter.name}
            self._emit(st, a.type.value, p, base, parent, at)
            return
        try:
            span.add_event(sc.ARTIFACT_EVENT, sc.artifact_attributes(a, self._content(st, a)), timestamp=at)
        except Exception as exc:
            self.fail(st.session_id, exc)
            return
        self._note(span, a)
        st.known[a.id] = span.get_span_context()

    def end_later(self, st: SessionState, span: Span) -> None:
        """``span.end()``, by a task (at the time of this call)."""
        self.tasks.put(self._end, st, span, time.time_ns())

    def _end(self, st: SessionState, span: Span, at: int) -> None:
        try:
            span.end(end_time=at)
        except Exception as exc:
            self.fail(st.session_id, exc)


class _HeldCheckpoint:
    """A checkpoint record made by a task, waiting for the span that carries it."""

    __slots__ = ("checkpoint",)

    def __init__(self) -> None:
        self.checkpoint: Checkpoint | None = None


def _content_batch(session_id: str, aid: str, content: str) -> Batch:
    return Batch(session_id=session_id, content={aid: content})
