"""The editing baselines (B1 B2 B3 B4 B6): they change records or live state in
place instead of replaying. They exist for comparison: each is one atomic
``update_state`` on the thread (plus vault/store edits), and none of them
reaches the counterfactual state in general."""

from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, RemoveMessage

from unsee.middleware.hooks import message_artifact
from unsee.middleware.memory import parse_source_key
from unsee.middleware.records import ArtifactType

from .replay import _thread_cfg, _sanitize_value, recording_store
from .event import sanitize
from .plan import ReplayPlan


def _redacted(m: BaseMessage, target: str) -> BaseMessage:
    update: dict[str, Any] = {}
    if isinstance(m.content, str):
        update["content"] = sanitize(m.content, target)
    else:
        update["content"] = json.loads(json.dumps(m.content).replace(target, ""))
    if isinstance(m, AIMessage) and m.tool_calls:
        update["tool_calls"] = [{**tc, "args": _sanitize_value(tc["args"], target)} for tc in m.tool_calls]
    return m.model_copy(update=update)


def _messages(agent: Any, session: str) -> list[BaseMessage]:
    return list(agent.get_state(_thread_cfg(session)).values.get("messages", []))


def apply_edit(u: Any, agent: Any, plan: ReplayPlan, target: str, strategy: str) -> list[str]:
    """Apply a non-replaying strategy; returns notes for the report."""
    session = plan.session_id
    entry = plan.entry
    if strategy == "B0":
        return ["B0: nothing changed"]
    if strategy == "B1":
        u.store.set_content(session, entry.id, None)
        return [f"B1: deleted the recorded content of {entry.id}; live state unchanged"]
    cfg = _thread_cfg(session)
    msgs = _messages(agent, session)
    if strategy == "B2":
        agent.update_state(cfg, {"messages": [HumanMessage(
            content=f"Forget this and never use or mention it again: {target}")]})
        return ["B2: appended an instruction to forget"]
    if strategy == "B3":
        changed = [_redacted(m, target) for m in msgs
                   if (message_artifact(session, m) or ("", None))[0] == entry.id]
        if changed:
            agent.update_state(cfg, {"messages": changed})  # same ids: add_messages replaces them
        if entry.type is ArtifactType.MEMORY_READ:
            _redact_store_item(agent, entry, target)
        u.store.set_content(session, entry.id, sanitize(u.store.content(session, entry.id) or "", target))
        return [f"B3: redacted the target in {entry.id} only"]
    if strategy == "B4":
        removed = [RemoveMessage(id=m.id) for m in msgs
                   if (message_artifact(session, m) or ("", None))[0] in plan.closure]
        if removed:
            agent.update_state(cfg, {"messages": removed})
        store = recording_store(agent)
        g = u.graph(session)
        for aid in plan.closure:
            a = g.get(aid)
            if a.type is ArtifactType.MEMORY_WRITE and store is not None and a.source_ids:
                ns, key = parse_source_key(a.source_ids[0])
                store.inner.delete(ns, key)
        return [f"B4: removed {len(removed)} messages of I(z) from the live state"]
    if strategy == "B6":
        changed = [_redacted(m, target) for m in msgs if target in json.dumps(m.model_dump(), default=str)]
        if changed:
            agent.update_state(cfg, {"messages": changed})
        store = recording_store(agent)
        if store is not None:
            for item in store.inner.search((), limit=100_000):
                if target in json.dumps(item.value, default=str):
                    store.inner.put(tuple(item.namespace), item.key, _sanitize_value(item.value, target))
        for aid, text in u.store.contents(session).items():
            if target in text:
                u.store.set_content(session, aid, sanitize(text, target))
        return [f"B6: redacted the target in {len(changed)} live messages, store items and records"]
    raise ValueError(strategy)


def _redact_store_item(agent: Any, entry, target: str) -> None:
    store = recording_store(agent)
    if store is None or not entry.source_ids:
        return
    ns, key = parse_source_key(entry.source_ids[0])
    item = store.inner.get(ns, key)
    if item is not None:
        store.inner.put(ns, key, _sanitize_value(item.value, target))
