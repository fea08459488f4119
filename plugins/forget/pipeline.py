"""The one path of a revocation event, from the event to its receipt.

``RevocationPipeline.run`` is what ``Unsee.forget``, the detection service's
automatic revocations (``u.detect()``) and ``unsee serve`` all call. Each step
is its own module; the pipeline only orders them and never returns to a step
it has left:

1. validate every argument (``operator.validate_forget_args``);
2. locate tau and I(z) in the session as recorded now (``locate``);
3. spread: the other sessions the target reached through shared memory, in
   dependency order (``spread``);
4. plan, restore, replay, commit (``operator.Forgetter``: ``plan`` ->
   ``replay`` -> ``commit``; or an editing baseline, ``baselines``);
5. with ``scope="all"``, the same for every session it spread to, each with
   the read it entered through as its source;
6. erase the record through the erasure plugin's face, then a signed receipt
   (``erase_after``); when several sessions were forgotten, their erasures run
   again once all are done, since the byte-level audit spans shared files;
7. keep the forget's ids-only record for the view (the ``ForgetRecords`` port).

Everything it touches is a port of ``ports.RevocationContext``; it never sees
the facade.
"""

from __future__ import annotations

import logging
from typing import Any

from unsee.middleware.errors import InvalidArgument

from .erase_after import erase_after, needs_erasure
from .event import RevocationEvent
from .locate import Located, locate
from .operator import Forgetter, validate_forget_args
from .ports import RevocationContext
from .report import ForgetPlan, ForgetReport, StepError
from .spread import Spread, spread_from
from .trace import emit, failed_spans, forget_spans, phase, timing

log = logging.getLogger("unsee.forget")

SCOPES = ("session", "all")


class RevocationPipeline:
    """locate -> spread -> plan -> restore -> replay -> commit -> erase -> receipt -> record."""

    def __init__(self, ctx: RevocationContext):
        self.ctx = ctx
        self.forgetter = Forgetter(ctx.forget)

    def run(self, session: str, event: RevocationEvent, strategy: str = "B7", *, agent: Any = None,
            dry_run: bool = False, commit: bool = True, wait: bool = True, side_effects: str = "defer",
            erase: bool = True, scope: str = "session") -> ForgetReport | ForgetPlan:
        """Forget ``event.target`` in ``session`` and erase it from the record (see the module
        docstring). Every argument is checked before anything is read or written."""
        if not isinstance(erase, bool):
            raise InvalidArgument(f"erase must be True or False, got {type(erase).__name__} {erase!r}")
        if scope not in SCOPES:
            raise InvalidArgument(f"scope must be 'session' or 'all', got {type(scope).__name__} {scope!r}")
        strategy = validate_forget_args(session, event, strategy, agent=agent, side_effects=side_effects,
                                        dry_run=dry_run, commit=commit, wait=wait).code  # a name travels as its code
        if dry_run:
            return self.forgetter.forget(session, event, strategy, agent=agent, dry_run=True, wait=wait,
                                         side_effects=side_effects)
        try:
            with timing() as t:
                report = self._run(session, event, strategy, agent, commit, wait, side_effects, erase, scope)
        except Exception as exc:
            self._trace_failure(session, event, strategy, t, exc)
            raise
        return self._trace(report, t, event)

    def _run(self, session: str, event: RevocationEvent, strategy: str, agent: Any, commit: bool, wait: bool,
             side_effects: str, erase: bool, scope: str) -> ForgetReport:
        with phase("locate"):
            located = locate(self.ctx.forget.sessions, session, event)
            reached = self._spread(session, event, located)
        report = self.forgetter.forget(session, event, strategy, agent=agent, commit_result=commit, wait=wait,
                                       side_effects=side_effects, erasure=self._erasure_check(erase))
        if not reached or scope == "session" or not report.committed:
            report = self._erase(report, session, event, agent, erase)
            report = self._keep_record(report, event, located)
            named = [f"{r.session_id} (via {r.via_key})" for r in reached]
            return report.model_copy(update={"other_sessions": named}) if named else report
        done, left = [(session, event, report)], []
        for r in reached:
            if r.entry is None:
                left.append(f"{r.session_id} (via {r.via_key}: read the key, but no read held the target itself)")
                continue
            ev = type(event)(target=event.target, source=r.entry, reason=f"spread from {session} via {r.via_key}",
                             raised_by=event.raised_by)
            try:
                done.append((r.session_id, ev, self.run(r.session_id, ev, strategy, agent=agent, commit=commit,
                                                        wait=wait, side_effects=side_effects, erase=False)))
            except Exception as exc:  # one session failing never hides the others, nor skips the erasure
                left.append(f"{r.session_id} (via {r.via_key}: its forget failed: {type(exc).__name__}: {exc})")
        # The byte-level audit spans sessions (shared files): an erasure is clean only once every
        # affected session is erased, so the receipts are made again after the last one.
        for _ in range(2 if erase and len(done) > 1 else 1):
            done = [(s, ev, self._erase(rep, s, ev, agent, erase)) for s, ev, rep in done]
        first = self._keep_record(done[0][2], event, located)
        return first.model_copy(update={"also_forgotten": [rep for _, _, rep in done[1:]], "other_sessions": left})

    def _spread(self, session: str, event: RevocationEvent, located: Located | None) -> list[Spread]:
        if located is None:
            return []
        return spread_from(self.ctx.forget.sessions, session, event.target, located.closure, located.graph)

    def _erasure_check(self, erase: bool) -> Any:
        """The erasure's own check of a thread, for the forget to ask before it changes anything
        (None: this forget does not erase, or the pipeline has no erasure)."""
        if not erase or self.ctx.erasure() is None:
            return None
        from unsee.plugins.erasure import erasure_blockers

        return erasure_blockers

    def _erase(self, report: ForgetReport, session: str, event: RevocationEvent, agent: Any,
               erase: bool) -> ForgetReport:
        if not needs_erasure(report, erase):
            return report
        erasure = self.ctx.erasure()
        if erasure is None:  # (a pipeline built without the erasure plugin's ports: the record stays)
            return report
        with phase("erase"):
            return erase_after(erasure, self.ctx.flush, report, session, event,
                               lambda: self.forgetter.agent_for(session, agent), erase)

    def _trace(self, report: ForgetReport, t: Any, event: RevocationEvent) -> ForgetReport:
        """The forget's own trace (``trace.py``), sent once it is over. An observer: a failure to
        send it is logged and put on the report, never raised into the forget."""
        tracer = self.ctx.tracer()
        if tracer is None:
            return report
        try:
            emit(tracer, forget_spans(report, t, raised_by=event.raised_by))
        except Exception as e:
            log.warning("could not emit the trace of forget %s", report.event_id, exc_info=True)
            return _with_error(report, StepError.of("trace", e))
        return report

    def _trace_failure(self, session: str, event: RevocationEvent, strategy: str, t: Any,
                       exc: Exception) -> None:
        """The trace of a forget that raised: its root marked with the error and the phases it
        got through (an observer too)."""
        tracer = self.ctx.tracer()
        if tracer is None:
            return
        try:
            emit(tracer, failed_spans(session, event.event_id, self.ctx.forget.hasher.hash(event.target), t, exc,
                                      raised_by=event.raised_by, strategy=str(getattr(strategy, "value", strategy))))
        except Exception:
            log.warning("could not emit the trace of failed forget %s", event.event_id, exc_info=True)

    def _keep_record(self, report: ForgetReport, event: RevocationEvent, located: Located | None) -> ForgetReport:
        """What ``unsee view --event`` shows of this forget. An observer: a failure to write it
        is logged and put on the report, never raised into the forget."""
        keeper = self.ctx.records
        if keeper is None or located is None or report.outcome is None:
            return report  # (only a replay has transitions to show; an edit's report says what it did)
        try:
            keeper.keep(report, located.graph, located.entry, located.closure, event.raised_by)
        except Exception as e:
            log.warning("could not keep the record of forget %s for unsee view", report.event_id, exc_info=True)
            return _with_error(report, StepError.of("view record", e))
        return report


def _with_error(report: ForgetReport, error: StepError) -> ForgetReport:
    return report.model_copy(update={"errors": [*report.errors, error]})
