"""The editing baselines (B0 B1 B2 B3 B4 B6 B8): they change records or live
state in place instead of replaying. They exist for comparison: each is one
atomic ``update_state`` on the thread (plus vault/store edits), and none of
them reaches the counterfactual state in general. Which edit a strategy makes
is its spec's ``edit`` (``strategy.Edit``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from langchain_core.messages import HumanMessage, RemoveMessage

from unsee.middleware.memory import parse_source_key
from unsee.middleware.records import ArtifactType

from .plan import ReplayPlan
from .ports import ForgetContext
from .sanitize import sanitize, sanitize_message, sanitize_value
from .strategy import Edit, Strategy
from .thread import artifact_of, messages, recording_store, thread_cfg


def _nothing(ctx: ForgetContext, agent: Any, plan: ReplayPlan, target: str) -> list[str]:
    return ["B0: nothing changed"]


def _delete_record(ctx: ForgetContext, agent: Any, plan: ReplayPlan, target: str) -> list[str]:
    ctx.records.rewrites.set_content(plan.session_id, plan.entry.id, None)
    return [f"B1: deleted the recorded content of {plan.entry.id}; live state unchanged"]


def _instruct(ctx: ForgetContext, agent: Any, plan: ReplayPlan, target: str) -> list[str]:
    agent.update_state(thread_cfg(plan.session_id), {"messages": [HumanMessage(
        content=f"Forget this and never use or mention it again: {target}")]})
    return ["B2: appended an instruction to forget"]


def _redact_entry(ctx: ForgetContext, agent: Any, plan: ReplayPlan, target: str) -> list[str]:
    session, entry = plan.session_id, plan.entry
    changed = [sanitize_message(m, target) for m in messages(agent, session) if artifact_of(session, m) == entry.id]
    if changed:
        agent.update_state(thread_cfg(session), {"messages": changed})  # same ids: add_messages replaces them
    if entry.type is ArtifactType.MEMORY_READ:
        _redact_store_item(agent, entry, target)
    ctx.records.rewrites.set_content(session, entry.id, sanitize(ctx.records.content(session, entry.id) or "", target))
    return [f"B3: redacted the target in {entry.id} only"]


def _amputate(ctx: ForgetContext, agent: Any, plan: ReplayPlan, target: str) -> list[str]:
    session = plan.session_id
    removed = [RemoveMessage(id=m.id) for m in messages(agent, session) if artifact_of(session, m) in plan.closure]
    if removed:
        agent.update_state(thread_cfg(session), {"messages": removed})
    store = recording_store(agent)
    g = ctx.sessions.graph(session)
    for aid in plan.closure:
        a = g.get(aid)
        if a.type is ArtifactType.MEMORY_WRITE and store is not None and a.source_ids:
            ns, key = parse_source_key(a.source_ids[0])
            store.inner.delete(ns, key)
    return [f"B4: removed {len(removed)} messages of I(z) from the live state"]


def _redact_all(ctx: ForgetContext, agent: Any, plan: ReplayPlan, target: str) -> list[str]:
    session = plan.session_id
    changed = [sanitize_message(m, target) for m in messages(agent, session)
               if target in json.dumps(m.model_dump(), default=str)]
    if changed:
        agent.update_state(thread_cfg(session), {"messages": changed})
    store = recording_store(agent)
    if store is not None:
        for item in store.inner.search((), limit=100_000):
            if target in json.dumps(item.value, default=str):
                store.inner.put(tuple(item.namespace), item.key, sanitize_value(item.value, target))
    for aid, text in ctx.records.contents(session).items():
        if target in text:
            ctx.records.rewrites.set_content(session, aid, sanitize(text, target))
    return [f"B6: redacted the target in {len(changed)} live messages, store items and records"]


def _ifc_label(ctx: ForgetContext, agent: Any, plan: ReplayPlan, target: str) -> list[str]:
    # the operator labelled I(z) revoked (every strategy that needs IFC does); nothing else changes
    return ["B8: I(z) labelled revoked for IFC; live state unchanged"]


EDITS: dict[Edit, Callable[[ForgetContext, Any, ReplayPlan, str], list[str]]] = {
    Edit.NOTHING: _nothing,
    Edit.DELETE_RECORD: _delete_record,
    Edit.INSTRUCT: _instruct,
    Edit.REDACT_ENTRY: _redact_entry,
    Edit.AMPUTATE: _amputate,
    Edit.REDACT_ALL: _redact_all,
    Edit.IFC_LABEL: _ifc_label,
}


def apply_edit(ctx: ForgetContext, agent: Any, plan: ReplayPlan, target: str,
               strategy: Strategy | str) -> list[str]:
    """Apply a strategy that does not replay; returns notes for the report."""
    spec = Strategy.parse(strategy).spec
    if spec.edit is None:
        raise ValueError(f"strategy {spec.code} replays: it has no edit")
    return EDITS[spec.edit](ctx, agent, plan, target)


def _redact_store_item(agent: Any, entry, target: str) -> None:
    store = recording_store(agent)
    if store is None or not entry.source_ids:
        return
    ns, key = parse_source_key(entry.source_ids[0])
    item = store.inner.get(ns, key)
    if item is not None:
        store.inner.put(ns, key, sanitize_value(item.value, target))
