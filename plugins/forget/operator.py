"""The forget operator: ``u.forget(thread_id, event, strategy="B7")``.

Validates everything before changing anything (every argument's type and
value, unknown thread, incomplete recording, empty or absent target,
ambiguous source, unknown strategy), waits for a run in progress to end, then
plans and applies the strategy and reports. A replay that fails before its
commit begins leaves no scratch thread behind. A commit that was begun and
interrupted is rolled forward first; forgetting again with the same
``event_id`` finishes it and reports.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from unsee.middleware.errors import AmbiguousTarget, IncompleteSession, InvalidArgument, RecordsBehind

from unsee.middleware import faults
from .baselines import apply_edit
from .behind import unrecorded_messages, with_inputs_from_state
from .commit import commit, finish_commit, prepare
from .decide import SIDE_EFFECT_POLICIES, SideEffectPolicy
from .errors import AgentUnknown, CommitInterrupted, IfcNotEnabled
from .event import RevocationEvent
from .plan import ReplayPlan, describe, make_plan, observed_entries, with_originals
from .ports import ForgetContext
from .replay import abandon, clear_scratch, is_scratch_thread, run_replay, scratch_thread
from .trace import phase, record_superseded
from .preflight import check_replayable, live_state
from .report import ForgetPlan, ForgetReport, SideEffect, StepError, TransitionOutcome
from .sanitize import sanitize, sanitize_value
from .strategy import Strategy
from .thread import has_checkpoint

log = logging.getLogger("unsee.forget")


def _got(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 60 else text[:57] + '...'}"


def validate_forget_args(session: Any, event: Any, strategy: Any, *, agent: Any = None,
                         side_effects: Any = "defer", **flags: Any) -> Strategy:
    """Check every argument of a forget before anything is read or written; the strategy parsed.

    Raises ``InvalidArgument`` (a ``ValueError``) or ``UnknownStrategy`` naming
    the argument, what it must be and what it got.
    """
    if not isinstance(session, str) or not session.strip():
        raise InvalidArgument(f"thread_id must be a non-empty string (the session's LangGraph thread_id), "
                              f"got {_got(session)}")
    if is_scratch_thread(session):
        raise InvalidArgument(f"thread_id {session!r} is the scratch thread of a replay, not a session: "
                              "forget in the session it was made for")
    if not isinstance(event, RevocationEvent):
        raise InvalidArgument(f"event must be a RevocationEvent, e.g. RevocationEvent(target=...), got {_got(event)}")
    parsed = Strategy.parse(strategy)  # UnknownStrategy
    if agent is not None:
        from langgraph.pregel import Pregel

        if not isinstance(agent, Pregel):
            hint = (": import it and pass the object (only the command line's --agent takes module:attribute)"
                    if isinstance(agent, str) else "")
            raise InvalidArgument("agent must be a compiled LangGraph agent (create_agent(...) or "
                                  f"StateGraph(...).compile()) or None, got {_got(agent)}{hint}")
    if side_effects not in SIDE_EFFECT_POLICIES:
        raise InvalidArgument(f"side_effects must be one of {', '.join(SIDE_EFFECT_POLICIES)}, "
                              f"got {_got(side_effects)}")
    for name, value in flags.items():
        if not isinstance(value, bool):
            raise InvalidArgument(f"{name} must be True or False, got {_got(value)}")
    return parsed


def _masked(effect: SideEffect, target: str, hasher: Any) -> SideEffect:
    """A side effect as the report shows it: the target replaced by its keyed hash
    (the report says where it went, never reprints it)."""
    mark = f"[erased {hasher.hash(target)}]"
    return effect.model_copy(update={"args": sanitize_value(effect.args, target, mark),
                                     "result": None if effect.result is None else sanitize(effect.result, target,
                                                                                           mark)})


def _fork_available(agent: Any, session: str):
    """Whether a recorded checkpoint's LangGraph checkpoint is still in the agent's saver (a retention
    policy may have pruned it); None (assume so) when no saver is known."""
    saver = getattr(agent, "checkpointer", None)
    if saver is None or not hasattr(saver, "get_tuple"):
        return None

    def available(cp) -> bool:
        thread = cp.langgraph_thread_id or session
        try:
            found = has_checkpoint(saver, thread, cp.langgraph_checkpoint_id)  # (without loading it)
            if found is not None:
                return found
            conf = {"thread_id": thread, "checkpoint_ns": "", "checkpoint_id": cp.langgraph_checkpoint_id}
            return saver.get_tuple({"configurable": conf}) is not None
        except Exception:  # (a saver that cannot read it: the fork reports that, as before)
            return True
    return available


def _unfinished(errors: list[StepError]) -> str:
    return ("committed: the session holds the counterfactual, but the commit's last steps did not finish "
            f"({errors[0].message}); the next forget of this session, or this event again, finishes them "
            "(its record is not erased until then)")


def _numerics_differ(model: Any, g: Any, plan: ReplayPlan, session: str) -> str | None:
    """A note when the local model's numerics now (``numerics(session)``: what its logits depend on,
    backend, kernels, versions) differ from those the replayed turns were recorded with: a decoded
    token can then differ from the original run's at a near-tie, and the report says so. None when
    they agree, or no turn recorded any (another model)."""
    numerics = getattr(model, "numerics", None)
    if not callable(numerics):
        return None
    recorded = {str(a.attrs["numerics"]) for t in plan.model_turns
                if t.artifact_id in g and (a := g.get(t.artifact_id)).attrs.get("numerics")}
    if not recorded:
        return None
    try:
        current = str(numerics(session))
    except Exception:  # (an observer: the note is best effort)
        return None
    if not (other := sorted(recorded - {current})):
        return None
    return (f"the local model's numerics differ from those the replayed turns were recorded with "
            f"(recorded {', '.join(other)}; now {current}): a decoded token can differ from the original "
            "run's at a near-tie")


def _earlier_sources(g: Any, plan: ReplayPlan, target: str) -> list[str]:
    """Where the record shows ``target`` entered before this forget's entry (kept in the prefix)."""
    out: dict[str, None] = {}
    for a in g.occurrences(target):
        if a.is_observation and a.seq < plan.entry.seq:
            out[f"{a.source_ids[0] if a.source_ids else a.type.value} ({a.id}, turn {a.turn})"] = None
    return list(out)


def _human_notes(plan: ReplayPlan, outcome: Any) -> list[str]:
    """What the report says of the human decisions the replay met (``given.py``)."""
    notes = []
    if outcome.unasked:
        notes.append(f"the counterfactual asked no question where the session recorded {len(outcome.unasked)} "
                     f"human decision(s) ({', '.join(outcome.unasked)}): not given")
    if outcome.stopped_at is not None:
        left = [r.artifact_id for r in plan.runs if r.artifact_id not in outcome.given
                and r.artifact_id not in outcome.unasked and r.turn >= outcome.stopped_at]
        notes.append(f"the counterfactual asks a question of its own at recorded turn {outcome.stopped_at}, which no "
                     "recorded decision answered: the session now waits for a human there (awaiting_human), and "
                     f"the {len(left)} recorded input(s) after it were not given")
    elif outcome.awaiting:
        notes.append("the session waits for a human at the counterfactual's question, as it waited before the forget")
    return notes


class Forgetter:
    """The forget operator over the ports of a ``ForgetContext`` (never the facade)."""

    def __init__(self, ctx: ForgetContext):
        self.ctx = ctx

    def agent_for(self, session: str, agent: Any | None = None) -> Any:
        """The agent a replay of ``session`` runs through: ``agent``, else the one that ran it here."""
        return self._agent(session, agent)

    def _agent(self, session: str, agent: Any | None) -> Any:
        runs = self.ctx.runs
        agent = agent or runs.agents.for_session(session)
        if agent is None:
            raise AgentUnknown(session)
        return agent

    def recover(self, session: str, agent: Any | None = None) -> list[str]:
        """Roll forward every commit of ``session`` that was begun but not finished; a commit whose
        remaining steps fail again raises ``CommitInterrupted`` (nothing of the forget that called
        this has begun)."""
        done = []
        pending = self.ctx.records.commits.pending(session)
        if pending:
            agent = self._agent(session, agent)
            for event_id, *_ in pending:
                errors = finish_commit(self.ctx, agent, session, event_id)
                if errors:
                    raise CommitInterrupted(session, event_id, RuntimeError(errors[0].message))
                if errors is not None:
                    done.append(event_id)
        return done

    def plan(self, session: str, event: RevocationEvent, strategy: Strategy | str = Strategy.B7,
             agent: Any | None = None) -> ReplayPlan:
        strategy = Strategy.parse(strategy)  # UnknownStrategy
        sessions = self.ctx.sessions
        info = sessions.session(session)  # SessionNotFound
        if info.incomplete:
            raise IncompleteSession(session, info.failures)
        g = sessions.graph(session)
        missing = self._unrecorded(session, info, g, strategy, agent)
        if event.source is None:
            sources = g.entry_sources(event.target)
            if len(sources) > 1:
                raise AmbiguousTarget(sources)
        hit = g.locate(event.target, event.source)  # TargetNotFound / InvalidArgument
        entries = observed_entries(g, event.target, hit, event.source)
        runs = self.ctx.runs
        plan = make_plan(g, hit, g.taint(sorted(entries)), strategy, entries=entries,
                         fork_available=_fork_available(agent or runs.agents.for_session(session), session))
        return with_inputs_from_state(plan, session, missing) if missing else plan

    def _unrecorded(self, session: str, info: Any, g: Any, strategy: Strategy, agent: Any | None) -> list:
        """The agent state's messages the records lack, for a session a run of which died
        before its records were written (``behind.py``); [] otherwise. ``RecordsBehind`` unless
        ``strategy`` is B5."""
        if not info.run_died:
            return []
        missing = unrecorded_messages(self._agent(session, agent), session, g)
        if not missing:
            self.ctx.records.run_marks.clear(session)  # every message is recorded: the mark goes
        elif strategy is not Strategy.B5:
            raise RecordsBehind(session, len(missing), strategy.value)
        return missing

    def forget(self, session: str, event: RevocationEvent, strategy: Strategy | str = Strategy.B7, *,
               agent: Any | None = None, dry_run: bool = False, commit_result: bool = True, wait: bool = True,
               side_effects: SideEffectPolicy = "defer",
               erasure: Callable[[Any, str], list[str]] | None = None) -> ForgetReport | ForgetPlan:
        """Forget ``event.target`` in ``session`` (see the module docstring). The whole forget
        holds the session: no run of the agent, in this process or another, interleaves.
        ``erasure``: the erasure that follows a committed replay, asked before the replay why it
        could not rewrite the thread (``preflight.check_replayable``); None: no erasure follows."""
        validate_forget_args(session, event, strategy, agent=agent, side_effects=side_effects,
                             dry_run=dry_run, commit=commit_result, wait=wait)
        with self.ctx.runs.exclusive(session, wait=wait):
            return self._forget(session, event, strategy, agent=agent, dry_run=dry_run,
                                commit_result=commit_result, side_effects=side_effects, erasure=erasure)

    def _forget(
        self,
        session: str,
        event: RevocationEvent,
        strategy: Strategy | str = Strategy.B7,
        *,
        agent: Any | None = None,
        dry_run: bool = False,
        commit_result: bool = True,
        side_effects: SideEffectPolicy = "defer",
        erasure: Callable[[Any, str], list[str]] | None = None,
    ) -> ForgetReport | ForgetPlan:
        ctx = self.ctx
        spec = Strategy.parse(strategy).spec
        if spec.needs_ifc and ctx.revoker() is None:
            raise IfcNotEnabled(spec.code)
        state = ctx.records.commits.state(event.event_id)
        if state is not None:  # the event id is an idempotency key
            t0 = time.perf_counter()
            errors = []
            agent = self._agent(session, agent)
            if state != "done":
                errors = finish_commit(ctx, agent, session, event.event_id) or []
            elif spec.replays:
                live_state(agent, session)  # (the erasure that follows goes through this agent's saver)
            return ForgetReport(session_id=session, strategy=spec.code, event_id=event.event_id,
                                target_hash=ctx.hasher.hash(event.target), tau=0, closure_size=0,
                                checkpoint_id=None, checkpoint_kind=None, committed=True,
                                wall_time_s=time.perf_counter() - t0, errors=errors,
                                notes=[_unfinished(errors) if errors else
                                       "finished a commit interrupted earlier" if state != "done"
                                       else "this event was already applied"])
        self.recover(session, agent)
        with phase("plan"):
            plan = self.plan(session, event, spec.strategy, agent)
        faults.point("plan")
        if dry_run:
            return describe(plan)
        t0 = time.perf_counter()
        counters0 = self._counters(session)
        cp = plan.checkpoint
        base = dict(session_id=session, strategy=spec.code, event_id=event.event_id,
                    target_hash=plan.hit.target_hash, tau=plan.hit.step, closure_size=len(plan.closure),
                    checkpoint_id=cp.id if cp else None, checkpoint_kind=cp.kind.value if cp else None)
        if spec.needs_ifc:
            # IFC: the target's closure is labelled revoked, so identifiers it introduced
            # are blocked at sinks from now on (B8 stops there: free text still leaks).
            ctx.revoker().revoke(session, plan.closure)
        if not spec.replays:
            notes = apply_edit(ctx, self._agent(session, agent) if spec.needs_agent else None,
                               plan, event.target, spec.strategy)
            return ForgetReport(**base, committed=spec.commits, wall_time_s=time.perf_counter() - t0,
                                notes=notes)
        agent = self._agent(session, agent)
        g = ctx.sessions.graph(session)
        with phase("check"):
            live = check_replayable(agent, session, g, plan, erasure=erasure if commit_result else None,
                                    inputs_from_state=ctx.sessions.session(session).run_died)
            plan = with_originals(plan, live.messages)  # (answers from the record: the original messages)
        faults.point("check")
        errors: list[StepError] = []
        try:
            with phase("replay"):
                outcome = run_replay(ctx, agent, plan, event, side_effects)
            st = outcome.interceptor.stats
            # (the session's graph is still the recorded one: the commit has not run)
            record_superseded(lambda: ctx.sessions.graph(session),
                              [*st.decoded_ids, *st.rematerialised_ids, *st.from_record_ids])
            orphaned = [_masked(o, event.target, ctx.hasher) for o in outcome.interceptor.orphaned()]
            committed = False
            if commit_result:
                with phase("commit"):
                    try:
                        state = prepare(ctx, agent, plan, outcome, event, session_messages=len(live.messages),
                                        earlier_sources=lambda: _earlier_sources(g, plan, event.target))
                        faults.point("commit:checked")
                    except BaseException:
                        abandon(ctx, outcome)
                        raise
                    errors = commit(ctx, agent, plan, outcome, event, state)
                committed = True
            else:
                abandon(ctx, outcome)
        except BaseException:
            self._drop_scratch(agent, scratch_thread(session, event, spec.strategy), event.event_id)
            raise
        counters1 = self._counters(session)
        delta = {k: counters1.get(k, 0) - counters0.get(k, 0) for k in ("prefilled", "decoded", "reused")}
        notes = []
        if st.diverged_at:
            notes.append(f"the counterfactual diverged from the record at {st.diverged_at}")
        notes.extend(_human_notes(plan, outcome))
        if errors:
            notes.append(_unfinished(errors))
        if differs := _numerics_differ(ctx.cache(), g, plan, session):
            notes.append(differs)
        return ForgetReport(
            **base,
            **st.counts.model_dump(),
            transitions_replayed=plan.transitions,
            tokens_prefilled=delta["prefilled"], tokens_decoded=delta["decoded"], tokens_reused=delta["reused"],
            wall_time_s=time.perf_counter() - t0,
            orphaned_side_effects=orphaned,
            deferred_side_effects=st.deferred,
            awaiting_human=outcome.awaiting,
            assumed_external=outcome.interceptor.assumed_external(),
            committed=committed,
            scratch_thread=outcome.scratch,
            notes=notes,
            errors=errors,
            erased_clean=False if errors else None,
            outcome=TransitionOutcome(decoded=st.decoded_ids, rematerialised=st.rematerialised_ids,
                                      from_record=st.from_record_ids,
                                      executed=[f"{name}:{cid}" for name, cid in st.executed_calls]),
        )

    def _drop_scratch(self, agent: Any, scratch: str, event_id: str) -> None:
        """After a failed replay, remove its scratch thread, unless a commit was begun
        (then the scratch records are what ``recover`` rolls forward from)."""
        try:
            if self.ctx.records.commits.state(event_id) is not None:
                return
            clear_scratch(self.ctx, agent, scratch)
        except Exception:  # the original error is what the caller must see
            log.warning("could not remove the scratch thread %s of a failed forget", scratch, exc_info=True)

    def _counters(self, session: str) -> dict[str, int]:
        model = self.ctx.cache()
        fn = getattr(model, "session_counters", None)
        if fn is None:
            return {}
        try:
            c = fn(session)
        except Exception:
            return {}
        if isinstance(c, dict):
            return c
        return {k: int(getattr(c, k, 0)) for k in ("prefilled", "decoded", "reused")}
