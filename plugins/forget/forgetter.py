"""The forget of one session: ``Forgetter.run(request)``, a list of steps.

Each step takes the ``SessionForget`` the steps before it filled in and adds
what it makes; a step that ends the forget (an event already applied, a dry
run, an editing baseline) puts the result on it and the steps after it do not
run (structlog's processor chain is the model). In order:

1. ``applied``: the event id is an idempotency key: an event already applied
   is reported, and a commit begun and interrupted is finished;
2. ``recover``: roll forward the session's other interrupted commits;
3. ``locate``: tau and I(z) (``locate``), once; a session whose records stop
   short of its agent's state is checked first (``unrecorded``);
4. ``plan``: the fork checkpoint, the turns to replay (``plan``); a dry run
   ends here with the plan;
5. ``edit``: IFC revocation, and the editing baselines (``baselines``), which
   end here;
6. ``check``: everything the replay and its commit need, before anything
   changes (``preflight``);
7. ``replay``: fork and restore, the sanitized replay on a scratch thread
   (``replay``);
8. ``commit``: the atomic swap of the counterfactual in (``commit``);
9. ``report``.

A replay that fails before its commit begins leaves no scratch thread behind.
The caller holds the session's lease (``Runs.exclusive``) around the whole
list: ``forget`` takes it; the revocation pipeline takes it once for the
forget, its erasure and its record.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from unsee.middleware import faults
from unsee.middleware.errors import RecordsBehind

from .baselines import apply_edit
from .commit import commit as swap_in, finish_commit, prepare
from .errors import AgentUnknown, CommitInterrupted, IfcNotEnabled
from .event import RevocationEvent
from .locate import Located, locate
from .notes import earlier_sources, human_notes, masked, numerics_differ, unfinished
from .plan import ReplayPlan, describe, make_plan, with_originals
from .ports import ForgetContext
from .preflight import check_replayable, live_state
from .replay import abandon, clear_scratch, run_replay, scratch_thread
from .report import ForgetPlan, ForgetReport, StepError, TransitionOutcome
from .request import ForgetRequest
from .strategy import Strategy
from .trace import phase
from .thread import has_checkpoint
from .unrecorded import unrecorded_messages, with_inputs_from_state

log = logging.getLogger("unsee.forget")


@dataclass
class SessionForget:
    """One session's forget as its steps fill it in."""

    request: ForgetRequest
    #: the erasure that follows a committed replay, asked before the replay why it could not
    #: rewrite the thread (``preflight.check_replayable``); None: no erasure follows
    erasure: Callable[[Any, str], list[str]] | None = None
    agent: Any = None
    located: Located | None = None
    #: the agent state's messages the records lack (a run died before its records were written)
    missing: list = field(default_factory=list)
    plan: ReplayPlan | None = None
    t0: float = 0.0
    counters0: dict[str, int] = field(default_factory=dict)
    live: Any = None
    #: the replay has begun: a failure from here on removes its scratch thread
    replaying: bool = False
    outcome: Any = None
    errors: list[StepError] = field(default_factory=list)
    committed: bool = False
    #: what the forget returns; set by the step that ends it
    result: ForgetReport | ForgetPlan | None = None

    @property
    def session(self) -> str:
        return self.request.session

    @property
    def event(self) -> RevocationEvent:
        return self.request.event

    def base(self) -> dict[str, Any]:
        """The report's fields every strategy fills in."""
        plan, event, cp = self.plan, self.event, self.plan.checkpoint
        return dict(session_id=self.session, strategy=self.request.spec.code, event_id=event.event_id,
                    target_hash=plan.hit.target_hash, tau=plan.hit.step, closure_size=len(plan.closure),
                    checkpoint_id=cp.id if cp else None, checkpoint_kind=cp.kind.value if cp else None)


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


class Forgetter:
    """The forget of one session over the ports of a ``ForgetContext`` (never the facade)."""

    def __init__(self, ctx: ForgetContext):
        self.ctx = ctx

    # -- entry points ----------------------------------------------------------------------------

    def forget(self, session: str, event: RevocationEvent, strategy: Strategy | str = Strategy.B7, *,
               agent: Any | None = None, dry_run: bool = False, commit_result: bool = True, wait: bool = True,
               side_effects: str = "defer",
               erasure: Callable[[Any, str], list[str]] | None = None) -> ForgetReport | ForgetPlan:
        """Forget ``event.target`` in ``session`` without erasing the record (the revocation
        pipeline erases it). Every argument is checked first; the whole forget holds the session:
        no run of the agent, in this process or another, interleaves."""
        request = ForgetRequest.of(session, event, strategy, agent=agent, dry_run=dry_run, commit=commit_result,
                                   wait=wait, side_effects=side_effects)
        with self.ctx.runs.exclusive(session, wait=wait):
            return self.run(request, erasure=erasure).result

    def run(self, request: ForgetRequest, erasure: Callable[[Any, str], list[str]] | None = None) -> SessionForget:
        """The steps, in order, until one ends the forget (the caller holds the session's lease)."""
        return self.finish(self.start(request, erasure))

    def start(self, request: ForgetRequest, erasure: Callable[[Any, str], list[str]] | None = None) -> SessionForget:
        """The steps up to ``locate``: nothing of the session changed yet (the revocation pipeline
        reads where the target spread here, before the commit)."""
        f = SessionForget(request, erasure=erasure)
        self._steps(f, STEPS[:STEPS.index("locate") + 1])
        return f

    def finish(self, f: SessionForget) -> SessionForget:
        """The steps after ``locate``, unless one before ended the forget."""
        if f.result is None:
            self._steps(f, STEPS[STEPS.index("locate") + 1:])
            if f.result is None:
                raise AssertionError("the last step makes the report")  # (unreachable: ``report`` always does)
        return f

    def _steps(self, f: SessionForget, steps: tuple[str, ...]) -> None:
        try:
            for step in steps:
                getattr(self, step)(f)
                if f.result is not None:
                    return
        except BaseException:
            if f.replaying:
                self._drop_scratch(f)
            raise

    def plan(self, session: str, event: RevocationEvent, strategy: Strategy | str = Strategy.B7,
             agent: Any | None = None) -> ReplayPlan:
        """The replay plan of a forget, nothing changed (the ``locate`` and ``plan`` steps)."""
        f = SessionForget(ForgetRequest.of(session, event, strategy, agent=agent))
        self.locate(f)
        self.make_plan(f)
        return f.plan

    def agent_for(self, session: str, agent: Any | None = None) -> Any:
        """The agent a replay of ``session`` runs through: ``agent``, else the one that ran it here."""
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
            agent = self.agent_for(session, agent)
            for event_id, *_ in pending:
                errors = finish_commit(self.ctx, agent, session, event_id)
                if errors:
                    raise CommitInterrupted(session, event_id, RuntimeError(errors[0].message))
                if errors is not None:
                    done.append(event_id)
        return done

    # -- the steps -------------------------------------------------------------------------------

    def applied(self, f: SessionForget) -> None:
        """An event id already seen: finish its commit if it was interrupted, and report."""
        ctx, spec = self.ctx, f.request.spec
        if spec.needs_ifc and ctx.revoker() is None:
            raise IfcNotEnabled(spec.code)
        state = ctx.records.commits.state(f.event.event_id)
        if state is None:
            return
        t0 = time.perf_counter()
        errors = []
        agent = self.agent_for(f.session, f.request.agent)
        if state != "done":
            errors = finish_commit(ctx, agent, f.session, f.event.event_id) or []
        elif spec.replays:
            live_state(agent, f.session)  # (the erasure that follows goes through this agent's saver)
        f.result = ForgetReport(session_id=f.session, strategy=spec.code, event_id=f.event.event_id,
                                target_hash=ctx.hasher.hash(f.event.target), tau=0, closure_size=0,
                                checkpoint_id=None, checkpoint_kind=None, committed=True,
                                wall_time_s=time.perf_counter() - t0, errors=errors,
                                notes=[unfinished(errors) if errors else
                                       "finished a commit interrupted earlier" if state != "done"
                                       else "this event was already applied"])

    def recovered(self, f: SessionForget) -> None:
        self.recover(f.session, f.request.agent)

    def locate(self, f: SessionForget) -> None:
        with phase("locate"):
            f.located = locate(self.ctx.sessions, f.session, f.event,
                               records_complete=lambda info, g: self._records_complete(f, info, g))

    def make_plan(self, f: SessionForget) -> None:
        runs, loc = self.ctx.runs, f.located
        agent = f.request.agent or runs.agents.for_session(f.session)
        with phase("plan"):
            plan = make_plan(loc.graph, loc.hit, loc.closure, f.request.strategy, entries=loc.entries,
                             fork_available=_fork_available(agent, f.session))
            f.plan = with_inputs_from_state(plan, f.session, f.missing) if f.missing else plan
        faults.point("plan")
        if f.request.dry_run:
            f.result = describe(f.plan)

    def edit(self, f: SessionForget) -> None:
        """IFC's revocation, then the editing baselines (which end the forget here)."""
        spec = f.request.spec
        f.t0 = time.perf_counter()
        f.counters0 = self._counters(f.session)
        if spec.needs_ifc:
            # IFC: the target's closure is labelled revoked, so identifiers it introduced
            # are blocked at sinks from now on (B8 stops there: free text still leaks).
            self.ctx.revoker().revoke(f.session, f.plan.closure)
        if spec.replays:
            return
        agent = self.agent_for(f.session, f.request.agent) if spec.needs_agent else None
        notes = apply_edit(self.ctx, agent, f.plan, f.event.target, spec.strategy)
        f.result = ForgetReport(**f.base(), committed=spec.commits, wall_time_s=time.perf_counter() - f.t0,
                                notes=notes)

    def check(self, f: SessionForget) -> None:
        f.agent = self.agent_for(f.session, f.request.agent)
        with phase("check"):
            f.live = check_replayable(f.agent, f.session, f.located.graph, f.plan,
                                      erasure=f.erasure if f.request.commit else None,
                                      inputs_from_state=bool(f.missing))  # (the state's inputs stand in)
            f.plan = with_originals(f.plan, f.live.messages)  # (answers from the record: the original messages)
        faults.point("check")

    def replay(self, f: SessionForget) -> None:
        f.replaying = True
        with phase("replay"):
            f.outcome = run_replay(self.ctx, f.agent, f.plan, f.event, f.request.side_effects)

    def commit(self, f: SessionForget) -> None:
        ctx, g, plan, outcome, event = self.ctx, f.located.graph, f.plan, f.outcome, f.event
        if not f.request.commit:
            abandon(ctx, outcome)
            return
        with phase("commit"):
            try:
                state = prepare(ctx, f.agent, plan, outcome, event, session_messages=len(f.live.messages),
                                earlier_sources=lambda: earlier_sources(g, plan, event.target))
                faults.point("commit:checked")
            except BaseException:
                abandon(ctx, outcome)
                raise
            f.errors = swap_in(ctx, f.agent, plan, outcome, event, state)
        f.committed = True

    def report(self, f: SessionForget) -> None:
        ctx, plan, outcome = self.ctx, f.plan, f.outcome
        st = outcome.interceptor.stats
        counters1 = self._counters(f.session)
        delta = {k: counters1.get(k, 0) - f.counters0.get(k, 0) for k in ("prefilled", "decoded", "reused")}
        notes = []
        if st.diverged_at:
            notes.append(f"the counterfactual diverged from the record at {st.diverged_at}")
        notes.extend(human_notes(plan, outcome))
        if f.errors:
            notes.append(unfinished(f.errors))
        if differs := numerics_differ(ctx.cache(), f.located.graph, plan, f.session):
            notes.append(differs)
        f.result = ForgetReport(
            **f.base(),
            **st.counts.model_dump(),
            transitions_replayed=plan.transitions,
            tokens_prefilled=delta["prefilled"], tokens_decoded=delta["decoded"], tokens_reused=delta["reused"],
            wall_time_s=time.perf_counter() - f.t0,
            orphaned_side_effects=[masked(o, f.event.target, ctx.hasher) for o in outcome.interceptor.orphaned()],
            deferred_side_effects=st.deferred,
            awaiting_human=outcome.awaiting,
            assumed_external=outcome.interceptor.assumed_external(),
            committed=f.committed,
            scratch_thread=outcome.scratch,
            notes=notes,
            errors=f.errors,
            erased_clean=False if f.errors else None,
            outcome=TransitionOutcome(decoded=st.decoded_ids, rematerialised=st.rematerialised_ids,
                                      from_record=st.from_record_ids,
                                      executed=[f"{name}:{cid}" for name, cid in st.executed_calls]),
        )

    # -- helpers ---------------------------------------------------------------------------------

    def _records_complete(self, f: SessionForget, info: Any, g: Any) -> None:
        """For a session a run of which died before its records were written, the agent state's
        messages the records lack (``unrecorded``): ``RecordsBehind`` unless the strategy is B5,
        which takes its user inputs from the state."""
        if not info.run_died:
            return
        missing = unrecorded_messages(self.agent_for(f.session, f.request.agent), f.session, g)
        if not missing:
            self.ctx.records.run_marks.clear(f.session)  # every message is recorded: the mark goes
        elif f.request.strategy is not Strategy.B5:
            raise RecordsBehind(f.session, len(missing), f.request.strategy.value)
        f.missing = missing

    def _drop_scratch(self, f: SessionForget) -> None:
        """After a failed replay, remove its scratch thread, unless a commit was begun
        (then the scratch records are what ``recover`` rolls forward from)."""
        scratch = scratch_thread(f.session, f.event, f.request.strategy)
        try:
            if self.ctx.records.commits.state(f.event.event_id) is not None:
                return
            clear_scratch(self.ctx, f.agent, scratch)
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


#: one session's forget: the ``Forgetter`` methods run in order (the module docstring); by name,
#: so a subclass or a profiler that replaces one is the one run
STEPS: tuple[str, ...] = ("applied", "recovered", "locate", "make_plan", "edit", "check", "replay", "commit",
                          "report")
