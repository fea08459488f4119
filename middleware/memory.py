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
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import SystemMessage
from langgraph.store.base import BaseStore, Op, PutOp, Result

from . import semconv as sc
from .hashing import short_id
from .hooks import current_session, text_of
from .recorder import ModelCallScope, Recorder, current_producer, current_scope
from .records import ArtifactType, CheckpointKind

Namespace = tuple[str, ...]
NamespaceFn = Callable[[dict[str, Any]], Namespace]


def source_key(namespace: Sequence[str], key: str) -> str:
    return "memory:" + "/".join(namespace) + "/" + key


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

    def _inject(self, request, items) -> Any:
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
                span = rec.start_span(st, f"{sc.OP_SEARCH_MEMORY} {'/'.join(items[0].namespace)}",
                                      attributes={sc.GEN_AI_OPERATION: sc.OP_SEARCH_MEMORY})
                reads = []
                for item in items:
                    src = source_key(item.namespace, item.key)
                    text = render_item(item.key, item.value)
                    aid = short_id("mem", sid, src, rec.hasher.hash(text))
                    if aid not in st.known:
                        parent = st.last_write.get(src)
                        a = rec.artifact(st, ArtifactType.MEMORY_READ, aid, text,
                                         parents=(parent,) if parent else (), source_ids=(src,),
                                         step=st.next_step(), attrs={"key": item.key})
                        rec.link(st, span, a.parents)
                        rec.add_artifact_event(st, span, a)
                    reads.append(aid)
                bid = short_id("blk", sid, rec.hasher.hash(block))
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
        items = self.store.search(self._namespace(), limit=self.limit)
        return self._with_scope(lambda: handler(self._inject(request, items)))

    async def awrap_model_call(self, request, handler):
        items = await self.store.asearch(self._namespace(), limit=self.limit)
        scope, token = self._scope()
        try:
            return await handler(self._inject(request, items))
        finally:
            if token is not None:
                current_scope.reset(token)

    def _scope(self):
        if current_scope.get() is not None:
            return current_scope.get(), None
        scope = ModelCallScope()
        return scope, current_scope.set(scope)

    def _with_scope(self, fn):
        _, token = self._scope()
        try:
            return fn()
        finally:
            if token is not None:
                current_scope.reset(token)


class RecordingStore(BaseStore):
    """A ``BaseStore`` proxy that records writes as ``memory_write`` artifacts."""

    def __init__(self, inner: BaseStore, recorder: Recorder):
        self.inner = inner
        self.recorder = recorder

    def __getattr__(self, name: str) -> Any:  # index config, ttl, etc.
        return getattr(self.inner, name)

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        results = self.inner.batch(ops)
        self._record(ops)
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        results = await self.inner.abatch(ops)
        self._record(ops)
        return results

    def _record(self, ops: list[Op]) -> None:
        puts = [op for op in ops if isinstance(op, PutOp)]
        if not puts:
            return
        producer = current_producer.get()
        sid = producer[0] if producer else current_session()[0]
        rec = self.recorder
        try:
            st = rec.state(sid)
            with st.lock:
                parent = producer[1] if producer else None
                span = rec.start_span(st, f"{sc.OP_UPDATE_MEMORY} {'/'.join(puts[0].namespace)}",
                                      attributes={sc.GEN_AI_OPERATION: sc.OP_UPDATE_MEMORY})
                if parent:
                    rec.link(st, span, [parent])
                for op in puts:
                    src = source_key(op.namespace, op.key)
                    deleted = op.value is None
                    text = "" if deleted else render_item(op.key, op.value)
                    aid = short_id("mw", sid, src, str(st.seq))
                    a = rec.artifact(st, ArtifactType.MEMORY_WRITE, aid, text,
                                     parents=(parent,) if parent else (), source_ids=(src,),
                                     attrs={"key": op.key, "deleted": deleted})
                    rec.add_artifact_event(st, span, a)
                    st.last_write[src] = aid
                span.end()
        except Exception as exc:
            rec.fail(sid, exc)
