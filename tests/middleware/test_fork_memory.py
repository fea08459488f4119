"""Memory after a fork (issue 30, part 1): a store write whose only evidence is on a branch
the thread abandoned (time travel) is flagged, rolled back or kept, per policy.

The scenario is the issue's: a support agent with a recorded store and a ``remember`` tool;
turn 1 is harmless, turn 2 makes it remember "customer is VIP: waive all fees"; then the user
goes back to the checkpoint before turn 2 (LangGraph's time travel) and says something else.
"""

from __future__ import annotations

import json
import re
import sqlite3

import pytest
from langchain.agents import create_agent
from langchain.tools import ToolRuntime
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore
from typer.testing import CliRunner

from unsee import Unsee
from unsee.cli import app
from unsee.middleware.errors import InjectedCrash, InvalidArgument, SessionNotFound, UnseeError
from unsee.middleware.faults import crash_at
from unsee.middleware.fork_memory import live_orphans, orphaned_writes
from unsee.middleware.fork_watch import EVENT
from unsee.middleware.records import Artifact, ArtifactType
from unsee.plugins.model import ScriptedChatModel, call_id

NS = ("customers", "dana")
VIP = "customer is VIP: waive all fees"


@tool
def remember(key: str, fact: str, runtime: ToolRuntime) -> str:
    """Remember a fact about the customer under a key."""
    runtime.store.put(NS, key, {"text": fact})
    return "remembered"


remember.metadata = {"unsee.effect": "write"}


def policy(messages, tools):
    last = messages[-1]
    if isinstance(last, ToolMessage):
        return AIMessage(content="Done.")
    found = re.findall(r"remember (\w+)=([^;]+)", str(last.content))
    if found:
        return AIMessage(content="", tool_calls=[
            {"name": "remember", "args": {"key": k, "fact": v.strip()}, "id": call_id(messages, i), "type": "tool_call"}
            for i, (k, v) in enumerate(found)])
    return AIMessage(content=f"You said: {last.content}")


def make_inner(kind: str, tmp_path, pg_url=None):
    if kind == "memory":
        return InMemoryStore()
    if kind == "sqlite":
        from langgraph.store.sqlite import SqliteStore

        s = SqliteStore(sqlite3.connect(tmp_path / "store.sqlite", check_same_thread=False, isolation_level=None))
    else:
        import psycopg
        from langgraph.store.postgres import PostgresStore
        from psycopg.rows import dict_row

        s = PostgresStore(psycopg.connect(pg_url, autocommit=True, prepare_threshold=0, row_factory=dict_row))
    s.setup()
    return s


@pytest.fixture
def world(tmp_path):
    """``make(kind, pg_url, **unsee options)`` -> (u, agent, recorded store) on a fresh home;
    ``kind``: the inner LangGraph store (memory, sqlite, postgres)."""
    made = []

    def make(kind="memory", pg_url=None, **unsee_kw):
        u = Unsee(home=tmp_path / "home", store=pg_url, **unsee_kw)
        inner = make_inner(kind, tmp_path, pg_url)
        store = u.recorded_store(inner)
        agent = create_agent(ScriptedChatModel(policy=policy), [remember], system_prompt="You are support.",
                             middleware=[u.middleware()], checkpointer=InMemorySaver(), store=store)
        made.append((u, inner))
        return u, agent, store

    yield make
    for u, inner in made:
        u.close()
        if (conn := getattr(inner, "conn", None)) is not None:  # (the SQLite or PostgreSQL store's own)
            conn.close()


def cfg(thread, checkpoint=None):
    c = {"thread_id": thread}
    if checkpoint is not None:
        c["checkpoint_id"] = checkpoint
    return {"configurable": c}


def say(agent, text, config):
    return agent.invoke({"messages": [HumanMessage(text)]}, config)


def head(agent, thread):
    return agent.get_state(cfg(thread)).config["configurable"]["checkpoint_id"]


def value(store, key, ns=NS):
    item = store.inner.get(ns, key)
    return item.value["text"] if item is not None else None


def scenario(agent, thread="t", turn1="hello, I am Dana", turn2=f"remember profile={VIP}"):
    """Turns 1 and 2, then back to the checkpoint before turn 2 with another turn 2."""
    say(agent, turn1, cfg(thread))
    before_turn2 = head(agent, thread)
    say(agent, turn2, cfg(thread))
    return before_turn2


def fork(agent, before, thread="t", text="what are my fees?"):
    return say(agent, text, cfg(thread, before))


def root_events(u, thread):
    return [e for s in u.store.spans(thread) if s.name.startswith("invoke_agent")
            for e in s.events if e["name"] == EVENT]


# -- flag (the default) -------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_time_travel_flags_the_abandoned_turns_memory(world, kind, request):
    pg_url = request.getfixturevalue("pg_url") if kind == "postgres" else None
    u, agent, store = world(kind, pg_url)
    before = scenario(agent)
    assert value(store, "profile") == VIP
    out = fork(agent, before)
    assert out["messages"][-1].content == "You said: what are my fees?"

    assert value(store, "profile") == VIP  # flag changes nothing
    (r,) = u.orphaned_memory("t")
    write = u.graph("t").get(r.write_id)
    assert write.type is ArtifactType.MEMORY_WRITE and write.turn == 2 == r.abandoned_turn
    assert (r.namespace, r.key, r.action, r.policy, r.detected_turn) == (NS, "profile", "flagged", "flag", 3)
    (ev,) = root_events(u, "t")
    assert ev["attributes"]["unsee.artifact.id"] == r.write_id
    assert ev["attributes"]["unsee.memory.key"] == "profile"

    (shown,) = u.view("t", detect=False)["orphaned_memory"]  # unsee view draws it (no value carried)
    assert (shown["write_id"], shown["namespace"], shown["key"], shown["action"]) == (
        r.write_id, "customers/dana", "profile", "flagged") and VIP not in json.dumps(shown)
    say(agent, "thanks", cfg("t"))  # a run on the new branch's head: nothing new to report
    assert len(u.orphaned_memory("t")) == 1 and len(root_events(u, "t")) == 1
    u.flush()
    argv = ["--home", str(u.home), *(["--store", u.store.url] if u.store.url else []), "sessions", "--json"]
    res = CliRunner().invoke(app, argv)
    assert res.exit_code == 0, res.output
    assert {s["session_id"]: s["orphaned_memory"] for s in json.loads(res.output)} == {"t": 1}


def test_an_orphaned_value_another_session_read_is_named(world):
    """The assertion reached another session before the fork (its memory injection read the
    value): the record names it (a rollback here does not undo what that session saw)."""
    u, agent, store = world("memory")
    reader = create_agent(ScriptedChatModel(policy=policy), [remember], system_prompt="You are support.",
                          middleware=[u.middleware(), u.memory_middleware(store, NS)],
                          checkpointer=InMemorySaver(), store=store)
    say(reader, "hello before anything was remembered", cfg("early"))  # read nothing of it
    before = scenario(agent)
    say(reader, "what do you know about me?", cfg("t2"))
    fork(agent, before)
    (r,) = u.orphaned_memory("t")
    assert r.read_by == ("t2",)


def test_update_state_on_an_older_checkpoint_is_a_fork_too(world):
    u, agent, store = world()
    before = scenario(agent)
    older = {"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": before}}
    agent.update_state(older, {"messages": [HumanMessage("(an operator note)")]})
    say(agent, "hello again", cfg("t"))
    assert [(r.key, r.action) for r in u.orphaned_memory("t")] == [("profile", "flagged")]


@pytest.mark.parametrize("policy", ["flag", "rollback"])
def test_a_fork_into_another_thread_reports_the_parents_later_memory_and_never_touches_it(world, policy):
    """A new thread started from the state before turn 2 of "t" (``update_state`` with that
    checkpoint's values, as LangGraph's docs fork a thread): "t"'s turn-2 memory is not justified
    on the new branch. It is reported on the new thread, naming "t" as its writer; even under
    rollback it stays: "t"'s own branch still justifies it."""
    u, agent, store = world()
    u.on_fork("t2", policy)
    before = scenario(agent)
    values = agent.get_state(cfg("t", before)).values
    agent.update_state(cfg("t2"), values, as_node="model")
    say(agent, "what are my fees?", cfg("t2"))
    assert value(store, "profile") == VIP
    (r,) = u.orphaned_memory("t2")
    assert (r.writer, r.key, r.action, r.abandoned_turn) == ("t", "profile", "flagged", 2)
    assert u.graph("t").get(r.write_id).type is ArtifactType.MEMORY_WRITE
    (ev,) = root_events(u, "t2")
    assert ev["attributes"]["unsee.fork.writer"] == "t"
    assert u.orphaned_memory("t") == []  # "t" itself lost nothing
    say(agent, "thanks", cfg("t2"))
    assert len(u.orphaned_memory("t2")) == 1


def test_a_session_policy_is_kept_in_the_home(world, tmp_path):
    u, agent, store = world()
    u.on_fork("t", "rollback")
    other = Unsee(home=u.home)  # another process of the same home
    try:
        assert (other.fork_policy("t"), other.fork_policy("t9")) == ("rollback", "flag")
    finally:
        other.close()


# -- rollback -------------------------------------------------------------------------------------
def test_rollback_restores_the_previous_value_deletes_a_new_key_and_leaves_other_sessions(world):
    u, agent, store = world(on_fork="rollback")
    say(agent, "remember profile=customer since 2020", cfg("t"))  # turn 1: justified on both branches
    before = head(agent, "t")
    say(agent, f"remember profile={VIP}; remember waiver=all fees; remember tier=gold", cfg("t"))
    # another session: its own key, and a later write over one of t's abandoned items
    say(agent, "remember tier=platinum", cfg("other"))
    store.put(("customers", "bob"), "profile", {"text": "bob's profile"})  # (the raw store: not this session's)
    assert (value(store, "profile"), value(store, "waiver"), value(store, "tier")) == (VIP, "all fees", "platinum")

    fork(agent, before)
    assert value(store, "profile") == "customer since 2020"  # the value before the abandoned write
    assert value(store, "waiver") is None  # it did not exist before it
    assert value(store, "tier") == "platinum"  # another session's write is never touched
    assert value(store, "profile", ("customers", "bob")) == "bob's profile"
    got = {r.key: (r.action, r.restored) for r in u.orphaned_memory("t")}
    assert got == {"profile": ("rolled_back", "previous"), "waiver": ("rolled_back", "deleted")}
    assert u.orphaned_memory("other") == []
    assert {e["attributes"]["unsee.fork.action"] for e in root_events(u, "t")} == {"rolled_back"}

    # the new branch goes on: a later read of the key is not attributed to the abandoned write
    (turn1,) = [a.id for a in u.graph("t").of_type(ArtifactType.MEMORY_WRITE)
                if a.turn == 1 and a.source_ids == ("memory:customers/dana/profile",)]
    st = u.recorder.state("t")
    assert st.last_write["memory:customers/dana/profile"] == turn1
    assert "memory:customers/dana/waiver" not in st.last_write


@pytest.mark.parametrize("step", ["fork:journal", "fork:store"])
def test_a_crash_during_rollback_is_finished_by_the_rerun(world, step):
    u, agent, store = world(on_fork="rollback")
    before = scenario(agent)
    with crash_at(step), pytest.raises(InjectedCrash):
        fork(agent, before)
    assert [r.action for r in u.orphaned_memory("t")] == ["rolling_back"]  # journaled first
    assert value(store, "profile") == (VIP if step == "fork:journal" else None)
    out = fork(agent, before)  # the user runs it again
    assert out["messages"][-1].content == "You said: what are my fees?"
    assert value(store, "profile") is None
    assert [(r.action, r.restored) for r in u.orphaned_memory("t")] == [("rolled_back", "deleted")]
    assert [e["attributes"]["unsee.fork.action"] for e in root_events(u, "t")] == ["rolled_back"]  # the rerun's
    assert not u.session("t").incomplete


def test_a_write_the_new_branch_also_justifies_is_not_orphaned(world):
    u, agent, store = world(on_fork="rollback")
    say(agent, "remember profile=customer since 2020", cfg("t"))
    say(agent, "remember waiver=all fees", cfg("t"))
    # back to the point inside turn 2 where the tool had run: its return (the write's cause) is in the state
    (mid,) = [s.config["configurable"]["checkpoint_id"] for s in agent.get_state_history(cfg("t"))
              if s.values["messages"] and isinstance(s.values["messages"][-1], ToolMessage)
              and "waiver" in str(s.values["messages"][-2].tool_calls)]
    fork(agent, mid, text="and the fees?")
    assert (value(store, "profile"), value(store, "waiver")) == ("customer since 2020", "all fees")
    assert u.orphaned_memory("t", include_kept=True) == []


# -- keep -------------------------------------------------------------------------------------------
def test_keep_records_without_reporting(world):
    u, agent, store = world()
    u.on_fork("t", "keep")  # per session, over Unsee(on_fork="flag")
    fork(agent, scenario(agent))
    assert value(store, "profile") == VIP
    assert u.orphaned_memory("t") == [] and root_events(u, "t") == []
    assert [(r.key, r.action, r.policy) for r in u.orphaned_memory("t", include_kept=True)] == [
        ("profile", "kept", "keep")]


# -- bad input ----------------------------------------------------------------------------------------
def test_an_unknown_policy_is_a_typed_error_that_changes_nothing(tmp_path, world):
    with pytest.raises(InvalidArgument, match="unknown fork policy 'undo'") as e:
        Unsee(home=tmp_path / "fresh", on_fork="undo")
    assert isinstance(e.value, UnseeError) and not (tmp_path / "fresh").exists()
    u, agent, store = world()
    with pytest.raises(InvalidArgument):
        u.on_fork("t", "Rollback")
    assert u.recorder.forks.policy("t") == "flag"
    with pytest.raises(SessionNotFound):
        u.orphaned_memory("nobody")


# -- the pure decision, by tables ------------------------------------------------------------------
def _a(aid, type_, seq, parents=(), turn=1):
    return Artifact(id=aid, session_id="s", type=ArtifactType(type_), seq=seq, parents=tuple(parents), turn=turn)


def test_orphaned_writes_by_table():
    arts = [
        _a("u1", "user_input", 1), _a("m1", "model_turn", 2, ["u1"]), _a("c1", "tool_call", 3, ["m1"]),
        _a("w1", "memory_write", 4, ["c1"]), _a("r1", "tool_return", 5, ["c1"]),
        _a("u2", "user_input", 6, turn=2), _a("m2", "model_turn", 7, ["u1", "m1", "r1", "u2"], 2),
        _a("c2", "tool_call", 8, ["m2"], 2), _a("w2", "memory_write", 9, ["c2"], 2),
        _a("w0", "memory_write", 10, [], 2),  # no recorded cause: never judged
        _a("w3", "memory_write", 11, ["m2"], 2),  # made by the model turn itself
    ]
    for branch, expected in [
        (["u1", "m1", "r1"], ["w2", "w3"]),  # back before turn 2: its tool call and model turn are gone
        (["u1", "m1", "r1", "u2", "m2"], ["w2"]),  # m2 is kept, but not the tool call c2 it made
    ]:
        assert [a.id for a in orphaned_writes(arts, branch)] == expected, branch
    assert [a.id for a in orphaned_writes(arts, ["u1"])] == ["w1", "w2", "w3"]
    assert orphaned_writes(arts, [a.id for a in arts]) == []


def test_live_orphans_by_table():
    w = {n: _a(n, "memory_write", s, ["x"]) for n, s in [("a", 1), ("b", 2), ("c", 3), ("d", 4), ("e", 5)]}
    ns = ("n",)
    journal = [
        (1, ns, "k", None, '{"v": 1}'),  # a justified write ...
        (2, ns, "k", '{"v": 1}', '{"v": 2}'),  # ... then two orphaned ones: undone together
        (3, ns, "k", '{"v": 2}', '{"v": 3}'),
        (4, ns, "j", None, '{"v": 9}'),  # orphaned, then superseded by a justified write
        (5, ns, "j", '{"v": 9}', '{"v": 8}'),
    ]
    (o,) = live_orphans([w["b"], w["c"], w["d"]], journal)
    assert (o.write.id, o.key, o.restore_seq, o.restore, o.expect) == ("c", "k", 2, '{"v": 1}', '{"v": 3}')
    (o,) = live_orphans([w["e"]], journal)
    assert (o.key, o.restore) == ("j", '{"v": 9}')
    (o,) = live_orphans([w["a"], w["b"], w["c"]], journal)
    assert o.restore is None  # the key did not exist before the first orphaned write
