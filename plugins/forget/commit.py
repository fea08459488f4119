"""The atomic commit of a replay: the counterfactual becomes the session's state.

``prepare`` checks, before anything is journaled, that the replay derived the
state the commit will write and that the target is nowhere in it
(``derived.py``). ``commit`` then journals a row first: a crash before it
leaves the old state; a crash after it is finished by ``finish_commit``
(idempotent, and only with the scratch head the journal names), which the
forgetter runs for every pending commit of a session before anything else
(``replay.abandon`` drops a replay that is not committed). The state update is
the commit point: before it a failure raises, after it a failure is reported.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from langchain_core.messages import RemoveMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from unsee.middleware.memory import StoreOverlay, memory_changes

from unsee.middleware import faults
from .derived import ScratchState, check_derived, check_journaled, remaining_places
from .errors import CommitInterrupted, ForgetRefused, InjectedCrash, TargetRemains
from .event import RevocationEvent
from .pause import waiting_head, write_paused
from .plan import ReplayPlan
from .ports import ForgetContext
from .preflight import graph_label
from .report import StepError
from .thread import recording_store, thread_cfg, write_state
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


def prepare(ctx: ForgetContext, agent: Any, plan: ReplayPlan, outcome: ReplayOutcome, event: RevocationEvent, *,
            session_messages: int, earlier_sources: Callable[[], list[str]]) -> ScratchState:
    """The checks a commit needs before anything is journaled or written (``derived.py``): the
    scratch state was derived by the replay, and the target is nowhere in it nor in the memory
    items the commit would write. ``NotDerived`` / ``TargetRemains``; ``earlier_sources`` names,
    for the latter, where the record shows the target entered before this forget's entry."""
    state = check_derived(agent, plan, outcome.scratch, outcome.seed, session_messages=session_messages,
                          fork_records=ctx.records.rewrites.fork_records(outcome.scratch), event_id=event.event_id,
                          given=outcome.given)
    memory = [(tuple(ns), key, value) for ns, key, value in _overlay_payload(outcome.overlay)]
    places = remaining_places(state.values, memory, event.target)
    if places:
        raise TargetRemains(plan.session_id, event.event_id, places, earlier_sources())
    return state


def commit(ctx: ForgetContext, agent: Any, plan: ReplayPlan, outcome: ReplayOutcome,
           event: RevocationEvent, state: ScratchState) -> list[StepError]:
    """Replace the session's state, store items and records with the counterfactual ones: the
    checked ``state`` (``prepare``). Raises only before the new state is written (the session
    keeps its old one); what fails after is returned (``finish_commit``)."""
    session = plan.session_id
    # The sandbox's new state is snapshotted before the commit begins (a failure here, e.g. the
    # Docker daemon gone, begins nothing) and its key goes into the journal row: a roll-forward in
    # another process, on another machine, makes it the session's sandbox (the shadow itself dies
    # with the process that ran the replay).
    sandbox = ctx.environments.settle_replay(outcome.scratch) if ctx.environments is not None else None
    ctx.records.commits.begin(event.event_id, session, outcome.scratch, outcome.since_ns,
                              payload=json.dumps({"overlay": _overlay_payload(outcome.overlay),
                                                  "fork_seq": plan.fork_seq,
                                                  # where the scratch thread was forked (erasure rewrites
                                                  # the history as this prefix + the scratch suffix)
                                                  "fork": fork_point(plan),
                                                  "sandbox": sandbox,
                                                  # what a roll-forward writes, and through which graph:
                                                  # the scratch thread at this head, or nothing
                                                  "head": state.head,
                                                  "graph": _graph_of(agent)}))
    try:
        faults.point("commit:begin")
    except InjectedCrash:
        raise
    except Exception as e:  # begun, nothing written: the old state stays, the journal rolls it forward
        raise CommitInterrupted(session, event.event_id, e) from e
    return finish_commit(ctx, agent, session, event.event_id, fresh=True, state=state) or []


def _graph_of(agent: Any) -> str:
    """The graph a commit was written through, as an error names it to whoever rolls it forward."""
    saver = getattr(agent, "checkpointer", None)
    return f"{graph_label(agent)} (checkpointer {type(saver).__name__})"


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


def finish_commit(ctx: ForgetContext, agent: Any, session: str, event_id: str, *, fresh: bool = False,
                  state: ScratchState | None = None) -> list[StepError] | None:
    """Roll a begun commit forward (idempotent). Returns None if there is none, else what failed
    after the new state was written ([]: nothing).

    The new state is the scratch thread's, at the head the journal names (``state``: checked by
    this forget just now; a roll-forward checks the agent reads that head, else
    ``AgentCannotReplay`` naming the graph that can). Writing it is the commit point: a failure
    before it raises ``CommitInterrupted`` and the session keeps its old state; a failure after it
    (the memory store, the sandbox, the records) is returned, and the journal stays, so the next
    forget of the session (or this event again) finishes the rest. ``InjectedCrash`` (a test's
    simulated death of the process) always propagates.

    ``fresh``: the commit was begun just now by this forget (``commit``), so the thread cannot
    hold its mark yet and the mark is not read (a read loads the thread's whole latest
    checkpoint: O(session) on a full-state graph). A roll-forward (``recover``, a rerun of the
    event) reads it: the state may have been written before the crash."""
    pending = {e: (s, since, payload) for e, s, since, payload in ctx.records.commits.pending(session)}
    if event_id not in pending:
        return None
    scratch, since_ns, payload = pending[event_id]
    data = json.loads(payload or "{}")
    cfg = thread_cfg(session)
    try:
        if state is None:
            state = check_journaled(agent, session, scratch, data)
        if fresh or _commit_mark(agent, cfg) != event_id:
            if (paused := waiting_head(agent, scratch, state.head)) is not None:
                write_paused(agent, session, paused, event_id)  # (the counterfactual waits at a question)
            else:
                final = state.values
                update = {k: v for k, v in final.items() if k != "messages"}
                update["messages"] = [RemoveMessage(id=REMOVE_ALL_MESSAGES), *final.get("messages", [])]
                write_state(agent, {**cfg, "metadata": {"unsee_commit": event_id}}, update)
    except (InjectedCrash, ForgetRefused):
        raise
    except Exception as e:  # the checkpointer failed: the old state stays, the journal rolls it forward
        raise CommitInterrupted(session, event_id, e) from e
    try:
        faults.point("commit:state")
        _finish_records(ctx, agent, session, event_id, scratch, since_ns, data, fresh)
    except InjectedCrash:
        raise
    except Exception as e:  # committed: said on the report, finished by the next forget
        return [StepError.of("commit", CommitInterrupted(session, event_id, e))]
    return []


def _finish_records(ctx: ForgetContext, agent: Any, session: str, event_id: str, scratch: str, since_ns: int,
                    data: dict[str, Any], fresh: bool) -> None:
    """The commit's steps after the new state: the memory store, the sandbox, the records."""
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
    ctx.records.memory_journal.replace(session, scratch, int(data.get("fork_seq", 0)))
    faults.point("commit:store")
    ctx.runs.forget_state(session)
    ctx.records.rewrites.replace_session(session, scratch, event_id, since_ns)
    faults.point("commit:records")
    ctx.runs.forget_state(session)
    ctx.runs.forget_state(scratch)
