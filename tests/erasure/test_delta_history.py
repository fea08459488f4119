"""Forget + erase on agents whose ``messages`` channel is LangGraph's ``DeltaChannel`` (issue 29).

A DeltaChannel checkpoint stores no messages (only every ``snapshot_frequency``
updates a ``_DeltaSnapshot``): its state is rebuilt from ancestors' writes.
After forget + erase, on SQLite, in-memory and PostgreSQL savers, small and
large snapshot frequencies: 0 raw copies, 0 snapshots of ``get_state_history``
holding the target, EVERY remaining checkpoint rebuilds to the state it had in
its own world (prefix: the original; suffix: the counterfactual scratch
thread's), forks from checkpoints work, nothing non-target is lost (B5's
counterfactual on a full-state twin), a crash inside the rewrite is finished
by a rerun, and a thread that switched to delta midway is handled.
"""

from __future__ import annotations

import pytest
from langchain_core.messages import HumanMessage

from unsee import RevocationEvent
from unsee.middleware.faults import crash_at
from unsee.middleware.errors import InjectedCrash
from unsee.plugins.erasure.history import (DeltaFormatUnknown, HistoryNotRewritable, _materialize, config_of,
                                           delta_specs, value_text)

from tests.support.erasure_agents import SECRET, TURNS, build, raw_copies, run
from tests.support.erasure_checks import check_clean, messages_of, states

T = "t1"


def _forget_then_erase(u, agent, event):
    """A forget without erasure, the world of each checkpoint captured, then the erasure."""
    report = u.forget(T, event, agent=agent, erase=False)
    assert report.committed and report.scratch_thread
    expected = {**states(agent, T), **states(agent, report.scratch_thread)}
    result = u.erase(T, event, agent=agent)
    return report, expected, result


@pytest.mark.parametrize("kind,freq", [("sqlite", 1), ("sqlite", 4), ("sqlite", 1000), ("memory", 4)])
def test_forget_and_erase_a_delta_thread(tmp_path, kind, freq):
    u, agent, close = build(tmp_path, delta=freq, memory_saver=kind == "memory")
    try:
        assert sorted(delta_specs(agent)) == ["messages"]
        run(agent, T)
        _, expected, result = _forget_then_erase(u, agent, RevocationEvent(target=SECRET))
        assert result.clean, result.after
        check_clean(agent, tmp_path, expected)
        # the session goes on, and a fork from an older checkpoint works
        agent.invoke({"messages": [HumanMessage("Please look up T2.")]}, config_of(T))
        mid = list(states(agent, T))[len(states(agent, T)) // 2]
        out = agent.invoke({"messages": [HumanMessage("What is the status?")]}, config_of(T, mid))
        assert SECRET not in value_text(out)
    finally:
        close()


@pytest.mark.postgres
def test_forget_and_erase_a_delta_thread_on_postgres(tmp_path, pg_url):
    u, agent, close = build(tmp_path, delta=4, pg_url=pg_url)
    try:
        run(agent, T)
        _, expected, result = _forget_then_erase(u, agent, RevocationEvent(target=SECRET))
        assert result.clean, result.after
        check_clean(agent, tmp_path, expected)
    finally:
        close()


@pytest.mark.docker
def test_a_delta_session_with_a_docker_sandbox(tmp_path):
    """The sandbox routes a DeltaChannel session also writes (its Docker snapshots and images)
    are erased with the history: 0 copies on every route, the counterfactual sandbox clean."""
    import shutil

    home = tmp_path / "docker"
    home.mkdir()
    u, agent, close = build(home, delta=4, sandbox="docker")
    try:
        run(agent, T)
        assert next(r for r in u.audit(T, SECRET).routes if r.route == "sandbox").copies > 0
        _, expected, result = _forget_then_erase(u, agent, RevocationEvent(target=SECRET))
        assert result.clean, result.after
        after = u.audit(T, SECRET)
        assert after.clean, [(r.route, r.byte_copies) for r in after.routes if r.copies]
        assert SECRET.encode() not in u.environments.env(T).read_file("case/notes.txt")
        after = states(agent, T)
        assert after and all(msgs == expected[cid] for cid, msgs in after.items())
    finally:
        close()
    shutil.rmtree(home / "sandboxes", ignore_errors=True)  # (as the full-state Docker test)
    assert raw_copies(home) == {}


def test_nothing_non_target_is_lost_against_b5_on_full_state(tmp_path):
    """The rewritten delta thread's head equals B5's counterfactual on a full-state twin."""
    u, agent, close = build(tmp_path / "delta", delta=3)
    u2, twin, close2 = build(tmp_path / "full")
    try:
        run(agent, T)
        run(twin, T)
        u.forget(T, RevocationEvent(target=SECRET), agent=agent)
        u2.forget(T, RevocationEvent(target=SECRET), agent=twin, strategy="B5")
        assert messages_of(agent.get_state(config_of(T)).values) == messages_of(twin.get_state(config_of(T)).values)
        assert raw_copies(tmp_path / "delta") == {}
    finally:
        close()
        close2()


@pytest.mark.parametrize("strategy", ["B5", "B5'", "B9"])
def test_every_replaying_strategy_erases_a_delta_thread(tmp_path, strategy):
    u, agent, close = build(tmp_path, delta=4)
    try:
        if strategy == "B9":
            u.ifc(sinks=["refund.order"])  # B9 replays under IFC labels
        run(agent, T)
        report = u.forget(T, RevocationEvent(target=SECRET), agent=agent, strategy=strategy)
        assert report.committed and report.erased_clean
        assert raw_copies(tmp_path) == {}
        assert not [s for s in agent.get_state_history(config_of(T)) if SECRET in value_text(s.values)]
    finally:
        close()


@pytest.mark.parametrize("point", ["erase:history:staged", "erase:history:swapping"])
def test_a_crash_inside_the_delta_rewrite_is_finished_by_a_rerun(tmp_path, point):
    u, agent, close = build(tmp_path, delta=2)
    try:
        run(agent, T)
        event = RevocationEvent(target=SECRET)
        report = u.forget(T, event, agent=agent, erase=False)
        expected = {**states(agent, T), **states(agent, report.scratch_thread)}
        with crash_at(point), pytest.raises(InjectedCrash):
            u.erase(T, event, agent=agent)
        assert u.erase(T, event, agent=agent).clean
        check_clean(agent, tmp_path, expected)
    finally:
        close()


def test_a_thread_that_switched_to_delta_midway(tmp_path):
    """Three turns written with a full-state messages channel, three more after the graph's
    messages became a DeltaChannel (same home, same SQLite file, same thread): the secret (turn 2)
    is in the full-state part, and the suffix crosses the switch."""
    u, full, close = build(tmp_path)
    try:
        run(full, T, TURNS[:3])
    finally:
        close()
    u, agent, close = build(tmp_path, delta=3)
    try:
        run(agent, T, TURNS[3:])
        assert len(messages_of(agent.get_state(config_of(T)).values)) > 12  # the old turns rebuilt too
        _, expected, result = _forget_then_erase(u, agent, RevocationEvent(target=SECRET))
        assert result.clean, result.after
        check_clean(agent, tmp_path, expected)
    finally:
        close()


def test_an_unknown_delta_shape_is_a_typed_error_naming_the_version():
    with pytest.raises(DeltaFormatUnknown, match=r"installed: langgraph \d"):
        _materialize({"channel_values": {}}, {"counters_since_delta_snapshot": "??"}, {"messages": []},
                     {"messages": object()})
    assert issubclass(DeltaFormatUnknown, HistoryNotRewritable)
