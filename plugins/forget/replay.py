"""Fork and sanitized replay on a real LangGraph agent.

``run_replay`` forks the session's LangGraph thread at the plan's checkpoint
into a scratch thread (records cloned up to the fork point, the local model's
cache cropped, the sandbox restored into a shadow), rolls the memory store
back to the fork point in an overlay (with the tau memory item sanitized),
installs the replay interceptor and gives each recorded run input again, in
order, without the target (``given.py``: a human's decision only to the
question it answered, else the replay stops there, waiting for a human). The
agent runs with ``invoke``, or with ``ainvoke`` on the caller's event loop
under ``aforget`` (``replay_loop``). Nothing the user's thread, store or records hold changes
here: ``commit`` (the next step) makes the outcome the session's state, or
``abandon`` drops it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import logging
import weakref
from dataclasses import dataclass
from typing import Any

from unsee.middleware.errors import SessionNotFound, UnseeError
from unsee.middleware.memory import RecordingStore, StoreOverlay, parse_source_key
from unsee.middleware.records import ArtifactType
from unsee.middleware.run_inputs import REPLAYED_INPUT
from unsee.sandbox.errors import SandboxError

from unsee.middleware import faults
from .derived import Seed, message_prints
from .errors import ReplayFailed, ReplayIncomplete
from .given import asked, question_matches, resume_for, runs_to_give, value_of
from .event import RevocationEvent
from .interceptor import ReplayInterceptor, SideEffectPolicy
from .plan import ReplayPlan
from .ports import ForgetContext
from .sanitize import sanitize_value
from .strategy import Strategy
from .trace import note, phase
from .thread import artifact_of, delete_thread, recording_store, thread_cfg, write_state

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
    #: the recorded inputs (user inputs, run inputs) the replay gave the graph again
    given: frozenset[str] = frozenset()
    #: what the counterfactual's graph waits at when the replay is over (its interrupts' values):
    #: a question for a human, the session's own pause or one of its own (``stopped_at``)
    awaiting: list | None = None
    #: the recorded turn whose input the replay did not give because the counterfactual asks a
    #: question the recorded decision did not answer (None: every input was given)
    stopped_at: int | None = None
    #: recorded decisions not given: the counterfactual asked no question there
    unasked: tuple[str, ...] = ()
    #: the recorded turn being given now (a failure names it)
    turn: int | None = None


SCRATCH_MARK = "~cf-"


def scratch_thread(session_id: str, event: RevocationEvent, strategy: Strategy | str) -> str:
    """The scratch thread a replay of ``event`` with ``strategy`` runs in."""
    return f"{session_id}{SCRATCH_MARK}{event.event_id[:12]}-{Strategy.parse(strategy).slug}"


def is_scratch_thread(thread_id: str) -> bool:
    """Whether a thread is a replay's scratch thread (not a user session)."""
    return SCRATCH_MARK in thread_id


def clear_scratch(ctx: ForgetContext, agent: Any, scratch: str) -> None:
    """Remove a scratch thread: its records, its cached recorder state, its LangGraph checkpoints."""
    ctx.records.rewrites.drop_session(scratch)
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
    values = dict(snap.values)
    values.update(_keys_before_input(agent, snap, plan))
    values["messages"] = kept_messages(values.get("messages", []), set(cp.prompt_manifest), plan.session_id)
    written = write_state(agent, thread_cfg(scratch), values)
    head = ((written or {}).get("configurable") or {}).get("checkpoint_id")
    return Seed(head, message_prints(values["messages"]))


def _keys_before_input(agent: Any, snap: Any, plan: ReplayPlan) -> dict:
    """The state keys other than messages as they were before the fork turn's input, when the
    replay gives that input again (a recorded run input): the fork checkpoint is the first one of
    its run, the input already applied, and its parent the run's ``input`` checkpoint, which holds
    the state before it. A key the input set then comes from the input again, without the target
    where it held it. {} otherwise (the keys stay as the fork checkpoint holds them)."""
    turn = plan.checkpoint.turn if plan.checkpoint is not None else None
    first = next((r for r in plan.runs if r.turn == turn), None)
    body = (first.payload.get("keys") or first.payload.get("update") or {}) if first is not None else {}
    keys = {k for k in body if k != "messages"} if isinstance(body, dict) else set()
    if not keys or not getattr(snap, "parent_config", None):
        return {}  # (the input set messages only: no other key to take back; no extra load)
    parent = agent.get_state(snap.parent_config)
    if (getattr(parent, "metadata", None) or {}).get("source") != "input":
        return {}
    before = dict(parent.values or {})
    # (a key the input brought in is None in the seed: the input gives it again; a channel
    # cannot be unset through a state update)
    return {k: before.get(k) for k in keys if k in snap.values}


def kept_messages(messages: list, manifest: set[str], session: str) -> list:
    """The messages of the fork checkpoint's state the scratch thread starts with: those of the
    checkpoint's manifest (the turn's own input is given again by the replay), and the answer
    of every tool call a kept model message made. An answer the agent wrote without running a
    tool (the tool message ``create_agent`` adds for a structured response) reaches no prompt
    before the next turn begins, so the manifest lacks it; without it the transcript would hold
    a call with no answer, which no chat API accepts."""
    from langchain_core.messages import ToolMessage

    kept = [m for m in messages if artifact_of(session, m) in manifest]
    called = {c.get("id") for m in kept for c in getattr(m, "tool_calls", None) or []}
    answered = {getattr(m, "tool_call_id", None) for m in kept if isinstance(m, ToolMessage)}
    wanted = called - answered
    if not wanted:
        return kept
    return [m for m in messages if artifact_of(session, m) in manifest
            or (isinstance(m, ToolMessage) and m.tool_call_id in wanted)]


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
        ctx.records.rewrites.clone_prefix(session, scratch, plan.fork_seq)
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
    try:
        _give_runs(agent, plan, event, outcome)
        outcome.turn = None
        failures = _recording_failures(ctx, scratch) - failures0
        if failures > 0:
            raise ReplayIncomplete(session, event.event_id, failures)
    except BaseException as e:
        abandon(ctx, outcome)
        turn = outcome.turn
        failed = replay_failed(plan, event, turn, _IN_RUN, outcome.interceptor, e) if turn is not None else None
        if failed is None:
            raise
        raise failed from failed.original
    finally:
        ctx.runs.interceptors.remove(scratch)
    faults.point("replay:done")
    return outcome


def _give_runs(agent: Any, plan: ReplayPlan, event: RevocationEvent, outcome: ReplayOutcome) -> None:
    """Give the graph each recorded run's input again, in order (``given``), on the scratch
    thread; a recorded decision only to the question it answered, else stop there."""
    given: list[str] = []
    unasked: list[str] = []
    pending: Any = ()  # (the seed is a state update: nothing waits at an interrupt)
    for give in runs_to_give(plan):
        if give.resumes:
            if not pending:  # the counterfactual asked nothing there: no one answers
                unasked.append(give.run.artifact_id)
                continue
            if not question_matches(pending, give, plan, event.target):
                outcome.stopped_at = give.turn
                break
            value = value_of(give, plan, event.target)
            value = replace_command(value, resume=resume_for(value.resume, pending, give))
        elif pending:  # the counterfactual waits at a question the session did not stop at here
            outcome.stopped_at = give.turn
            break
        else:
            value = value_of(give, plan, event.target)
        cfg = thread_cfg(outcome.scratch, unsee_session=plan.session_id, unsee_event=event.event_id)
        if give.run is not None:  # (the root run's metadata: its input is recorded with this id again)
            cfg["metadata"] = {REPLAYED_INPUT: give.run.artifact_id}
        outcome.turn = give.turn
        faults.point(f"replay:turn:{give.turn}")
        with phase("turn", turn=give.turn):
            result = run_agent(agent, value, cfg)
        given.extend(give.artifact_ids)
        pending = _waiting_at(agent, cfg, result)
    outcome.given = frozenset(given)
    outcome.unasked = tuple(unasked)
    outcome.awaiting = asked(pending) if pending else None


def _waiting_at(agent: Any, cfg: dict, result: Any) -> tuple:
    """The interrupts the scratch thread waits at after a run: from the run's output (``invoke``
    puts them under ``__interrupt__``), else read from its state (an output of another shape)."""
    if isinstance(result, dict):
        return tuple(result.get("__interrupt__") or ())
    return tuple(getattr(agent.get_state(thread_cfg(cfg["configurable"]["thread_id"])), "interrupts", ()) or ())


def replace_command(command: Any, **changes: Any) -> Any:
    from langgraph.types import Command

    fields = {"graph": command.graph, "update": command.update, "resume": command.resume, "goto": command.goto}
    fields.update(changes)
    return Command(**fields)


#: the event loop a replay runs the agent on with ``ainvoke`` (set by ``aforget``); None: ``invoke``
replay_loop: contextvars.ContextVar[asyncio.AbstractEventLoop | None] = contextvars.ContextVar(
    "unsee_replay_loop", default=None)


def run_agent(agent: Any, value: Any, cfg: dict) -> Any:
    """One run of the agent: ``invoke`` here, or ``ainvoke`` on the caller's event loop when an
    ``aforget`` runs the replay (``replay_loop``: its async-only tools and models run there, on
    the loop their clients live on, in this thread's context)."""
    loop = replay_loop.get()
    if loop is None or not _saver_is_async(agent, loop, cfg):
        return agent.invoke(value, cfg)
    return on_loop(loop, lambda: agent.ainvoke(value, cfg))


def _saver_is_async(agent: Any, loop: asyncio.AbstractEventLoop, cfg: dict) -> bool:
    """Whether the agent's checkpointer answers its async API (a ``SqliteSaver`` or a sync
    ``PostgresSaver`` refuses it: LangGraph's ``ainvoke`` could not run on it, and the session was
    run with ``invoke``); asked once per checkpointer."""
    saver = getattr(agent, "checkpointer", None)
    if saver is None or isinstance(saver, bool):
        return True
    try:
        return _async_savers[saver]
    except (KeyError, TypeError):  # (TypeError: a saver no weak reference reaches: asked each time)
        pass
    try:
        on_loop(loop, lambda: saver.aget_tuple(cfg))
        known = True
    except NotImplementedError:
        known = False
    except Exception:  # (it answered, with an error of its own: async it is)
        known = True
    with contextlib.suppress(TypeError):
        _async_savers[saver] = known
    return known


#: checkpointer -> whether it answers its async API (the user's object is never written to)
_async_savers: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()


def on_loop(loop: asyncio.AbstractEventLoop, make: Any) -> Any:
    """Run the coroutine ``make()`` on ``loop`` (another thread's) in this thread's context; wait."""
    done: concurrent.futures.Future = concurrent.futures.Future()
    context = contextvars.copy_context()

    def start() -> None:
        try:
            task = loop.create_task(make(), context=context)
        except BaseException as e:  # (the coroutine could not be made)
            done.set_exception(e)
            return

        def finished(t: asyncio.Task) -> None:
            if t.cancelled():
                done.set_exception(concurrent.futures.CancelledError())
            elif t.exception() is not None:
                done.set_exception(t.exception())
            else:
                done.set_result(t.result())
        task.add_done_callback(finished)

    loop.call_soon_threadsafe(start)
    return done.result()


def abandon(ctx: ForgetContext, outcome: ReplayOutcome) -> None:
    """Drop a replay that is not committed (its store overlay and sandbox shadow)."""
    if outcome.store is not None:
        outcome.store.end_overlay(outcome.scratch)
    if ctx.environments is not None:
        ctx.environments.end_replay(outcome.scratch, commit=False)
