"""Memory: the injection middleware (store reads put into the prompt) and a
recording wrapper for store writes.

``MemoryInjectionMiddleware`` reads items of a LangGraph ``BaseStore``
namespace before each model call, appends them to the system message as a
memory block, and records a checkpoint before the injection, one
``memory_read`` artifact per item (an observation) and a ``prompt_block``
artifact that the model call's prompt manifest includes.
``RecordingStore`` wraps any ``BaseStore``: each put/delete made by a tool or
middleware becomes a ``memory_write`` artifact whose parent is the tool call
(or model turn) executing at the time.

The spans follow the GenAI conventions' memory span (``semconv.MEMORY``: the pinned source and
the choices made): the injection's read is a ``search_memory`` span, a batch of writes one
``upsert_memory`` span per namespace it puts into and one ``delete_memory`` span per namespace it
deletes from (``store.delete`` is a put of None), each with ``gen_ai.memory.store.id`` (the
namespace), ``gen_ai.memory.record.count`` and, for one record, ``gen_ai.memory.record.id`` (its
key): attributes of what is at hand, nothing read or hashed for them. The artifacts stay in
``unsee.artifact`` events on those spans, as before. :class:`MemoryChange` is how a forget or an
erasure says what it changed in the store away from an agent's path (keyed hashes only), for the
``delete_memory`` / ``upsert_memory`` spans of the forget's own trace.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import SystemMessage
from langgraph.store.base import BaseStore, Op, PutOp, Result

from . import semconv as sc
from .hashing import short_id
from .context import current_session
from .hooks import text_of
from .recorder import ModelCallScope, Recorder, current_producer, current_scope
from .records import ArtifactType, CheckpointKind
from .store import Batch

Namespace = tuple[str, ...]
NamespaceFn = Callable[[dict[str, Any]], Namespace]


def source_key(namespace: Sequence[str], key: str) -> str:
    return "memory:" + "/".join(namespace) + "/" + key


def parse_source_key(src: str) -> tuple[tuple[str, ...], str]:
    """The inverse of :func:`source_key`: ``memory:a/b/key`` -> ``(("a", "b"), "key")``."""
    path = src.split(":", 1)[1].split("/")
    return tuple(path[:-1]), path[-1]


def render_item(key: str, value: Any) -> str:
    if isinstance(value, dict) and set(value) == {"text"}:
        value = value["text"]
    return f"- {key}: {value if isinstance(value, str) else json.dumps(value, sort_keys=True)}"


class MemoryInjectionMiddleware(AgentMiddleware):
    """Injects memories from a store namespace into the system prompt, recorded.

    ``namespace`` is a tuple, or a callable taking the run's ``configurable``
    dict (e.g. ``lambda c: ("memories", c["user_id"])``).
    """

    def __init__(
        self,
        recorder: Recorder,
        store: BaseStore,
        namespace: Namespace | NamespaceFn,
        *,
        limit: int = 10,
        header: str = "Relevant memories:",
    ):
        super().__init__()
        self.recorder = recorder
        self.store = store
        self.namespace = namespace
        self.limit = limit
        self.header = header

    @property
    def name(self) -> str:
        return "UnseeMemoryInjection"

    def _namespace(self) -> Namespace:
        if callable(self.namespace):
            from langgraph.config import get_config

            return tuple(self.namespace(get_config().get("configurable", {}) or {}))
        return tuple(self.namespace)

    def _inject(self, request, items, namespace: Namespace = ()) -> Any:
        """Record the injection and return the overridden request (or the original)."""
        sid, lg_ckpt = current_session()
        if not items:
            return request
        rec = self.recorder
        block_lines = [self.header] + [render_item(i.key, i.value) for i in items]
        block = "\n".join(block_lines)
        scope = current_scope.get()
        try:
            st = rec.state(sid, request.model)
            with st.lock:
                rec.checkpoint(st, CheckpointKind.MEMORY_INJECTION, langgraph_checkpoint_id=lg_ckpt)
                span = rec.start_span(st, sc.OP_SEARCH_MEMORY, attributes=sc.memory_attributes(
                    sc.OP_SEARCH_MEMORY, sc.memory_store_id(namespace), len(items)))
                reads = []
                for item in items:
                    src = source_key(item.namespace, item.key)
                    text = render_item(item.key, item.value)
                    aid = short_id("mem", src, rec.hasher.hash(text))
                    if aid not in st.known:
                        parent = st.last_write.get(src)
                        a = rec.artifact(st, ArtifactType.MEMORY_READ, aid, text,
                                         parents=(parent,) if parent else (), source_ids=(src,),
                                         step=st.next_step(), attrs={"key": item.key})
                        rec.link(st, span, a.parents)
                        rec.add_artifact_event(st, span, a)
                    reads.append(aid)
                bid = short_id("blk", rec.hasher.hash(block))
                if bid not in st.known:
                    b = rec.artifact(st, ArtifactType.PROMPT_BLOCK, bid, block, parents=reads,
                                     source_ids=("memory_injection",), attrs={"role": "memory"})
                    rec.link(st, span, reads)
                    rec.set_primary(st, span, b)
                span.end()
        except Exception as exc:
            rec.fail(sid, exc)
            bid = None
        if scope is not None and bid is not None:
            scope.blocks.append((bid, block))
        base = text_of(request.system_message) if request.system_message is not None else ""
        new_sys = SystemMessage(content=(base + "\n\n" + block) if base else block)
        return request.override(system_message=new_sys)

    def wrap_model_call(self, request, handler):
        ns = self._namespace()
        items = self.store.search(ns, limit=self.limit)
        with _shared_scope():
            return handler(self._inject(request, items, ns))

    async def awrap_model_call(self, request, handler):
        ns = self._namespace()
        items = await self.store.asearch(ns, limit=self.limit)
        with _shared_scope():
            return await handler(self._inject(request, items, ns))


@contextlib.contextmanager
def _shared_scope():
    """Use the recorder's model-call scope if it wraps us; otherwise open one it will find."""
    if current_scope.get() is not None:
        yield
        return
    token = current_scope.set(ModelCallScope())
    try:
        yield
    finally:
        current_scope.reset(token)


def _dump(value: Any) -> str | None:
    return None if value is None else json.dumps(value, sort_keys=True, default=str)


def _load(text: str | None) -> Any:
    return None if text is None else json.loads(text)


class StoreOverlay:
    """A thread-local view of the store for a replay: the store as it was at the
    fork point (later writes of the replayed session rolled back), with
    replacements (the sanitized memory item) and the replay's own writes on top.
    Nothing reaches the real store until ``apply``."""

    def __init__(self, base: dict[tuple[tuple[str, ...], str], Any]):
        #: (namespace, key) -> value, or None for "absent"
        self.view: dict[tuple[tuple[str, ...], str], Any] = dict(base)

    def get(self, inner: BaseStore, ns: tuple[str, ...], key: str) -> Any:
        if (ns, key) in self.view:
            return self.view[(ns, key)]
        item = inner.get(ns, key)
        return item.value if item is not None else None

    def put(self, ns: tuple[str, ...], key: str, value: Any) -> None:
        self.view[(ns, key)] = value

    def apply(self, inner: BaseStore) -> None:
        for (ns, key), value in self.view.items():
            if value is None:
                inner.delete(ns, key)
            else:
                inner.put(ns, key, value)


class RecordingStore(BaseStore):
    """A ``BaseStore`` proxy that records writes as ``memory_write`` artifacts,
    journals each write's old and new value (so a replay can roll the store
    back to a fork point), and serves replay threads through a ``StoreOverlay``.
    """

    def __init__(self, inner: BaseStore, recorder: Recorder):
        self.inner = inner
        self.recorder = recorder
        self.overlays: dict[str, StoreOverlay] = {}

    def __getattr__(self, name: str) -> Any:  # index config, ttl, etc.
        return getattr(self.inner, name)

    # -- overlays (replay) -------------------------------------------------
    def begin_overlay(self, scratch_thread: str, session_id: str, since_seq: int,
                      replace: dict[tuple[tuple[str, ...], str], Any] | None = None) -> StoreOverlay:
        base: dict[tuple[tuple[str, ...], str], Any] = {}
        for seq, ns, key, old, new in reversed(self.recorder.store.memory_journal.entries(session_id, since_seq)):
            base[(ns, key)] = _load(old)
        base.update(replace or {})
        ov = StoreOverlay(base)
        self.overlays[scratch_thread] = ov
        return ov

    def end_overlay(self, scratch_thread: str) -> StoreOverlay | None:
        return self.overlays.pop(scratch_thread, None)

    def _overlay_batch(self, ov: StoreOverlay, ops: list[Op]) -> list[Result]:
        from langgraph.store.base import GetOp, Item, SearchItem, SearchOp

        out: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                value = ov.get(self.inner, op.namespace, op.key)
                out.append(None if value is None else Item(value=value, key=op.key, namespace=op.namespace,
                                                           created_at=_now(), updated_at=_now()))
            elif isinstance(op, PutOp):
                ov.put(op.namespace, op.key, op.value)
                out.append(None)
            elif isinstance(op, SearchOp):
                found = {(tuple(i.namespace), i.key): i for i in self.inner.batch([op._replace(limit=10_000, offset=0)])[0]}
                for (ns, key), value in ov.view.items():
                    if ns[: len(op.namespace_prefix)] != tuple(op.namespace_prefix):
                        continue
                    if value is None:
                        found.pop((ns, key), None)
                    else:
                        found[(ns, key)] = SearchItem(namespace=ns, key=key, value=value,
                                                      created_at=_now(), updated_at=_now())
                items = sorted(found.values(), key=lambda i: (tuple(i.namespace), i.key))
                out.append(items[op.offset: op.offset + op.limit])
            else:
                out.extend(self.inner.batch([op]))
        return out

    # -- BaseStore --------------------------------------------------------
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        thread = current_session()[0]
        ov = self.overlays.get(thread)
        with self._namespace_leases(ops, ov):
            old = self._old_values(ops, ov)
            results = self._overlay_batch(ov, ops) if ov is not None else self.inner.batch(ops)
        self._record(ops, old)
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        thread = current_session()[0]
        ov = self.overlays.get(thread)
        with self._namespace_leases(ops, ov):
            old = self._old_values(ops, ov)
            if ov is not None:
                results = self._overlay_batch(ov, ops)
            else:
                results = await self.inner.abatch(ops)
        self._record(ops, old)
        return results

    def _namespace_leases(self, ops: list[Op], ov: StoreOverlay | None):
        """The ``run`` leases of the namespaces this batch puts into (and of their prefixes), held
        around the write: an atomic namespace delete (plugins/erasure/namespaces.py) holds the
        ``forget`` lease of its namespace, so no recorded put interleaves with it, in any process.
        A replay's overlay writes nothing to the store: no lease."""
        from .leases import namespace_keys

        leases = self.recorder.run_leases.table
        nss = {tuple(op.namespace) for op in ops if isinstance(op, PutOp)}
        if leases is None or ov is not None or not nss:
            return contextlib.nullcontext()
        keys = sorted({k for ns in nss for k in namespace_keys(self.recorder.hasher, ns)})
        return leases.held_all(keys, "run")

    def _old_values(self, ops: list[Op], ov: StoreOverlay | None) -> list[Any]:
        out = []
        for op in ops:
            if isinstance(op, PutOp):
                if ov is not None:
                    out.append(ov.get(self.inner, op.namespace, op.key))
                else:
                    item = self.inner.get(op.namespace, op.key)
                    out.append(item.value if item is not None else None)
        return out

    def _record(self, ops: list[Op], old: list[Any]) -> None:
        puts = [op for op in ops if isinstance(op, PutOp)]
        if not puts:
            return
        producer = current_producer.get()
        sid = current_session()[0]
        rec = self.recorder
        try:
            st = rec.state(sid)
            with st.lock:
                parent = producer[1] if producer and producer[0] == sid else None
                spans = {}
                for (name, ns), group in _write_groups(puts).items():
                    keys = {op.key for op in group}
                    span = spans[(name, ns)] = rec.start_span(st, name, attributes=sc.memory_attributes(
                        name, sc.memory_store_id(ns), len(group), next(iter(keys)) if len(keys) == 1 else None))
                    if parent:
                        rec.link(st, span, [parent])
                journal = []
                for op, before in zip(puts, old):  # (in the batch's order: the journal's seqs follow it)
                    src = source_key(op.namespace, op.key)
                    deleted = op.value is None
                    text = "" if deleted else render_item(op.key, op.value)
                    aid = short_id("mw", sid, src, str(st.seq))  # a write is an event of this thread
                    a = rec.artifact(st, ArtifactType.MEMORY_WRITE, aid, text,
                                     parents=(parent,) if parent else (), source_ids=(src,),
                                     attrs={"key": op.key, "deleted": deleted})
                    rec.add_artifact_event(st, spans[_write_kind(op)], a)
                    st.last_write[src] = aid
                    journal.append((a.seq, tuple(op.namespace), op.key, _dump(before), _dump(op.value)))
                rec.store.submit(Batch(session_id=sid, journal=journal))
                for span in spans.values():
                    span.end()
        except Exception as exc:
            rec.fail(sid, exc)


def _write_kind(op: PutOp) -> tuple[str, tuple[str, ...]]:
    """The memory operation a recorded put is (a put of None deletes) and its namespace."""
    return (sc.OP_DELETE_MEMORY if op.value is None else sc.OP_UPSERT_MEMORY), tuple(op.namespace)


def _write_groups(puts: list[PutOp]) -> dict[tuple[str, tuple[str, ...]], list[PutOp]]:
    """A batch's puts by the span that records them: one per (operation, namespace), in the order
    first seen (one span for the usual batch of one put)."""
    groups: dict[tuple[str, tuple[str, ...]], list[PutOp]] = {}
    for op in puts:
        groups.setdefault(_write_kind(op), []).append(op)
    return groups


@dataclass(frozen=True)
class MemoryChange:
    """One memory operation a forget or an erasure made away from an agent's path (a commit's
    store rollback, an erasure's namespace delete) on one namespace, as the forget's trace shows
    it: keyed hashes only, since that trace outlives the erasure in trace backends."""

    #: ``semconv.OP_DELETE_MEMORY`` or ``semconv.OP_UPSERT_MEMORY``
    op: str
    #: the home's keyed hash of the namespace ("/"-joined: how the erasure receipts label it)
    store: str
    #: how many records the operation changed (tried to)
    count: int
    #: keyed hashes of their source ids (``memory:<namespace>/<key>``), the first
    #: ``semconv.MEMORY_RECORD_IDS_MAX``; (): not listed (a namespace delete: every record in it)
    records: tuple[str, ...] = ()
    #: wall-clock ``time_ns`` the operation began and ended
    start_ns: int = 0
    end_ns: int = 0


def memory_changes(writes: Iterable[tuple[Sequence[str], str, Any]], hasher: Any, start_ns: int,
                   end_ns: int) -> list[MemoryChange]:
    """``(namespace, key, value)`` writes applied between ``start_ns`` and ``end_ns`` (a value of
    None deletes) as one :class:`MemoryChange` per (operation, namespace), in the order first seen.
    ``hasher``: the home's ``ContentHasher``."""
    groups: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    for ns, key, value in writes:
        groups.setdefault(((sc.OP_DELETE_MEMORY if value is None else sc.OP_UPSERT_MEMORY), tuple(ns)),
                          []).append(key)
    return [MemoryChange(op, hasher.hash(sc.memory_store_id(ns)), len(keys),
                         tuple(hasher.hash(source_key(ns, k)) for k in keys[:sc.MEMORY_RECORD_IDS_MAX]),
                         start_ns, end_ns)
            for (op, ns), keys in groups.items()]


def _now():
    from datetime import datetime, timezone

    return datetime.now(timezone.utc)
