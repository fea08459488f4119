"""Property: on random sessions of a scripted policy, B7's state equals B5's (Theorem 1)."""

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.store.memory import InMemoryStore

from tests.support.forget_agents import SECRET, build, say, state_of
from unsee import RevocationEvent, Unsee

ACTIONS = st.sampled_from(["hello", "look at T2", "look at T3", "refund A7 please", "remember I like tea",
                           "look at T2 and T3", "bye"])


@st.composite
def sessions(draw):
    turns = draw(st.lists(ACTIONS, min_size=2, max_size=7))
    at = draw(st.integers(0, len(turns) - 1))  # the turn where the target enters
    how = draw(st.sampled_from(["user", "tool"]))
    if how == "user":
        turns[at] = f"my card is {SECRET}; " + turns[at]
    else:
        turns[at] = "look at T1"  # its tool return carries the target
    return turns, draw(st.booleans())


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=sessions())
def test_b7_equals_b5_on_random_sessions(tmp_path_factory, case):
    turns, summarize = case
    states = {}
    for strategy in ("B7", "B5"):
        u = Unsee(home=tmp_path_factory.mktemp(strategy))
        agent, store = build(u, summarize=summarize, store=u.recorded_store(InMemoryStore()))
        for text in turns:
            say(agent, "s", text)
        report = u.forget("s", RevocationEvent(target=SECRET), strategy)
        assert report.committed
        states[strategy] = state_of(agent, store, "s")
        u.close()
    assert states["B7"] == states["B5"]
    assert SECRET not in json.dumps(states["B7"], default=str)
