"""The one path of a revocation event, from the event to its receipt.

``RevocationPipeline.run`` is what ``Unsee.forget``, the detection service's
automatic revocations (``u.detect()``) and ``unsee serve`` all call. It reads
as its list of steps, each a function of the ``Revocation`` the steps before
it filled in, each step's work in a module named for its job:

1. ``request``: every argument checked and parsed, once (``ForgetRequest``);
2. ``forget``: the session's forget (``forgetter``: applied -> recover ->
   locate, then where the target spread through shared memory, read before
   anything changes (``spread``), then plan -> check -> replay -> commit ->
   report, or an editing baseline), holding the session's lease from here to
   the record;
3. ``spread``: with ``scope="all"``, each session it spread to forgotten in
   turn, in dependency order, under its own lease, its entry read as its
   event's source;
4. ``erase``: once every session is committed, each one's record erased once
   through the erasure plugin's face, with a signed receipt (``erase``);
5. ``record``: each forget's ids-only record for the view (the ``ForgetRecords`` port).

The forget's own trace (``trace``) is sent after the last step, or when a step
raised. Everything the pipeline touches is a port of ``ports.RevocationContext``;
it never sees the facade.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from dataclasses import dataclass, field
from typing import Any

from .erase import erase_record, needs_erasure
from .event import RevocationEvent
from .forgetter import Forgetter, SessionForget
from .held import HeldSessions
from .locate import Located
from .ports import RevocationContext
from .report import ForgetPlan, ForgetReport, StepError
from .request import SCOPES, ForgetRequest, validate_forget_args  # noqa: F401 (the request's words, re-exported)
from .spread import Spread, spread_from
from .trace import ForgetTiming, emit, failed_spans, forget_spans, phase, timing

log = logging.getLogger("unsee.forget")


@dataclass
class Forgotten:
    """One session a revocation forgot: its event (the spread ones name their entry), its report,
    and the target as located in it before the forget (for its view record and its trace)."""

    session: str
    event: RevocationEvent
    report: ForgetReport
    located: Located | None


@dataclass
class Revocation:
    """A revocation event's forget as the pipeline's steps fill it in."""

    request: ForgetRequest
    #: the session leases held from the forget's first step to its record
    held: HeldSessions
    #: the forget of the request's session
    origin: SessionForget | None = None
    #: the sessions the target spread to (whether or not they are forgotten)
    reached: list[Spread] = field(default_factory=list)
    #: every session forgotten, the request's first
    done: list[Forgotten] = field(default_factory=list)
    #: ``scope="all"`` went on to the sessions the target spread to
    spread_on: bool = False
    #: what ``scope="all"`` could not forget, and why ("session (via key: why)")
    left: list[str] = field(default_factory=list)
    #: the request's session's erasure (``ErasureResult``), for the trace
    erasure: Any = None

    @property
    def report(self) -> ForgetReport:
        return self.done[0].report

    @property
    def located(self) -> Located | None:
        return self.origin.located if self.origin is not None else None


class RevocationPipeline:
    """request -> forget -> spread -> erase -> record (the module docstring)."""

    def __init__(self, ctx: RevocationContext):
        self.ctx = ctx
        self.forgetter = Forgetter(ctx.forget)
        #: each traced forget's root span context, by event id (its reconciliation's spans join it)
        self._roots: dict[str, Any] = {}

    def run(self, session: str, event: RevocationEvent, strategy: str = "B7", *, agent: Any = None,
            dry_run: bool = False, commit: bool = True, wait: bool = True, side_effects: str = "defer",
            erase: bool = True, scope: str = "session") -> ForgetReport | ForgetPlan:
        """Forget ``event.target`` in ``session`` and erase it from the record (see the module
        docstring). Every argument is checked before anything is read or written."""
        request = ForgetRequest.of(session, event, strategy, agent=agent, dry_run=dry_run, commit=commit,
                                   wait=wait, side_effects=side_effects, erase=erase, scope=scope)
        if request.dry_run:
            with self.ctx.forget.runs.exclusive(request.session, wait=request.wait):
                return self.forgetter.run(request).result
        try:
            with timing() as t, contextlib.ExitStack() as leases:
                r = Revocation(request, HeldSessions(self.ctx.forget.runs, leases))
                for step in STEPS:
                    getattr(self, step)(r)
        except Exception as exc:
            self._trace_failure(request, t, exc)
            raise
        report = self._trace(r, t)
        return self._after(r, report)

    # -- the steps -------------------------------------------------------------------------------

    def forget(self, r: Revocation) -> None:
        """The request's session, its lease held until the pipeline ends."""
        req = r.request
        r.held.hold(req.session, wait=req.wait)
        r.origin = self.forgetter.start(req, erasure=self._erasure_check(req.erase))
        if r.origin.located is not None:  # where it spread is read before anything changes
            r.reached = spread_from(self.ctx.forget.sessions, req.session, req.event.target,
                                    r.origin.located.closure, r.origin.located.graph)
        self.forgetter.finish(r.origin)
        r.done.append(Forgotten(req.session, req.event, r.origin.result, r.origin.located))

    def spread(self, r: Revocation) -> None:
        """With ``scope="all"``, the forgets of the sessions the target reached (read by ``forget``
        before its commit; each traced as its own forget, as an event raised for it would be). One
        failing never stops the others."""
        req = r.request
        if not r.reached or req.scope == "session" or not r.report.committed:
            return
        r.spread_on = True
        for s in r.reached:
            if s.entry is None:
                r.left.append(f"{s.session_id} (via {s.via_key}: read the key, but no read held the target itself)")
                continue
            event = type(req.event)(target=req.event.target, source=s.entry,
                                    reason=f"spread from {req.session} via {s.via_key}", raised_by=req.event.raised_by)
            sub = req.spread_to(s.session_id, event)
            try:
                with timing() as t:
                    r.held.hold(sub.session, wait=sub.wait)
                    forgotten = self.forgetter.run(sub)
            except Exception as exc:  # one session failing never hides the others, nor skips the erasure
                r.left.append(f"{s.session_id} (via {s.via_key}: its forget failed: {type(exc).__name__}: {exc})")
                self._trace_failure(sub, t, exc)
                continue
            r.done.append(Forgotten(sub.session, event, self._trace_of(forgotten.result, t, event, forgotten.located),
                                    forgotten.located))

    def erase(self, r: Revocation) -> None:
        """Each committed session's record, once, after every session is committed (the byte-level
        audit spans the files sessions share)."""
        todo = [f for f in r.done if needs_erasure(f.report, r.request.erase)]
        # (nothing to erase, e.g. a commit that did not finish: the erasure's ports are not even built)
        erasure = self.ctx.erasure() if todo else None
        if erasure is None:  # (or a pipeline built without the erasure plugin's ports: the record stays)
            return
        # (the sessions this revocation holds are the erasure's already, when both take their leases
        # from the same runs: it takes no second one)
        if dataclasses.is_dataclass(erasure) and getattr(erasure, "runs", None) is self.ctx.forget.runs:
            erasure = dataclasses.replace(erasure, runs=r.held.runs_view(erasure.runs))
        for f in todo:
            with phase("erase"):
                f.report, result = erase_record(erasure, self.ctx.flush, f.report, f.session, f.event,
                                                lambda s=f.session: self.forgetter.agent_for(s, r.request.agent))
            if f is r.done[0]:
                r.erasure = result

    def record(self, r: Revocation) -> None:
        """What ``unsee view --event`` shows of each session's forget; then the first report names
        the others. An observer: a failure to write a record is logged and put on that session's
        report, never raised into the forget."""
        for f in r.done:
            f.report = self._keep(f)
        if r.spread_on:
            update = {"also_forgotten": [f.report for f in r.done[1:]], "other_sessions": r.left}
        else:
            update = {"other_sessions": [f"{s.session_id} (via {s.via_key})" for s in r.reached]}
        if any(update.values()):
            r.done[0].report = r.report.model_copy(update=update)

    def _keep(self, f: Forgotten) -> ForgetReport:
        keeper, report, located = self.ctx.records, f.report, f.located
        if keeper is None or located is None or report.outcome is None:
            return report  # (only a replay has transitions to show; an edit's report says what it did)
        try:
            keeper.keep(report, located.graph, located.entry, located.closure, f.event.raised_by)
        except Exception as e:
            log.warning("could not keep the record of forget %s for unsee view", report.event_id, exc_info=True)
            return _with_error(report, StepError.of("view record", e))
        return report

    # -- helpers ---------------------------------------------------------------------------------

    def _erasure_check(self, erase: bool) -> Any:
        """The erasure's own check of a thread, for the forget to ask before it changes anything
        (None: this forget does not erase, or the pipeline has no erasure)."""
        if not erase or self.ctx.erasure() is None:
            return None
        from unsee.plugins.erasure import erasure_blockers

        return erasure_blockers

    def _trace(self, r: Revocation, t: ForgetTiming) -> ForgetReport:
        t.erasure = r.erasure
        return self._trace_of(r.report, t, r.request.event, r.located)

    def _after(self, r: Revocation, report: ForgetReport) -> ForgetReport:
        """What follows each committed forget (``ports.AfterForget``: the world's reconciliation),
        once its trace is sent, for the request's session and each one it spread to. An
        observer: a failure is logged and put on that session's report."""
        after = self.ctx.after()
        if after is None:
            for rep in (report, *report.also_forgotten):
                self._roots.pop(rep.event_id, None)
            return report

        def one(rep: ForgetReport, session: str) -> ForgetReport:
            if not rep.committed or any(e.step == "commit" for e in rep.errors):
                return rep  # (a commit that did not finish: this event again finishes it, then this)
            try:
                return after.after_forget(rep, self.forgetter.agent_for(session, r.request.agent),
                                          self._roots.pop(rep.event_id, None), r.request.event)
            except Exception as e:
                log.warning("could not reconcile after forget %s", rep.event_id, exc_info=True)
                return _with_error(rep, StepError.of("reconcile", e))

        others = [one(f, f.session_id) for f in report.also_forgotten]
        report = one(report, report.session_id)
        return report.model_copy(update={"also_forgotten": others}) if others else report

    def _trace_of(self, report: ForgetReport, t: ForgetTiming, event: RevocationEvent,
                  located: Located | None) -> ForgetReport:
        """The forget's own trace (``trace.py``), sent once it is over, with its phases' times on
        the report. An observer: a failure to send it is logged and put on the report, never
        raised into the forget."""
        report = report.model_copy(update={"timings": t.seconds()})
        tracer = self.ctx.tracer()
        if tracer is None:
            return report
        try:
            if located is not None and report.outcome is not None:
                t.supersede(located.graph, report.outcome.superseded())
            self._roots[report.event_id] = emit(tracer, forget_spans(report, t, raised_by=event.raised_by))[0]
        except Exception as e:
            log.warning("could not emit the trace of forget %s", report.event_id, exc_info=True)
            return _with_error(report, StepError.of("trace", e))
        return report

    def _trace_failure(self, request: ForgetRequest, t: ForgetTiming, exc: Exception) -> None:
        """The trace of a forget that raised: its root marked with the error and the phases it
        got through (an observer too)."""
        tracer = self.ctx.tracer()
        if tracer is None:
            return
        event = request.event
        try:
            emit(tracer, failed_spans(request.session, event.event_id, self.ctx.forget.hasher.hash(event.target), t,
                                      exc, raised_by=event.raised_by, strategy=request.spec.code))
        except Exception:
            log.warning("could not emit the trace of failed forget %s", event.event_id, exc_info=True)


#: the steps after the request, in order: ``RevocationPipeline`` methods, by name (a subclass or a
#: profiler that replaces one is the one run)
STEPS: tuple[str, ...] = ("forget", "spread", "erase", "record")


def _with_error(report: ForgetReport, error: StepError) -> ForgetReport:
    return report.model_copy(update={"errors": [*report.errors, error]})
