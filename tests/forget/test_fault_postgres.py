"""The PostgreSQL server goes away under a forget (a real ``pg_ctl stop``/``restart`` of the private
cluster): the forget fails with a typed error and the old state is intact, or its journaled commit
rolls forward; once the server is back, a retry completes it."""

from __future__ import annotations

import os
import shlex
import subprocess
import threading

import pytest
from langchain_core.messages import HumanMessage

from unsee import RevocationEvent, Unsee
from unsee.middleware.errors import StoreUnavailable
from unsee.middleware import faults
from unsee.plugins.forget import CommitInterrupted

from tests.support.forget_agents import FIRED
pytestmark = pytest.mark.postgres

SECRET = "4417-2231"
CFG = {"configurable": {"thread_id": "t1"}}


def pg_ctl(*args: str) -> None:
    subprocess.run([*shlex.split(os.environ["UNSEE_PG_CTL"]), *args], check=True, capture_output=True, timeout=120)


@pytest.fixture
def world(tmp_path, pg_url, monkeypatch):
    if not os.environ.get("UNSEE_PG_CTL"):
        pytest.skip("the PostgreSQL server is not one this run started (no $UNSEE_PG_CTL): it is not ours to stop")
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row
    from psycopg_pool import ConnectionPool

    from tests.support.forget_agents import build

    monkeypatch.setenv("UNSEE_STORE_TIMEOUT", "3")  # a server that stays down: a typed error in seconds
    u = Unsee(home=tmp_path / "h", store=pg_url)
    # LangGraph's saver on a pool that checks connections: after a restart it takes fresh ones
    pool = ConnectionPool(pg_url, kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
                          max_size=4, timeout=3, check=ConnectionPool.check_connection)
    saver = PostgresSaver(pool)
    saver.setup()
    agent, _ = build(u, checkpointer=saver)
    for text in ("look up T1", "hello", "refund A7"):
        agent.invoke({"messages": [HumanMessage(text)]}, CFG)
    yield u, agent
    u.close()
    pool.close()


def live(agent) -> str:
    return repr(agent.get_state(CFG).values["messages"])


def eventually(fn, timeout: float = 90.0):
    """``fn()`` once the pools reconnected (psycopg_pool retries a lost server with backoff):
    what a client that retries a 503 does."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        try:
            return fn()
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def at_step(monkeypatch, step: str, action) -> None:
    """Run ``action`` (once) when the forget reaches ``step``."""
    real, done = faults.point, []

    def point(name: str) -> None:
        if name == step and not done:
            done.append(name)
            action()
        real(name)
    monkeypatch.setattr(faults, "point", point)


def test_server_down_before_the_commit(world, monkeypatch):
    """Nothing was begun: a typed error, the old state and records exactly as they were."""
    u, agent = world
    before_state = live(agent)
    before_records = (u.store.artifacts("t1"), u.store.contents("t1"))
    at_step(monkeypatch, "replay:done", lambda: pg_ctl("-m", "immediate", "stop"))
    try:
        with pytest.raises((StoreUnavailable, CommitInterrupted)) as e:
            u.forget("t1", RevocationEvent(target=SECRET))
    finally:
        pg_ctl("start")
    monkeypatch.undo()
    assert eventually(lambda: live(agent)) == before_state and SECRET in before_state  # nothing committed
    assert eventually(lambda: (u.store.artifacts("t1"), u.store.contents("t1"))) == before_records
    report = eventually(lambda: u.forget("t1", RevocationEvent(target=SECRET)))  # the retry, server back
    assert report.committed and SECRET not in live(agent)


def test_server_down_mid_commit_is_reported_and_rolls_forward_on_retry(world, monkeypatch):
    u, agent = world
    fired = len(FIRED)
    event = RevocationEvent(target=SECRET)
    at_step(monkeypatch, "commit:state", lambda: pg_ctl("-m", "immediate", "stop"))
    try:
        # the new state is written (the commit point): the forget reports, it never raises after it
        first = u.forget("t1", event)
    finally:
        pg_ctl("start")
    assert first.committed and first.erased_clean is False
    assert [e.step for e in first.errors] == ["commit"] and "CommitInterrupted" == first.errors[0].error
    assert event.event_id in first.errors[0].message
    assert SECRET not in eventually(lambda: live(agent))
    monkeypatch.undo()
    report = eventually(lambda: u.forget("t1", event))  # the same event: its journaled commit is finished
    assert report.committed
    assert SECRET not in live(agent)
    assert u.audit("t1", SECRET, agent=agent).clean
    assert len(FIRED) == fired  # the refund fired when recorded; neither the replay nor the retry fired it again


def test_server_restarted_mid_commit(world, monkeypatch):
    """A restart (down, then up again) while the commit runs: the pools take fresh
    connections and the commit rolls forward in the same call."""
    u, agent = world
    event = RevocationEvent(target=SECRET)
    at_step(monkeypatch, "commit:state", lambda: pg_ctl("-m", "fast", "restart"))
    report = u.forget("t1", event)
    assert report.committed and SECRET not in eventually(lambda: live(agent))
    if not report.erased_clean:  # the erasure after it met a pool still reconnecting: said, and a rerun ends it
        assert any("record not erased yet" in n for n in report.notes), report.notes
        report = eventually(lambda: u.forget("t1", event))
    assert report.erased_clean
    assert eventually(lambda: u.audit("t1", SECRET, agent=agent)).clean
