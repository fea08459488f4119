"""Reconcile the world with a forget's counterfactual: compensate what only the forgotten world did,
run (with a decision) what only the counterfactual wants, exactly once.

``Reconciler.keep`` makes a forget's plan (``plan.build_plan``) and keeps it in the call ledger,
once per event (the first writer's plan stands). ``Reconciler.run`` takes the items a reconcile
may run, asks for approval (``approval``), and runs each approved item through
``Ledger.run_once`` under the item's key, so:

- it runs at most once, in any number of processes and machines on one store (the ledger's claim:
  a row moves ``pending -> compensating -> compensated | compensation_failed``, or ``pending ->
  fired -> done | failed`` for a deferred call);
- a process that dies while an item runs leaves it ``started``: the next reconcile reports it in
  doubt and runs nothing, unless the compensator (or tool) is idempotent, when it is claimed again
  and run (rolled forward), by one process; ``Ledger.resolve`` settles one by hand;
- an item that failed stays ``failed`` and runs again only when asked (``retry=True``).

After a reconcile that ran something: the forget's receipt is signed again with its
reconciliation section, the forget's view record gains the compensations, and an
``execute_tool`` span per item joins the forget's trace. Each is an observer: a failure is put
on the outcome (``errors``), never raised over what ran.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Literal

from pydantic import BaseModel, ConfigDict, Field

from unsee.middleware import faults
from unsee.plugins.tools import ledger_bypassed

from .approval import approval_request, decisions
from .catalog import agent_tools, compensators, tool_map
from .errors import (
    CompensationFailed, CompensatorUnavailable, NeedsAsync, PlanAlreadyRun, UnknownReconciliation,
)
from .masking import mask_value
from .plan import ReconcileItem, ReconcilePlan, args_text, build_plan, state_of
from .trace import Ran, reconcile_spans

__all__ = ["ReconcileContext", "Reconciler", "ReconcileOutcome", "RUNS"]

log = logging.getLogger("unsee.reconcile")

Run = Literal["plan", "compensate", "all"]
#: what ``run=`` takes: the plan only, its compensations, or its compensations and deferred calls
RUNS: tuple[str, ...] = ("plan", "compensate", "all")
_ACTIONS = {"plan": (), "compensate": ("compensate",), "all": ("compensate", "run")}


class ReconcileOutcome(BaseModel):
    """What one reconcile did: the plan as it stands after it (each item's state), and the keys of
    the items it ran (``ran``: compensated or run now), found already done by another reconcile
    (``already``), left in doubt (``in_doubt``), that failed (``failed``), or a human declined
    (``declined``). ``receipt``: the receipt signed again with the reconciliation (its path)."""

    model_config = ConfigDict(frozen=True)

    event_id: str
    run: str
    plan: ReconcilePlan
    ran: list[str] = Field(default_factory=list)
    already: list[str] = Field(default_factory=list)
    in_doubt: list[str] = Field(default_factory=list)
    failed: list[str] = Field(default_factory=list)
    declined: list[str] = Field(default_factory=list)
    receipt: str | None = None
    #: observers that failed after the items ran ("receipt: ...", "view record: ...", "trace: ...")
    errors: list[str] = Field(default_factory=list)


@dataclass
class ReconcileContext:
    """What a reconciler needs from the rest (the facade builds it).

    ``ledger(create)``: the call ledger (plans and the rows that run them); None when there is
    none and ``create`` is False (reading never makes one); ``tools(session, agent)``:
    the tools this process knows for the session (the agent's, and those made by the facade),
    by name; ``tracer()``: the forget's tracer (None: not traced); ``amend_receipt(event_id,
    facts)``: sign the forget's receipt again with its reconciliation section (its path; None:
    no receipt); ``keep_record(event_id, items)``: put the compensations on the forget's view
    record."""

    ledger: Callable[[bool], Any]
    tools: Callable[[str, Any], dict[str, Any]]
    tracer: Callable[[], Any] = lambda: None
    #: the home's keyed hash (``ContentHasher.hash``): what finds the target, by its hash, in what a
    #: compensator returns (None: nothing is searched)
    keyed_hash: Callable[[str], str] | None = None
    amend_receipt: Callable[[str, list[ReconcileItem]], str | None] | None = None
    keep_record: Callable[[str, list[ReconcileItem]], None] | None = None


@dataclass
class _Work:
    """One reconcile as it goes: the plan, the items it takes, what runs each."""

    plan: ReconcilePlan
    run: str
    items: list[ReconcileItem] = field(default_factory=list)
    callables: dict[str, Any] = field(default_factory=dict)
    ran: list[Ran] = field(default_factory=list)
    declined: list[str] = field(default_factory=list)


class Reconciler:
    """Plans and runs forgets' reconciliations (the module docstring)."""

    def __init__(self, ctx: ReconcileContext):
        self.ctx = ctx

    # -- plans ----------------------------------------------------------------------------------
    def keep(self, report: Any, agent: Any = None, target_length: int = 0) -> ReconcilePlan:
        """The plan of a committed forget (``ForgetReport``), kept in the ledger (the first kept
        plan of the event stands: a second forget process or a rerun reads that one).
        ``target_length``: the target's length (what finds it in what compensators return)."""
        tools = self.ctx.tools(report.session_id, agent)
        from unsee.middleware.tools import idempotent

        plan = build_plan(report, compensators(tools), lambda name: idempotent(tools.get(name)),
                          earlier_runs=self._earlier_runs(report.session_id, report.event_id),
                          target_length=target_length)
        ledger = self.ctx.ledger(bool(plan.items))
        if ledger is None:  # (nothing to reconcile, and no ledger: none is made for an empty plan)
            return plan
        kept = ledger.keep_plan(plan.event_id, plan.session_id, plan.model_dump_json())
        faults.point("reconcile:planned")
        return self._with_states(ReconcilePlan.model_validate_json(kept))

    def _earlier_runs(self, session: str, event_id: str) -> dict[tuple[str, str], list[str]]:
        """The deferred calls earlier reconciliations of ``session`` ran (or started), by (tool,
        arguments): they are in the world now, whatever the session's record says."""
        ledger = self.ctx.ledger(False)
        earlier = [text for other, _, text in (ledger.plans(session=session) if ledger is not None else [])
                   if other != event_id]
        if not earlier:
            return {}
        rows = {r.call_id: r for r in ledger.calls(session=session)}  # (one read for every earlier plan)
        out: dict[tuple[str, str], list[str]] = {}
        for text in earlier:
            for item in self._with_states(ReconcilePlan.model_validate_json(text), rows).items:
                if item.action == "run" and item.state in ("done", "started"):
                    out.setdefault((item.tool, args_text(item.args)), []).append(item.key)
        return out

    def note_span(self, event_id: str, span_context: Any) -> None:
        """Remember the forget's root span (its reconciliation's spans are its children)."""
        ledger = self.ctx.ledger(False)
        text = ledger.plan(event_id) if ledger is not None else None
        if text is None or span_context is None or not getattr(span_context, "is_valid", False):
            return
        plan = ReconcilePlan.model_validate_json(text)
        if plan.forget_span is None:
            plan = plan.model_copy(update={"forget_span": (format(span_context.trace_id, "032x"),
                                                           format(span_context.span_id, "016x"))})
            ledger.replace_plan(event_id, plan.model_dump_json())

    def plan(self, event_id: str) -> ReconcilePlan:
        """The plan of ``event_id`` with each item's state now (:class:`UnknownReconciliation`)."""
        if not isinstance(event_id, str) or not event_id:
            raise UnknownReconciliation(str(event_id))
        ledger = self.ctx.ledger(False)
        text = ledger.plan(event_id) if ledger is not None else None
        if text is None:
            raise UnknownReconciliation(event_id)
        return self._with_states(ReconcilePlan.model_validate_json(text))

    def _with_states(self, plan: ReconcilePlan, rows: dict[str, Any] | None = None) -> ReconcilePlan:
        """``plan`` with each item's state from its ledger row (``rows``: the rows already read, by
        key; else each item's is read)."""
        get = rows.get if rows is not None else self.ctx.ledger(True).get
        states = {}
        for item in plan.items:
            rec = get(item.key) if item.actionable else None
            outcome = (rec.error if rec.status in ("failed", "compensation_failed") else rec.result_json) if rec else None
            states[item.key] = (state_of(item.action, rec.status if rec else None), outcome)
        return plan.with_states(states)

    # -- running ----------------------------------------------------------------------------------
    def run(self, event_id: str, run: str = "plan", *, approve: Callable[[dict], Any] | None = None,
            retry: bool = False, agent: Any = None, loop: asyncio.AbstractEventLoop | None = None) -> ReconcileOutcome:
        """Reconcile the forget ``event_id``: ``run="plan"`` reads the plan and changes nothing;
        ``"compensate"`` runs its compensations; ``"all"`` its deferred calls too. ``approve``: asked
        with a human-in-the-loop request (``approval``) before anything runs; None: this call is
        the decision. ``retry``: failed items run again. ``loop``: an event loop (running in
        another thread) on which compensators and tools run awaited (``arun``). Typed errors before
        anything runs: ``UnknownReconciliation``, ``PlanAlreadyRun``, ``CompensatorUnavailable``,
        ``NeedsAsync``, ``InvalidDecision``; after: ``CompensationFailed`` when an item raised
        (the others ran)."""
        w = self._prepare(event_id, run, retry, agent, sync=loop is None, approve=approve)
        if w.items:
            self._approve(w, approve)
        session = w.plan.session_id
        for item in w.items:
            if item.key in w.declined:
                continue
            fn = w.callables[item.key]
            if loop is None:
                def call(fn=fn, item=item) -> Any:
                    return _call(fn, item, session)
            else:
                def call(fn=fn, item=item) -> Any:
                    return asyncio.run_coroutine_threadsafe(_acall(fn, item, session), loop).result()
            w.ran.append(self._run_one(w.plan, item, call, retry))
        return self._finish(w)

    async def arun(self, event_id: str, run: str = "plan", *, approve: Callable[[dict], Any] | None = None,
                   retry: bool = False, agent: Any = None) -> ReconcileOutcome:
        """``run`` from an event loop: compensators and tools that can only be awaited (MCP tools,
        ``async def``) run on this loop; the ledger's work (and ``approve``) in a worker thread."""
        loop = asyncio.get_running_loop()
        return await asyncio.to_thread(self.run, event_id, run, approve=approve, retry=retry, agent=agent,
                                       loop=loop)

    def _prepare(self, event_id: str, run: str, retry: bool, agent: Any, sync: bool,
                 approve: Any = None) -> _Work:
        from unsee.middleware.errors import InvalidArgument

        if run not in RUNS:
            raise InvalidArgument(f"run must be one of {', '.join(RUNS)}, not {run!r}")
        if approve is not None and not callable(approve):
            raise InvalidArgument("approve must be a callable given the approval request (e.g. interrupt_approval), "
                                  f"or None, not {type(approve).__name__}")
        plan = self.plan(event_id)
        w = _Work(plan, run)
        wanted = [i for i in plan.items if i.action in _ACTIONS[run]]
        if not wanted:
            return w
        w.items = [i for i in wanted if i.state in ("planned", "started") or (retry and i.state == "failed")]
        if not w.items:
            if self._behind(plan):  # (a reconcile died after its items, before its receipt and record,
                self.bookkeep(plan)  # or an operator settled one: they are brought up to date first)
            raise PlanAlreadyRun(event_id, failed=sum(i.state == "failed" for i in wanted))
        tools = self.ctx.tools(plan.session_id, agent)
        comps = compensators(tools)
        missing, async_only = [], []
        for item in w.items:
            fn = comps.get(item.tool) if item.action == "compensate" else tools.get(item.tool)
            if fn is None or (item.action == "compensate" and str(fn) != item.compensator):
                missing.append(item.runs)
                continue
            if sync and _async_only(fn):
                async_only.append(item.runs)
            w.callables[item.key] = fn
        if missing:
            raise CompensatorUnavailable(event_id, sorted(set(missing)))
        if async_only:
            raise NeedsAsync(sorted(set(async_only)))
        return w

    def _approve(self, w: _Work, approve: Callable[[dict], Any] | None) -> None:
        if approve is None:
            return
        approved = decisions(approve(approval_request(w.plan.event_id, w.items)), w.items)  # InvalidDecision
        w.declined = [k for k, yes in approved.items() if not yes]

    def _run_one(self, plan: ReconcilePlan, item: ReconcileItem, call: Callable[[], Any], retry: bool) -> Ran:
        ledger = self.ctx.ledger(True)
        if retry and item.state == "failed":
            ledger.resolve(item.key, status="released")  # (a retry is a decision: one new attempt)
        kind = "compensation" if item.action == "compensate" else "call"
        args = {"args": item.args, "of": item.call_artifact_id or item.tool}
        mask = self._mask(plan)
        t0 = time.time_ns()
        error = None
        try:
            out = ledger.run_once(item.key, plan.session_id, item.runs, args, lambda: mask(call()), kind=kind,
                                  idempotent=item.idempotent,
                                  describe_error=lambda e: f"{type(e).__name__}: {mask(str(e))}")
            disposition = out.disposition
        except Exception as e:  # recorded failed by the ledger
            disposition, error = "failed", type(e).__name__
            log.warning("reconcile %s: %s %s raised", plan.event_id, item.action, item.runs, exc_info=True)
        rec = ledger.get(item.key)
        faults.point("reconcile:recorded")
        return Ran(item, t0, time.time_ns(), disposition, state_of(item.action, rec.status if rec else None), error)

    def _mask(self, plan: ReconcilePlan) -> Callable[[Any], Any]:
        """What is kept of a returned value (and an error's message): the target masked (``masking``)."""
        keyed_hash = self.ctx.keyed_hash
        if keyed_hash is None or plan.target_length <= 0:
            return lambda value: value
        return lambda value: mask_value(value, plan.target_hash, plan.target_length, keyed_hash)

    def _behind(self, plan: ReconcilePlan) -> bool:
        return any(plan.recorded.get(i.key) != i.state for i in plan.items)

    def bookkeep(self, plan: ReconcilePlan, ran: list[Ran] | None = None) -> tuple[str | None, list[str]]:
        """Bring the forget's receipt and view record up to the plan's states (and send the spans
        of what ran); then note in the plan what they say. Observers: (receipt path, errors)."""
        errors: list[str] = []
        receipt = self._observe("receipt", errors, self.ctx.amend_receipt, plan.event_id, plan.items)
        self._observe("view record", errors, self.ctx.keep_record, plan.event_id, plan.items)
        if ran:
            self._observe("trace", errors, self._trace, plan, ran)
        if not errors:
            self._observe("plan", errors, self._note_recorded, plan)
        return receipt, errors

    def _note_recorded(self, plan: ReconcilePlan) -> None:
        ledger = self.ctx.ledger(True)
        text = ledger.plan(plan.event_id)
        if text is None:
            return
        kept = ReconcilePlan.model_validate_json(text)
        ledger.replace_plan(plan.event_id, kept.model_copy(
            update={"recorded": {i.key: i.state for i in plan.items}}).model_dump_json())

    def _finish(self, w: _Work) -> ReconcileOutcome:
        plan = self._with_states(w.plan)
        errors: list[str] = []
        receipt = None
        if w.ran:
            receipt, errors = self.bookkeep(plan, w.ran)
        outcome = ReconcileOutcome(
            event_id=plan.event_id, run=w.run, plan=plan,
            ran=[r.item.key for r in w.ran if r.disposition == "fired"],
            already=[r.item.key for r in w.ran if r.disposition == "replayed"],
            in_doubt=[r.item.key for r in w.ran if r.disposition == "in_doubt"],
            failed=[r.item.key for r in w.ran if r.disposition == "failed"],
            declined=list(w.declined), receipt=receipt, errors=errors)
        if outcome.failed:
            raise CompensationFailed(plan.event_id, outcome.failed, outcome)
        return outcome

    def _observe(self, what: str, errors: list[str], fn: Callable[..., Any] | None, *args: Any) -> Any:
        if fn is None:
            return None
        try:
            return fn(*args)
        except Exception as e:
            log.warning("reconcile: could not update the %s", what, exc_info=True)
            errors.append(f"{what}: {type(e).__name__}: {e}")
            return None

    def _trace(self, plan: ReconcilePlan, ran: list[Ran]) -> None:
        tracer = self.ctx.tracer()
        if tracer is None:
            return
        from unsee.middleware.trace_after import emit

        emit(tracer, reconcile_spans(plan, ran))


def _async_only(fn: Any) -> bool:
    is_async_only = getattr(fn, "is_async_only", None)
    if isinstance(is_async_only, bool):
        return is_async_only
    return getattr(fn, "func", True) is None and getattr(fn, "coroutine", None) is not None


def _call(fn: Any, item: ReconcileItem, session: str) -> Any:
    """Run the compensator (original arguments and result) or the deferred tool (its arguments, in
    a run of the session: a tool that reads its thread id reads the session's)."""
    with ledger_bypassed():
        if item.action == "compensate":
            return fn.call(dict(item.args), item.result)
        return fn.invoke(dict(item.args), config=_session_config(session))


async def _acall(fn: Any, item: ReconcileItem, session: str) -> Any:
    with ledger_bypassed():
        if item.action == "compensate":
            return await fn.acall(dict(item.args), item.result)
        return await fn.ainvoke(dict(item.args), config=_session_config(session))


def _session_config(session: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": session}}


def tools_for(agent: Any, *extra: Any) -> dict[str, Any]:
    """The tools of ``agent`` (its graph's tool nodes, at any depth) then ``extra`` sources, by name."""
    return tool_map(agent_tools(agent) if agent is not None else None, *extra)

