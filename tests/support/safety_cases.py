"""One recorded session of an agent shape with its independent counterfactual (``Case``), and a
forget with a fault at a step followed by retries until it reports (``fault_then_retry``): the
safety contract's checks, shared by the shape and nested-run suites."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from tests.support.agent_shapes import SECRET, TURNS, World, build, file_copies, normalized, reference, run, sqlite_saver
from unsee import RevocationEvent, Unsee
from unsee.middleware.errors import InjectedCrash, UnseeError
from unsee.middleware.faults import InjectedFailure, crash_at, fail_at
from unsee.plugins.forget import ForgetRefused


class Case:
    """One recorded session of a shape (thread "s"), its world, and its independent B5."""

    def __init__(self, tmp: Path, shape: str, saver: str, turns=TURNS, pg_url: str | None = None):
        self.tmp, self.shape, self.turns = tmp, shape, tuple(turns)
        self._conns: list = []  # the savers' connections (``close``)
        self.u = Unsee(home=tmp / "home")
        self.world = World()
        self.saver = self._saver(saver, "live", pg_url)
        self.app = build(shape, self.world, middleware=lambda: [self.u.middleware()], checkpointer=self.saver)
        run(self.app, "s", self.turns)
        self.before = normalized(self.app, "s")
        self.records = [a.id for a in self.u.graph("s")]
        self.ref, self.ref_world = reference(shape, self.turns, self._saver(saver, "ref", pg_url))
        self.fired = list(self.world.fired)

    def _saver(self, kind: str, name: str, pg_url: str | None):
        if kind == "memory":
            return InMemorySaver()
        if kind == "sqlite":
            saver = sqlite_saver(self.tmp / f"{name}.sqlite")
            self._conns.append(saver.conn)
            return saver
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg.rows import dict_row

        conn = psycopg.connect(pg_url, autocommit=True, prepare_threshold=0, row_factory=dict_row)
        self._conns.append(conn)
        saver = PostgresSaver(conn)
        saver.setup()
        return saver

    def close(self) -> None:
        """Its ``Unsee`` and the savers' connections."""
        self.u.close()
        for conn in self._conns:
            conn.close()

    def forget(self, **kw):
        return self.u.forget("s", RevocationEvent(target=SECRET, event_id="ev-1", **kw.pop("event", {})), **kw)

    def now(self) -> dict:
        return normalized(self.app, "s")

    def side_effects_once(self) -> None:
        """Every real side effect of the original run fired once in total (replays fired none)."""
        assert self.world.fired == self.fired

    def unchanged(self) -> None:
        """The old state, and the old records."""
        assert self.now() == self.before
        assert [a.id for a in self.u.graph("s")] == self.records
        self.side_effects_once()

    def counterfactual(self, report) -> None:
        """Exactly B5's state in every key, the secret nowhere in it, and with a clean erasure
        nowhere in the files either."""
        assert self.now() == self.ref
        assert SECRET not in json.dumps(self.now())
        self.side_effects_once()
        if report.erased_clean:
            assert file_copies([self.tmp / "home", *self.tmp.glob("live.sqlite*")], SECRET) == {}


def fault_then_retry(case: Case, step: str, crash: bool, retry_agent: bool) -> None:
    """A forget with a fault at ``step``, checked; then retries until it reports, checked."""
    inject = crash_at if crash else fail_at
    with inject(step):
        try:
            report = case.forget()
        except InjectedCrash:
            report = None  # the process died there: whatever it left must be old or rolled forward
        except (UnseeError, InjectedFailure) as e:  # a failure before the commit: the old state
            assert not isinstance(e, InjectedCrash)
            report = None
            if not crash:
                case.unchanged()
    now = case.now()
    assert now in (case.before, case.ref), "neither the old state nor the counterfactual"
    case.side_effects_once()
    if report is not None:  # it returned: it committed (and says what did not finish)
        assert report.committed
        case.counterfactual(report)
        if step.startswith("erase") and not report.erased_clean:
            assert report.errors and report.erased_clean is False
    # A graph that cannot read the thread never finishes or starts it.
    stranger = build(case.shape, World(), middleware=lambda: [case.u.middleware()], checkpointer=InMemorySaver())
    with pytest.raises(ForgetRefused):
        case.forget(agent=stranger)
    assert case.now() == now
    again = case.forget(agent=case.app) if retry_agent else case.forget()
    assert again.committed and again.errors == []
    if again.erased_clean is not True:  # (an erasure left unfinished by the fault: this event again finishes it)
        again = case.forget()
    assert again.erased_clean is True
    case.counterfactual(again)
