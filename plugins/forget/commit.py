"""The atomic commit of a replay: the counterfactual becomes the session's state.

Roll-forward from a journal row written first (``commit``): a crash before
it leaves the old state; a crash after it is finished by ``finish_commit``
(idempotent), which the operator runs for every pending commit of a session
before anything else (``replay.abandon`` drops a replay that is not committed).
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from langchain_core.messages import RemoveMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from unsee.middleware.memory import StoreOverlay, memory_changes

from unsee.middleware import faults
from .errors import CommitInterrupted, InjectedCrash
from .event import RevocationEvent
from .plan import ReplayPlan
from .ports import ForgetContext
from .thread import recording_store, thread_cfg
from .trace import record_memory

if TYPE_CHECKING:
    from .replay import ReplayOutcome


def _overlay_payload(overlay: StoreOverlay | None) -> list:
    if overlay is None:
        return []
    return [[list(ns), key, value] for (ns, key), value in overlay.view.items()]


def fork_point(plan: ReplayPlan) -> dict | None:
    """The LangGraph checkpoint the scratch thread's seed was taken from (None: an empty seed)."""
    cp = plan.checkpoint
    if cp is None or not cp.langgraph_checkpoint_id or not cp.prompt_manifest:
        return None  # as fork_state: the replay started from an empty state
    return {"thread": cp.langgraph_thread_id or plan.session_id, "checkpoint_id": cp.langgraph_checkpoint_id}


def commit(ctx: ForgetContext, agent: Any, plan: ReplayPlan, outcome: ReplayOutcome,
           event: RevocationEvent) -> None:
    """Replace the session's state, store items and records with the counterfactual ones."""
    session = plan.session_id
    # The sandbox's new state is snapshotted before the commit begins (a failure here, e.g. the
    # Docker daemon gone, begins nothing) and its key goes into the journal row: a roll-forward in
    # another process, on another machine, makes it the session's sandbox (the shadow itself dies
    # with the process that ran the replay).
    sandbox = ctx.environments.settle_replay(outcome.scratch) if ctx.environments is not None else None
    ctx.records.begin_commit(event.event_id, session, outcome.scratch, outcome.since_ns,
                             payload=json.dumps({"overlay": _overlay_payload(outcome.overlay),
                                                 "fork_seq": plan.fork_seq,
                                                 # where the scratch thread was forked (erasure rewrites
                                                 # the history as this prefix + the scratch suffix)
                                                 "fork": fork_point(plan),
                                                 "sandbox": sandbox}))
    faults.point("commit:begin")
    try:
        finish_commit(ctx, agent, session, event.event_id, fresh=True)
    except InjectedCrash:
        raise
    except Exception as e:  # a store or checkpointer failed part-way: typed, and it rolls forward
        raise CommitInterrupted(session, event.event_id, e) from e



def _commit_mark(agent: Any, cfg: dict[str, Any]) -> str | None:
    """The ``unsee_commit`` mark on the thread's latest checkpoint: read from the checkpointer's
    tuple when the agent has its own saver (no graph tasks prepared for a metadata read)."""
    saver = getattr(agent, "checkpointer", None)
    if isinstance(saver, BaseCheckpointSaver):
        tup = saver.get_tuple(cfg)
        meta = tup.metadata if tup is not None else {}
    else:
        meta = agent.get_state(cfg).metadata
    return (meta or {}).get("unsee_commit")


def finish_commit(ctx: ForgetContext, agent: Any, session: str, event_id: str, *, fresh: bool = False) -> bool:
    """Roll a begun commit forward (idempotent). Returns False if there is none.

    ``fresh``: the commit was begun just now by this forget (``commit``), so the thread cannot
    hold its mark yet and the mark is not read (a read loads the thread's whole latest
    checkpoint: O(session) on a full-state graph). A roll-forward (``recover``, a rerun of the
    event) reads it: the state may have been written before the crash."""
    pending = {e: (s, since, payload) for e, s, since, payload in ctx.records.pending_commits(session)}
    if event_id not in pending:
        return False
    scratch, since_ns, payload = pending[event_id]
    data = json.loads(payload or "{}")
    cfg = thread_cfg(session)
    if fresh or _commit_mark(agent, cfg) != event_id:
        final = agent.get_state(thread_cfg(scratch)).values
        update = {k: v for k, v in final.items() if k != "messages"}
        update["messages"] = [RemoveMessage(id=REMOVE_ALL_MESSAGES), *final.get("messages", [])]
        agent.update_state({**cfg, "metadata": {"unsee_commit": event_id}}, update)
    faults.point("commit:state")
    store = recording_store(agent)
    if store is not None:
        if data.get("overlay"):
            writes = [(tuple(ns), key, value) for ns, key, value in data["overlay"]]
            began = time.time_ns()
            StoreOverlay({(ns, key): value for ns, key, value in writes}).apply(store.inner)
            if fresh:  # this forget's own rollback, for its trace (a roll-forward's is an earlier forget's)
                ended = time.time_ns()
                record_memory(lambda: memory_changes(writes, ctx.hasher, began, ended))
        store.end_overlay(scratch)
    if ctx.environments is not None:
        # The restored shadow becomes the session's sandbox: this process's shadow, else (the
        # process that replayed died) the snapshot settled before the commit began.
        ctx.environments.end_replay(scratch, commit=True, session=session, final=data.get("sandbox"))
    ctx.records.replace_journal(session, scratch, int(data.get("fork_seq", 0)))
    faults.point("commit:store")
    ctx.runs.forget_state(session)
    ctx.records.replace_session(session, scratch, event_id, since_ns)
    faults.point("commit:records")
    ctx.runs.forget_state(session)
    ctx.runs.forget_state(scratch)
    return True
