"""Sanitized replay on a real LangGraph agent, and the atomic commit.

``run_replay`` forks the session's LangGraph thread at the plan's checkpoint
into a scratch thread, rolls the memory store back to the fork point in an
overlay (with the tau memory item sanitized), installs the replay interceptor
and re-runs the recorded user turns (the tau input sanitized). Nothing the
user's thread, store or records hold changes until ``commit``, which is
roll-forward from a journal row written first: a crash before it leaves the
old state; a crash after it is finished by ``recover``.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import HumanMessage, RemoveMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from unsee.middleware.hooks import message_artifact
from unsee.middleware.memory import RecordingStore, StoreOverlay, parse_source_key
from unsee.middleware.records import ArtifactType

from . import faults
from .event import RevocationEvent, sanitize
from .interceptor import ReplayInterceptor, SideEffectPolicy
from .plan import ReplayPlan

log = logging.getLogger("unsee.replay")


@dataclass
class ReplayOutcome:
    scratch: str
    interceptor: ReplayInterceptor
    overlay: StoreOverlay | None
    store: RecordingStore | None
    since_ns: int


SCRATCH_MARK = "~cf-"


def scratch_thread(session_id: str, event: RevocationEvent, strategy: str) -> str:
    return f"{session_id}{SCRATCH_MARK}{event.event_id[:12]}-{strategy.replace(chr(39), 'p')}"


def is_scratch_thread(thread_id: str) -> bool:
    """Whether a thread is a replay's scratch thread (not a user session)."""
    return SCRATCH_MARK in thread_id


def recording_store(agent: Any) -> RecordingStore | None:
    store = getattr(agent, "store", None)
    return store if isinstance(store, RecordingStore) else None


def _sanitize_value(value: Any, target: str) -> Any:
    if value is None:
        return None
    return json.loads(json.dumps(value).replace(json.dumps(target)[1:-1], ""))


def _memory_replacement(plan: ReplayPlan, store: RecordingStore | None, target: str) -> dict:
    """The counterfactual memory item when z entered through a memory read."""
    if store is None or plan.entry.type is not ArtifactType.MEMORY_READ or not plan.entry.source_ids:
        return {}
    ns, key = parse_source_key(plan.entry.source_ids[0])
    item = store.inner.get(ns, key)
    return {(ns, key): _sanitize_value(item.value if item else None, target)}


def _thread_cfg(thread: str, **extra: Any) -> dict:
    return {"configurable": {"thread_id": thread, **extra}}


def fork_state(agent: Any, plan: ReplayPlan, scratch: str) -> None:
    """Seed the scratch thread with the agent state at the fork checkpoint (before its turn's input)."""
    cp = plan.checkpoint
    if cp is None or not cp.langgraph_checkpoint_id or not cp.prompt_manifest:
        return  # fork at an empty state (session start or B5)
    cfg = _thread_cfg(cp.langgraph_thread_id or plan.session_id, checkpoint_id=cp.langgraph_checkpoint_id)
    snap = agent.get_state(cfg)
    keep = set(cp.prompt_manifest)
    values = dict(snap.values)
    values["messages"] = [
        m for m in values.get("messages", [])
        if (message_artifact(plan.session_id, m) or ("", None))[0] in keep
    ]
    agent.update_state(_thread_cfg(scratch), values)


def run_replay(u: Any, agent: Any, plan: ReplayPlan, event: RevocationEvent,
               side_effects: SideEffectPolicy = "defer") -> ReplayOutcome:
    session = plan.session_id
    scratch = scratch_thread(session, event, plan.strategy)
    # A crashed earlier attempt may have left a scratch thread: start clean.
    u.store.drop_session(scratch)
    u.recorder.forget_state(scratch)
    saver = getattr(agent, "checkpointer", None)
    if saver is not None and hasattr(saver, "delete_thread"):
        saver.delete_thread(scratch)
    u.store.clone_prefix(session, scratch, plan.fork_seq)
    faults.point("fork")
    fork_state(agent, plan, scratch)
    store = recording_store(agent)
    overlay = None
    if store is not None:
        overlay = store.begin_overlay(scratch, session, plan.fork_seq,
                                      _memory_replacement(plan, store, event.target))
    model = getattr(u, "local_model", None)
    if model is not None and hasattr(model, "restore"):
        offset = plan.checkpoint.token_offset if plan.checkpoint is not None else 0
        try:
            model.restore(session, offset)  # crop: the clean prefix stays in the cache
        except Exception:
            log.debug("cache restore to %s failed; prefix reuse will rebuild it", offset, exc_info=True)
    envs = getattr(u, "environments", None)
    if envs is not None:
        envs.begin_replay(scratch, session, plan.checkpoint.env_snapshot_id if plan.checkpoint else None)
    icpt = ReplayInterceptor(plan, event.target, side_effects)
    u.recorder.interceptors.install(scratch, icpt)
    try:
        for turn in plan.turns:
            msgs = []
            for i in plan.inputs.get(turn, ()):
                if i.artifact_id == plan.entry.id:
                    msgs.append(HumanMessage(content=sanitize(i.text, event.target)))
                else:
                    msgs.append(HumanMessage(content=i.text, id=i.message_id))
            if not msgs:
                continue
            faults.point(f"replay:turn:{turn}")
            agent.invoke({"messages": msgs}, _thread_cfg(scratch, unsee_session=session))
    except BaseException:
        if store is not None:
            store.end_overlay(scratch)
        if envs is not None:
            envs.end_replay(scratch, commit=False)
        raise
    finally:
        u.recorder.interceptors.remove(scratch)
    faults.point("replay:done")
    since = plan.checkpoint.created_ns if plan.checkpoint is not None else 0
    return ReplayOutcome(scratch, icpt, overlay, store, since)


def _overlay_payload(overlay: StoreOverlay | None) -> list:
    if overlay is None:
        return []
    return [[list(ns), key, value] for (ns, key), value in overlay.view.items()]


def commit(u: Any, agent: Any, plan: ReplayPlan, outcome: ReplayOutcome, event: RevocationEvent) -> None:
    """Replace the session's state, store items and records with the counterfactual ones."""
    session = plan.session_id
    u.store.begin_commit(event.event_id, session, outcome.scratch, outcome.since_ns,
                         payload=json.dumps({"overlay": _overlay_payload(outcome.overlay),
                                             "fork_seq": plan.fork_seq}))
    faults.point("commit:begin")
    finish_commit(u, agent, session, event.event_id)


def abandon(u: Any, outcome: ReplayOutcome) -> None:
    """Drop a replay that is not committed (its overlay and sandbox shadow)."""
    if outcome.store is not None:
        outcome.store.end_overlay(outcome.scratch)
    if getattr(u, "environments", None) is not None:
        u.environments.end_replay(outcome.scratch, commit=False)


def finish_commit(u: Any, agent: Any, session: str, event_id: str) -> bool:
    """Roll a begun commit forward (idempotent). Returns False if there is none."""
    pending = {e: (s, since, payload) for e, s, since, payload in u.store.pending_commits(session)}
    if event_id not in pending:
        return False
    scratch, since_ns, payload = pending[event_id]
    data = json.loads(payload or "{}")
    cfg = _thread_cfg(session)
    snap = agent.get_state(cfg)
    if (snap.metadata or {}).get("unsee_commit") != event_id:
        final = agent.get_state(_thread_cfg(scratch)).values
        update = {k: v for k, v in final.items() if k != "messages"}
        update["messages"] = [RemoveMessage(id=REMOVE_ALL_MESSAGES), *final.get("messages", [])]
        agent.update_state({**cfg, "metadata": {"unsee_commit": event_id}}, update)
    faults.point("commit:state")
    store = recording_store(agent)
    if store is not None:
        if data.get("overlay"):
            StoreOverlay({(tuple(ns), key): value for ns, key, value in data["overlay"]}).apply(store.inner)
        store.end_overlay(scratch)
    if getattr(u, "environments", None) is not None:
        # The restored shadow becomes the session's sandbox (lost only if this process died).
        u.environments.end_replay(scratch, commit=True)
    u.store.replace_journal(session, scratch, int(data.get("fork_seq", 0)))
    faults.point("commit:store")
    u.recorder.forget_state(session)
    u.store.replace_session(session, scratch, event_id, since_ns)
    faults.point("commit:records")
    u.recorder.forget_state(session)
    u.recorder.forget_state(scratch)
    return True
