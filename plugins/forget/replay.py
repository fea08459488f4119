"""Fork and sanitized replay on a real LangGraph agent.

``run_replay`` forks the session's LangGraph thread at the plan's checkpoint
into a scratch thread (records cloned up to the fork point, the local model's
cache cropped, the sandbox restored into a shadow), rolls the memory store
back to the fork point in an overlay (with the tau memory item sanitized),
installs the replay interceptor and re-runs the recorded user turns (the tau
input sanitized). Nothing the user's thread, store or records hold changes
here: ``commit`` (the next step) makes the outcome the session's state, or
``abandon`` drops it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import HumanMessage

from unsee.middleware.errors import SessionNotFound, UnseeError
from unsee.middleware.memory import RecordingStore, StoreOverlay, parse_source_key
from unsee.middleware.records import ArtifactType
from unsee.sandbox.errors import SandboxError

from unsee.middleware import faults
from .derived import Seed, message_prints
from .errors import ReplayFailed, ReplayIncomplete
from .event import RevocationEvent
from .interceptor import ReplayInterceptor, SideEffectPolicy
from .plan import ReplayPlan
from .ports import ForgetContext
from .sanitize import sanitize, sanitize_value
from .strategy import Strategy
from .trace import note, phase
from .thread import artifact_of, delete_thread, recording_store, thread_cfg

log = logging.getLogger("unsee.replay")
#: where a failed replay's traceback goes (DEBUG): the logger the command line's --debug turns on
forget_log = logging.getLogger("unsee.forget")


@dataclass
class ReplayOutcome:
    scratch: str
    interceptor: ReplayInterceptor
    overlay: StoreOverlay | None
    store: RecordingStore | None
    since_ns: int
    #: what the scratch thread was seeded with (the commit checks its state grew from it)
    seed: Seed = Seed(None)


SCRATCH_MARK = "~cf-"


def scratch_thread(session_id: str, event: RevocationEvent, strategy: Strategy | str) -> str:
    """The scratch thread a replay of ``event`` with ``strategy`` runs in."""
    return f"{session_id}{SCRATCH_MARK}{event.event_id[:12]}-{Strategy.parse(strategy).slug}"


def is_scratch_thread(thread_id: str) -> bool:
    """Whether a thread is a replay's scratch thread (not a user session)."""
    return SCRATCH_MARK in thread_id


def clear_scratch(ctx: ForgetContext, agent: Any, scratch: str) -> None:
    """Remove a scratch thread: its records, its cached recorder state, its LangGraph checkpoints."""
    ctx.records.drop_session(scratch)
    ctx.runs.forget_state(scratch)
    delete_thread(agent, scratch)


def _memory_replacement(plan: ReplayPlan, store: RecordingStore | None, target: str) -> dict:
    """The counterfactual memory item when z entered through a memory read."""
    if store is None or plan.entry.type is not ArtifactType.MEMORY_READ or not plan.entry.source_ids:
        return {}
    ns, key = parse_source_key(plan.entry.source_ids[0])
    item = store.inner.get(ns, key)
    return {(ns, key): sanitize_value(item.value if item else None, target)}


def fork_state(agent: Any, plan: ReplayPlan, scratch: str) -> Seed:
    """Seed the scratch thread with the agent state at the fork checkpoint (before its turn's input)."""
    cp = plan.checkpoint
    if cp is None or not cp.langgraph_checkpoint_id or not cp.prompt_manifest:
        return Seed(None)  # fork at an empty state (session start or B5)
    cfg = thread_cfg(cp.langgraph_thread_id or plan.session_id, checkpoint_id=cp.langgraph_checkpoint_id)
    snap = agent.get_state(cfg)
    keep = set(cp.prompt_manifest)
    values = dict(snap.values)
    values["messages"] = [
        m for m in values.get("messages", [])
        if artifact_of(plan.session_id, m) in keep
    ]
    written = agent.update_state(thread_cfg(scratch), values)
    head = ((written or {}).get("configurable") or {}).get("checkpoint_id")
    return Seed(head, message_prints(values["messages"]))


def _crop_cache(ctx: ForgetContext, plan: ReplayPlan) -> None:
    model = ctx.cache()
    if model is None or not hasattr(model, "restore"):
        return
    offset = plan.checkpoint.token_offset if plan.checkpoint is not None else 0
    with phase("restore.kv_cache", kv_offset=offset):
        try:
            model.restore(plan.session_id, offset)  # crop: the clean prefix stays in the cache
            note(kv_cropped=True)
        except Exception:
            note(kv_cropped=False)
            log.debug("cache restore to %s failed; prefix reuse will rebuild it", offset, exc_info=True)


def _recording_failures(ctx: ForgetContext, scratch: str) -> int:
    """Recording failures counted for the scratch thread so far (flushed).

    A replay whose recording failed (the recorder lets the run go on, e.g. when a turn's sandbox
    snapshot met a stopped Docker daemon) must not be committed: the commit makes the scratch
    records the session's and clears the incomplete mark, so the session would silently hold
    checkpoints without their sandbox snapshots. ``run_replay`` compares the count after the
    turns with the one after the fork (the store may remember failures of an earlier attempt
    on the same scratch id in this process)."""
    try:
        return ctx.sessions.session(scratch).failures
    except SessionNotFound:
        return 0


def _in_chain(exc: BaseException, top: BaseException) -> bool:
    """Whether ``exc`` is ``top`` or what it was raised from (LangGraph turns a ``StopIteration``
    into a ``RuntimeError`` raised from it, for one)."""
    seen: set[int] = set()
    e: BaseException | None = top
    while e is not None and id(e) not in seen:
        if e is exc:
            return True
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return False


#: errors unsee raises on purpose, passed through as they are: the middleware's and plugins'
#: (``UnseeError``) and the sandbox's (``SandboxError``: a daemon lost under a sandboxed tool is
#: an environment problem, not the user's code failing)
_OURS = (UnseeError, SandboxError)


def replay_failed(plan: ReplayPlan, event: RevocationEvent, turn: int | None, where: str,
                  interceptor: ReplayInterceptor | None, exc: BaseException) -> ReplayFailed | None:
    """The ``ReplayFailed`` that ``exc``, raised while the replay ran the agent's code, becomes;
    None when it stays as it is: unsee's own typed errors, the sandbox's included (they say what
    happened already, e.g. an injected crash, a lost daemon) and what is not an ``Exception`` (``KeyboardInterrupt``). The call named
    is the one the interceptor saw raise when ``exc`` comes from it, else ``where``."""
    if not isinstance(exc, Exception) or isinstance(exc, _OURS):
        return None
    call, original = where, exc
    if interceptor is not None and interceptor.failure is not None and _in_chain(interceptor.failure[1], exc):
        call, original = interceptor.failure
    if isinstance(original, _OURS):
        return None
    forget_log.debug("the %s replay of session %r failed at turn %s, %s", plan.strategy, plan.session_id,
                     turn, call, exc_info=exc)
    return ReplayFailed(plan.session_id, event.event_id, plan.strategy, turn, call, original)


_IN_RUN = "in the agent run (its middleware, store or checkpointer)"
_IN_FORK = "while forking the thread at its checkpoint (the agent's checkpointer or store)"


def _restore(ctx: ForgetContext, agent: Any, plan: ReplayPlan, event: RevocationEvent,
             scratch: str) -> tuple[RecordingStore | None, StoreOverlay | None, int, Seed]:
    """Fork the session into ``scratch`` at the plan's checkpoint: its records and agent state,
    the memory store (an overlay, the tau item sanitized), the model's KV cache (cropped to the
    clean prefix) and the sandbox (restored into a shadow). Each step is a phase of the trace."""
    session = plan.session_id
    with phase("restore.records", fork_seq=plan.fork_seq):
        clear_scratch(ctx, agent, scratch)  # a crashed earlier attempt may have left one: start clean
        ctx.records.clone_prefix(session, scratch, plan.fork_seq)
        # the fork's recording state starts from the prefix the plan's graph holds (no read back)
        g = ctx.sessions.graph(session)
        ctx.runs.seed_state(scratch, [a for a in g if a.seq < plan.fork_seq],
                            [c for c in g.checkpoints if c.seq < plan.fork_seq])
        failures0 = _recording_failures(ctx, scratch)
        faults.point("fork")
    store = recording_store(agent)
    overlay = None
    try:
        with phase("restore.agent_state"):
            seed = fork_state(agent, plan, scratch)
        if store is not None:
            with phase("restore.memory"):
                replacement = _memory_replacement(plan, store, event.target)
                note(memory_items=len(replacement))
                overlay = store.begin_overlay(scratch, session, plan.fork_seq, replacement)
    except Exception as e:  # (nothing to end yet: the overlay is the last thing begun)
        failed = replay_failed(plan, event, None, _IN_FORK, None, e)
        if failed is None:
            raise
        raise failed from failed.original
    _crop_cache(ctx, plan)
    if ctx.environments is not None:
        snapshot = plan.checkpoint.env_snapshot_id if plan.checkpoint else None
        with phase("restore.sandbox", **({"snapshot": snapshot} if snapshot else {})):
            ctx.environments.begin_replay(scratch, session, snapshot)
    return store, overlay, failures0, seed


def run_replay(ctx: ForgetContext, agent: Any, plan: ReplayPlan, event: RevocationEvent,
               side_effects: SideEffectPolicy = "defer") -> ReplayOutcome:
    """Fork and re-run the plan's turns on a scratch thread (module docstring). Whatever the
    agent's own code raises (model, tool, store, checkpointer) becomes ``ReplayFailed`` naming
    the turn and call, the replay abandoned: the session's state is as it was."""
    session = plan.session_id
    scratch = scratch_thread(session, event, plan.strategy)
    with phase("restore"):
        store, overlay, failures0, seed = _restore(ctx, agent, plan, event, scratch)
    since = plan.checkpoint.created_ns if plan.checkpoint is not None else 0
    outcome = ReplayOutcome(scratch, ReplayInterceptor(plan, event.target, side_effects), overlay, store, since,
                            seed)
    ctx.runs.interceptors.install(scratch, outcome.interceptor)
    turn = None
    try:
        for turn in plan.turns:
            msgs = []
            for i in plan.inputs.get(turn, ()):
                if plan.sanitizes(i.artifact_id):
                    msgs.append(HumanMessage(content=sanitize(i.text, event.target)))
                else:
                    msgs.append(HumanMessage(content=i.text, id=i.message_id))
            if not msgs:
                continue
            faults.point(f"replay:turn:{turn}")
            with phase("turn", turn=turn):
                agent.invoke({"messages": msgs},
                             thread_cfg(scratch, unsee_session=session, unsee_event=event.event_id))
        turn = None
        failures = _recording_failures(ctx, scratch) - failures0
        if failures > 0:
            raise ReplayIncomplete(session, event.event_id, failures)
    except BaseException as e:
        abandon(ctx, outcome)
        failed = replay_failed(plan, event, turn, _IN_RUN, outcome.interceptor, e) if turn is not None else None
        if failed is None:
            raise
        raise failed from failed.original
    finally:
        ctx.runs.interceptors.remove(scratch)
    faults.point("replay:done")
    return outcome


def abandon(ctx: ForgetContext, outcome: ReplayOutcome) -> None:
    """Drop a replay that is not committed (its store overlay and sandbox shadow)."""
    if outcome.store is not None:
        outcome.store.end_overlay(outcome.scratch)
    if ctx.environments is not None:
        ctx.environments.end_replay(outcome.scratch, commit=False)
