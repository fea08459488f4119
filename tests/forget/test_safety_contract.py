"""The forget's safety contract, as properties over agent shapes, checkpointers and failures.

Whatever the agent's shape (``agent_shapes.SHAPES``), its checkpointer (InMemory,
SQLite, PostgreSQL) and wherever a forget or its erasure fails (every fault
point, as a crash of the process or as a service failure), and whoever retries
it (with ``agent=`` or without, or with a graph that cannot read the thread):

- the live state is exactly the old one or exactly the counterfactual, B5
  computed independently (the same shape run from scratch in a world that never
  held the secret), in every state key;
- a call that committed returned a report (never an exception), and a report
  that says the record is erased clean means no file holds the secret;
- a real side effect fired once in total, across the original run and every
  replay;
- shapes a replay cannot rebuild yet are refused before anything changes.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.agent_shapes import REPLAYABLE, SHAPES
from tests.support.safety_cases import fault_then_retry
from unsee.middleware.errors import InjectedCrash, UnseeError
from unsee.plugins.forget import AgentCannotReplay, UnsupportedSession

#: every point a forget and its erasure pass, in order (``middleware.faults.STEPS``; a trailing
#: ":" arms every point that starts so)
STEPS = ("plan", "check", "fork", "replay:turn:", "replay:done", "commit:checked", "commit:begin",
         "commit:state", "commit:store", "commit:records", "erase:langgraph.checkpoints", "erase:",
         "erase:history:staged", "erase:history:swapping")
SAVERS = ("memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres))


@pytest.fixture
def pg(request):
    """A fresh PostgreSQL database for the postgres saver cases (None for the others)."""
    if "postgres" not in request.node.callspec.params.values():
        return None
    return request.getfixturevalue("pg_url")


# -- shapes a replay can rebuild: B7 == B5, whatever fails where -------------------------------
@pytest.mark.parametrize("saver", SAVERS)
@pytest.mark.parametrize("shape", REPLAYABLE)
def test_a_forget_reaches_the_independent_counterfactual(tmp_path, shape, saver, pg, cases):
    case = cases(tmp_path, shape, saver, pg_url=pg)
    report = case.forget()
    assert report.committed and report.errors == []
    assert report.erased_clean is True
    case.counterfactual(report)


@pytest.mark.parametrize("crash", [True, False], ids=["crash", "failure"])
@pytest.mark.parametrize("step", STEPS)
@pytest.mark.parametrize("saver", SAVERS)
def test_a_fault_anywhere_leaves_the_old_state_or_the_counterfactual(tmp_path, saver, step, crash, pg, cases):
    fault_then_retry(cases(tmp_path, "agent", saver, pg_url=pg), step, crash, retry_agent=step < "e")


ACTIONS = st.sampled_from(["hello", "look at T2", "look at T3", "refund A7", "look at T2 and T3", "bye"])


@st.composite
def sessions(draw):
    turns = draw(st.lists(ACTIONS, min_size=1, max_size=5))
    turns.insert(draw(st.integers(0, len(turns))), "look at T1")  # the secret enters through a tool result
    if draw(st.booleans()):
        turns.append("look at T1 again")  # read again later: removed there too
    return turns, draw(st.sampled_from(STEPS)), draw(st.booleans()), draw(st.sampled_from(["memory", "sqlite"]))


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=sessions())
def test_property_on_random_sessions_and_faults(tmp_path_factory, case, cases):
    turns, step, crash, saver = case
    c = cases(tmp_path_factory.mktemp("prop"), "agent", saver, turns=turns)
    fault_then_retry(c, step, crash, retry_agent=crash)


# -- shapes a replay cannot rebuild yet: refused before anything changes ----------------------
# (the supervisor: langgraph-supervisor builds its supervisor agent without middleware, so its own
# turns are never recorded; nested runs are replayed: tests/forget/test_nested_runs.py)
@pytest.mark.parametrize("saver", ["memory", "sqlite"])
@pytest.mark.parametrize("shape", [s for s in SHAPES if s not in REPLAYABLE])
def test_shapes_not_replayable_yet_are_refused_before_anything_changes(tmp_path, shape, saver, cases):
    case = cases(tmp_path, shape, saver)
    checkpoint_bytes = {p: p.read_bytes() for p in tmp_path.glob("live.sqlite*")}
    for kw in ({}, {"agent": case.app}, {"event": {"source": "tool:lookup"}},
               {"agent": case.app, "event": {"source": "tool:lookup"}}):
        with pytest.raises(UnseeError) as e:
            case.forget(**kw)
        assert not isinstance(e.value, InjectedCrash)
        case.unchanged()
    with pytest.raises((UnsupportedSession, AgentCannotReplay)):
        case.forget(agent=case.app, event={"source": "tool:lookup"})
    assert {p: p.read_bytes() for p in tmp_path.glob("live.sqlite*")} == checkpoint_bytes
    assert not any("~cf-" in s.session_id for s in case.u.sessions())  # no scratch session left behind
