"""The forget's safety contract (docs/forget.md, tests/forget/test_safety_contract.py) on the
compatibility suite's shapes: human approvals, async runs, structured output, a hand-written
``StateGraph``, ``create_react_agent``, a deepagents harness, a supervisor, and middleware that
rewrites the state (summarization, a todo list).

Each case is recorded as ``unsee.testing.check_agent`` records it (same world, same sync or async
machinery), its counterfactual B5 computed independently (the same factory, from scratch, in a
world without the secret and without unsee); then a forget meets a fault at one step, as a crash
of the process or as a service failure:

- the live state is exactly the old one or exactly B5;
- a call that returned a report committed (and the state is B5); a failure that raised left the
  old state;
- no real side effect fired again;
- a retry without the fault reports, reaches B5 and erases clean: no file under unsee's home or
  the live checkpointer holds the secret.
"""

from __future__ import annotations

import json

import pytest

from tests.support.compat_cases import ecosystem_cases, middleware_cases
from unsee import RevocationEvent, Unsee
from unsee.middleware.errors import InjectedCrash, UnseeError
from unsee.middleware.faults import InjectedFailure, crash_at, fail_at
from unsee.testing import (REFERENCE_THREAD, THREAD, AgentCase, AgentWorld, _fresh, _Ops, _plain, _Saver,
                           file_copies, normalized_state)

_ECO, _MW = ecosystem_cases(), middleware_cases()
CASES: dict[str, AgentCase] = {
    **{n: _ECO[n] for n in ("hitl-approve", "hitl-reject", "ainvoke", "async-only-tools", "structured-output",
                            "state-graph", "react-agent", "deepagents-harness", "supervisor")},
    **{n: _MW[n] for n in ("SummarizationMiddleware", "TodoListMiddleware")},
}
#: the fault points (``middleware.faults``; a trailing ":" arms every point that starts so) where
#: the shape decides what happens: its replay, and the commit writing its state keys and records
SHAPE_STEPS = ("replay:turn:", "commit:state", "commit:records")
#: those where it does not (before anything changes, after the checks, in the erasure): met by the
#: shapes whose machinery differs there (an interrupt's thread, an async saver, nested checkpoints)
SHARED_STEPS, SHARED_CASES = ("check", "commit:checked", "erase:"), ("hitl-approve", "async-only-tools",
                                                                    "deepagents-harness")
#: each as a crash and as a service failure, but for a failure at "commit:records" (the same answer as
#: at "commit:state": a committed report saying the commit was interrupted), left out for time
FAULTS = [pytest.param(name, step, crash, id=f"{name}-{step}-{'crash' if crash else 'failure'}")
          for name in CASES for step in (*SHAPE_STEPS, *(SHARED_STEPS if name in SHARED_CASES else ()))
          for crash in (True, False) if crash or step != "commit:records"]

_B5: dict[str, tuple[dict, list]] = {}


def _state(case: AgentCase, ops: _Ops, app, thread: str) -> dict:
    return normalized_state(ops.values(app, thread), case.ignore_keys, case.ignore_fields)


def _reference(case: AgentCase, tmp_path_factory) -> tuple[dict, list]:
    """B5, as check_agent computes it: the same factory from scratch, no secret, no unsee (once per
    case: it does not depend on the fault)."""
    if case.name not in _B5:
        folder = tmp_path_factory.mktemp(f"b5-{case.name}")
        ops = _Ops(case.run, case.stream_mode)
        savers = _Saver("sqlite", folder, ops)
        try:
            world = AgentWorld("", savers.make("reference"), None, folder=_fresh(folder / "reference-world"))
            app = case.build(world)
            for turn in case.turns:
                ops.turn(app, REFERENCE_THREAD, turn)
            _B5[case.name] = (_state(case, ops, app, REFERENCE_THREAD), world.effects())
        finally:
            savers.close()
            ops.close()
    return _B5[case.name]


@pytest.mark.parametrize(("name", "step", "crash"), FAULTS)
def test_a_fault_leaves_the_old_state_or_the_counterfactual_and_a_retry_finishes(tmp_path, tmp_path_factory,
                                                                                  name, step, crash):
    case = CASES[name]
    b5, _ = _reference(case, tmp_path_factory)
    ops = _Ops(case.run, case.stream_mode)
    savers = _Saver("sqlite", tmp_path, ops)
    u = Unsee(home=tmp_path / "home")
    try:
        # record, as check_agent does
        world = AgentWorld(case.secret, savers.make("live"), u, folder=_fresh(tmp_path / "world"))
        app = case.build(world)
        for turn in case.turns:
            ops.turn(app, THREAD, turn)
        assert case.secret in json.dumps(_plain(ops.values(app, THREAD)), default=str)
        before, fired = _state(case, ops, app, THREAD), world.effects()
        records = [a.id for a in u.graph(THREAD)]
        assert before != b5
        event = RevocationEvent(target=case.secret, event_id=f"fault-{name}"[:60])

        # the forget, with a fault at ``step``
        report = None
        with (crash_at if crash else fail_at)(step):
            try:
                report = ops.forget(u, event, app, **case.forget_kwargs)
            except InjectedCrash:
                assert crash, "a service failure surfaced as a crash"
            except (UnseeError, InjectedFailure) as e:
                assert not crash, f"a crash surfaced as {type(e).__name__}: {e}"
                # it raised: it did not commit, so nothing changed
                assert _state(case, ops, app, THREAD) == before, f"raised {type(e).__name__} after a change"
                assert [a.id for a in u.graph(THREAD)] == records
        now = _state(case, ops, app, THREAD)
        assert now in (before, b5), f"at {step}: neither the old state nor the counterfactual"
        assert world.effects() == fired, "a side effect fired again"
        if report is not None:  # it returned: it committed
            assert report.committed, f"returned uncommitted: errors={report.errors}"
            assert report.errors, f"the fault at {step} was never reached"
            assert now == b5

        # a retry, without the fault, finishes
        again = ops.forget(u, event, app, **case.forget_kwargs)
        assert again.committed and again.errors == [], again.errors
        if again.erased_clean is not True:  # an erasure the fault left unfinished: the same event finishes it
            again = ops.forget(u, event, app, **case.forget_kwargs)
        assert again.erased_clean is True
        assert _state(case, ops, app, THREAD) == b5
        assert world.effects() == fired, "a side effect fired again on the retry"
        u.flush()
        assert file_copies([tmp_path / "home", *sorted(tmp_path.glob("live.sqlite*"))], case.secret) == {}
    finally:
        u.close()
        savers.close()
        ops.close()
