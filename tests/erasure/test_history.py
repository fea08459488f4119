"""Rewriting a LangGraph thread's checkpoint history (plugins/erasure/history.py) on a
real ``create_agent`` agent, SQLite and in-memory savers: a forget simulated by hand
(fork after turn 1, counterfactual turns in a scratch thread, the commit's
update_state), then stage + swap: the thread becomes clean prefix + counterfactual
suffix, 0 checkpoints and 0 raw file bytes hold the secret, the agent continues,
forks from every checkpoint work, a crash inside the swap is finished by a rerun."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.types import Send
from typing_extensions import TypedDict

from unsee.plugins.erasure.history import (HistoryNotRewritable, ThreadReader, before_turn, check_rewritable,
                                           config_of, copy_thread, drop_threads, history_holding, stage_rewrite,
                                           swap_in, threads_with_prefix, value_text)
from unsee.plugins.model import ScriptedChatModel, call_id

SECRET = "4417-2231"
T, SCRATCH, STAGE = "t", "t~cf-x", "t~er-x"


@tool
def lookup(ticket: str) -> str:
    """Look up a ticket."""
    return f"card {SECRET}" if ticket == "T1" else f"ticket {ticket}: blender broken"


def policy(messages, tools):
    last = messages[-1]
    if isinstance(last, ToolMessage):
        return AIMessage(content=f"Result: {last.content}")
    if isinstance(last, HumanMessage) and (m := re.search(r"\bT\d\b", str(last.content))):
        return AIMessage(content="", tool_calls=[{"name": "lookup", "args": {"ticket": m.group(0)},
                                                  "id": call_id(messages), "type": "tool_call"}])
    return AIMessage(content=f"ok: {last.content}")


def holds(value) -> bool:
    return SECRET in value_text(value)


def cfg(thread: str = T, checkpoint_id: str | None = None, **extra) -> dict:
    c = {"thread_id": thread, **extra}
    if checkpoint_id:
        c["checkpoint_id"] = checkpoint_id
    return {"configurable": c}


def say(agent, text: str, config: dict):
    return agent.invoke({"messages": [HumanMessage(text)]}, config)


@pytest.fixture(params=["sqlite", "memory"])
def setup(request, tmp_path):
    if request.param == "sqlite":
        conn = sqlite3.connect(tmp_path / "lg.sqlite", check_same_thread=False)
        saver = SqliteSaver(conn)
    else:
        conn, saver = None, InMemorySaver()
    agent = create_agent(ScriptedChatModel(policy=policy), [lookup], checkpointer=saver)
    yield agent, saver, conn, tmp_path / "lg.sqlite"
    if conn is not None:
        conn.close()


def ids(saver, thread: str) -> list[str]:
    return [t.config["configurable"]["checkpoint_id"] for t in reversed(list(saver.list(config_of(thread))))]


def forget_by_hand(agent, turn2: str = "please look up T2") -> str:
    """Three turns on T (the second brings the secret), the counterfactual in SCRATCH, the
    commit's update_state on T; returns the fork checkpoint (the state after turn 1)."""
    say(agent, "hello", cfg(unsee_session=T))
    snap = agent.get_state(cfg())
    fork, turn1 = snap.config["configurable"]["checkpoint_id"], snap.values["messages"]
    say(agent, "please look up T1", cfg(unsee_session=T))
    say(agent, "thanks", cfg(unsee_session=T))
    agent.update_state(cfg(SCRATCH), {"messages": turn1})
    # a configurable key naming the scratch thread lands in its checkpoints' metadata
    scfg = cfg(SCRATCH, unsee_session=T, unsee_scratch=SCRATCH)
    say(agent, turn2, scfg)
    say(agent, "thanks", scfg)
    final = agent.get_state(cfg(SCRATCH)).values["messages"]
    agent.update_state({**cfg(), "metadata": {"unsee_commit": "ev1"}},
                       {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *final]})
    return fork


def test_update_state_on_an_empty_thread_writes_one_update_checkpoint(setup):
    agent, saver, *_ = setup
    agent.update_state(cfg("s"), {"messages": [HumanMessage("hi")]})
    (seed,) = list(saver.list(config_of("s")))
    assert seed.metadata["source"] == "update" and seed.metadata["step"] == 0
    assert seed.parent_config is None and not seed.pending_writes
    say(agent, "again", cfg("s"))
    sources = [t.metadata["source"] for t in reversed(list(saver.list(config_of("s"))))]
    assert sources[:3] == ["update", "input", "loop"]  # the input checkpoint is the first turn's, not the seed's


def test_rewrite_leaves_prefix_plus_counterfactual_and_no_secret(setup):
    agent, saver, conn, path = setup
    fork = forget_by_hand(agent)
    before = {t.config["configurable"]["checkpoint_id"]: t for t in saver.list(config_of(T))}
    total, holding = history_holding(saver, T, holds)
    assert holding > 0 and total == len(before)
    prefix = ids(saver, T)[: ids(saver, T).index(fork) + 1]
    suffix = ids(saver, SCRATCH)[1:]  # without the seed
    assert len(prefix) == 3 and len(suffix) == 8

    staged = stage_rewrite(saver, T, fork_checkpoint_id=fork, suffix_thread=SCRATCH, stage_thread=STAGE,
                           holds_target=holds, marker={"unsee_rewritten": "ev1"})
    assert (staged.kept, staged.suffix, staged.dropped) == (3, 8, total - 3)
    assert history_holding(saver, T, holds) == (total, holding)  # staging does not touch the thread
    assert swap_in(saver, T, STAGE) == 11
    assert swap_in(saver, T, STAGE) == 0  # a rerun after the swap is a no-op
    assert ids(saver, T) == prefix + suffix
    assert history_holding(saver, T, holds) == (11, 0)
    assert threads_with_prefix(saver, "t~") == [SCRATCH]  # the stage is gone

    tuples = {t.config["configurable"]["checkpoint_id"]: t for t in saver.list(config_of(T))}
    for cid in prefix:  # the clean prefix is unchanged, value for value
        assert saver.serde.dumps_typed(tuples[cid].checkpoint["channel_values"]) == \
            saver.serde.dumps_typed(before[cid].checkpoint["channel_values"])
    first = tuples[suffix[0]]
    assert first.parent_config["configurable"]["checkpoint_id"] == fork
    assert first.metadata["step"] == before[fork].metadata["step"] + 1  # steps continue the fork's
    for t in tuples.values():
        assert t.metadata["unsee_rewritten"] == "ev1"
        assert SCRATCH not in value_text(t.metadata)
    assert tuples[suffix[0]].metadata["thread_id"] == T  # the scrubbed key named the scratch thread

    scratch_head = agent.get_state(cfg(SCRATCH)).values["messages"]
    history = list(agent.get_state_history(cfg()))
    assert len(history) == 11 and history[0].values["messages"] == scratch_head
    assert not any(holds(s.values) for s in history)

    assert drop_threads(saver, threads_with_prefix(saver, T + "~cf-")) == 1
    assert threads_with_prefix(saver, "t~") == []

    out = say(agent, "one more", cfg())
    assert out["messages"][-1].content == "ok: one more" and not holds(out["messages"])
    for cid in prefix + suffix:  # a fork from every checkpoint, with and without new input
        snap = agent.get_state(cfg(checkpoint_id=cid))
        assert not holds(snap.values)
        assert not holds(agent.invoke(None, cfg(checkpoint_id=cid)))
        assert not holds(say(agent, "fork", cfg(checkpoint_id=cid)))
    assert history_holding(saver, T, holds)[1] == 0

    if conn is not None:
        raw = lambda: sum(p.read_bytes().count(SECRET.encode())  # noqa: E731
                          for p in (path, Path(f"{path}-wal")) if p.exists())
        conn.commit()
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute("VACUUM")
        assert raw() == 0


def test_sqlite_file_held_the_secret_before_the_rewrite(tmp_path):
    conn = sqlite3.connect(tmp_path / "lg.sqlite", check_same_thread=False)
    agent = create_agent(ScriptedChatModel(policy=policy), [lookup], checkpointer=SqliteSaver(conn))
    forget_by_hand(agent)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert (tmp_path / "lg.sqlite").read_bytes().count(SECRET.encode()) > 0  # the check above can see copies
    conn.close()


def test_crash_inside_swap_is_finished_by_a_rerun(setup, monkeypatch):
    agent, saver, *_ = setup
    fork = forget_by_hand(agent)
    expected = ids(saver, T)[: ids(saver, T).index(fork) + 1] + ids(saver, SCRATCH)[1:]
    stage_rewrite(saver, T, fork_checkpoint_id=fork, suffix_thread=SCRATCH, stage_thread=STAGE,
                  holds_target=holds, marker={"unsee_rewritten": "ev1"})
    real, calls = saver.put, []

    def flaky(config, *a, **kw):
        calls.append(1)
        if len(calls) == 5:
            raise OSError("disk gone")
        return real(config, *a, **kw)

    monkeypatch.setattr(saver, "put", flaky)
    with pytest.raises(OSError):
        swap_in(saver, T, STAGE)
    assert len(ids(saver, T)) == 4  # deleted, partly copied
    monkeypatch.setattr(saver, "put", real)
    assert swap_in(saver, T, STAGE) == len(expected)
    assert ids(saver, T) == expected and history_holding(saver, T, holds)[1] == 0
    assert threads_with_prefix(saver, STAGE) == []
    assert say(agent, "after crash", cfg())["messages"][-1].content == "ok: after crash"


def test_clean_side_branches_are_kept_tainted_ones_dropped(setup):
    agent, saver, *_ = setup
    say(agent, "hello", cfg())
    fork = agent.get_state(cfg()).config["configurable"]["checkpoint_id"]
    turn1 = agent.get_state(cfg()).values["messages"]
    say(agent, "an aside", cfg(checkpoint_id=fork))  # clean: 3 checkpoints
    say(agent, "aside about T1", cfg(checkpoint_id=fork))  # clean until the tool returns: 2 kept
    say(agent, "please look up T1", cfg(checkpoint_id=fork))
    agent.update_state(cfg(SCRATCH), {"messages": turn1})
    say(agent, "please look up T2", cfg(SCRATCH))
    n = len(ids(saver, T))
    staged = stage_rewrite(saver, T, fork_checkpoint_id=fork, suffix_thread=SCRATCH, stage_thread=STAGE,
                           holds_target=holds, marker={})
    assert (staged.kept, staged.suffix, staged.dropped) == (3 + 3 + 2, 5, n - 8)
    swap_in(saver, T, STAGE)
    assert history_holding(saver, T, holds) == (13, 0)
    head = agent.get_state(cfg()).values["messages"]
    assert head == agent.get_state(cfg(SCRATCH)).values["messages"]  # the suffix head stays the head


def test_stage_refuses_a_tainted_prefix_or_suffix(setup):
    agent, saver, *_ = setup
    forget_by_hand(agent, turn2="please look up T1")  # the "counterfactual" fetches the secret again
    tainted = ids(saver, T)[-1]
    with pytest.raises(HistoryNotRewritable, match="before the fork"):
        stage_rewrite(saver, T, fork_checkpoint_id=tainted, suffix_thread=SCRATCH, stage_thread=STAGE,
                      holds_target=holds, marker={})
    fork = ids(saver, T)[2]
    with pytest.raises(HistoryNotRewritable, match="counterfactual"):
        stage_rewrite(saver, T, fork_checkpoint_id=fork, suffix_thread=SCRATCH, stage_thread=STAGE,
                      holds_target=holds, marker={})
    with pytest.raises(HistoryNotRewritable, match="not in thread"):
        stage_rewrite(saver, T, fork_checkpoint_id="nope", suffix_thread=SCRATCH, stage_thread=STAGE,
                      holds_target=holds, marker={})


def test_fork_at_empty_state_keeps_the_whole_counterfactual(setup):
    agent, saver, *_ = setup
    say(agent, "look up T1", cfg())
    say(agent, "look up T2", cfg(SCRATCH))  # no seed: the replay started from nothing
    staged = stage_rewrite(saver, T, fork_checkpoint_id=None, suffix_thread=SCRATCH, stage_thread=STAGE,
                           holds_target=holds, marker={})
    assert (staged.kept, staged.suffix) == (0, len(ids(saver, SCRATCH)))
    swap_in(saver, T, STAGE)
    assert ids(saver, T) == ids(saver, SCRATCH) and history_holding(saver, T, holds)[1] == 0


def test_copy_thread_scrubs_the_source_name(setup):
    agent, saver, *_ = setup
    say(agent, "hi", cfg(SCRATCH, origin=SCRATCH, keep="x"))
    n = copy_thread(saver, SCRATCH, "u", metadata_update={"m": 1}, drop_metadata_keys=("keep",))
    assert n == len(ids(saver, "u")) == 3 and ids(saver, "u") == ids(saver, SCRATCH)
    for t in saver.list(config_of("u")):
        assert "origin" not in t.metadata and "keep" not in t.metadata
        assert t.metadata["thread_id"] == "u" and t.metadata["m"] == 1
    assert agent.get_state(cfg("u")).values == agent.get_state(cfg(SCRATCH)).values


def test_check_rewritable(tmp_path):
    create = lambda cp: create_agent(ScriptedChatModel(policy=policy), [lookup], checkpointer=cp)  # noqa: E731
    saver = InMemorySaver()
    assert check_rewritable(create(saver)) is saver
    with pytest.raises(HistoryNotRewritable, match="no checkpointer"):
        check_rewritable(create(None))

    class S(TypedDict):
        messages: list  # a LastValue channel: every checkpoint stores its value

    g = StateGraph(S)
    g.add_node("n", lambda s: {"messages": []})
    g.add_edge(START, "n")
    g.add_edge("n", END)
    assert check_rewritable(g.compile(checkpointer=saver)) is saver
    # (DeltaChannel graphs: tests/erasure/test_delta_history.py)


def test_value_text_renders_every_part():
    msg = AIMessage(content="", tool_calls=[{"name": "pay", "args": {"card": SECRET}, "id": "c1"}],
                    additional_kwargs={"x": "extra-bit"})
    text = value_text([msg, {"k": b"raw-bytes\xff"}, Send("tools", {"arg": "sent-arg"}), ("tuple-item",), 7])
    for part in (SECRET, "extra-bit", "raw-bytes", "sent-arg", "tuple-item", "7"):
        assert part in text
    loop: list = []
    loop.append(loop)
    assert value_text(loop) == ""


def test_value_text_leaves_out_the_names_of_messages_and_calls():
    """A message's id, a tool message's call id and a tool call's id are random names: a short
    target (four digits) is in one UUID in a few thousand, and not in the message for that."""
    from langchain_core.messages import HumanMessage, ToolMessage

    name = "00000000-5521-4000-8000-000000000000"
    msgs = [HumanMessage("hi", id=name, x_extra="extra-5"),
            AIMessage("", id=name, tool_calls=[{"name": "pay", "args": {"order": "77"}, "id": name}],
                      invalid_tool_calls=[{"name": "pay", "args": "{", "id": name, "error": None}]),
            ToolMessage("done", tool_call_id=name, id=name)]
    text = value_text(msgs)
    assert "5521" not in text
    for part in ("hi", "extra-5", "pay", "77", "done"):
        assert part in text
    # an id in what a message says, or in any other value, is text like the rest
    assert "5521" in value_text([HumanMessage(f"my order is {name}"), {"id": name}])


def test_before_turn_finds_the_state_the_turn_started_from(setup):
    agent, saver, *_ = setup
    fork = forget_by_hand(agent)
    line = ids(saver, T)
    inside_turn2 = line[line.index(fork) + 2]  # the model of turn 2 runs from here
    assert before_turn(saver, T, inside_turn2) == fork
    assert before_turn(saver, T, line[line.index(fork) + 1]) == fork  # turn 2's input checkpoint
    assert before_turn(saver, T, line[1]) is None  # inside the first turn


def _listing(saver) -> dict[str, int]:
    """Count the saver's ``list`` calls per thread (each decodes every checkpoint it yields)."""
    calls: dict[str, int] = {}
    inner = saver.list

    def counted(config, **kw):
        thread = ((config or {}).get("configurable") or {}).get("thread_id")
        calls[thread] = calls.get(thread, 0) + 1
        return inner(config, **kw)

    saver.list = counted
    return calls


def _history(saver, thread: str) -> list:
    return [(t.config["configurable"]["checkpoint_id"], (t.parent_config or {}).get("configurable", {})
             .get("checkpoint_id"), dict(t.metadata), saver.serde.dumps_typed(t.checkpoint["channel_values"]),
             sorted((w[0], w[1]) for w in t.pending_writes or ())) for t in reversed(list(saver.list(config_of(thread))))]


def test_one_reader_decodes_each_thread_once_for_the_audit_and_the_stage(setup):
    agent, saver, *_ = setup
    fork = forget_by_hand(agent)
    calls = _listing(saver)
    reader = ThreadReader(saver, holds)
    total, holding = history_holding(saver, T, holds, reader)  # the audit before
    assert holding > 0
    staged = stage_rewrite(saver, T, fork_checkpoint_id=fork, suffix_thread=SCRATCH, stage_thread=STAGE,
                           holds_target=holds, marker={"unsee_rewritten": "ev1"}, reader=reader)
    assert calls == {T: 1, SCRATCH: 1}  # not once per pass
    assert len(staged.written) == staged.kept + staged.suffix == 11
    reader.written(T)
    assert history_holding(saver, T, holds, reader) == (total, holding) and calls[T] == 2  # read again once written


def test_swapping_in_the_stage_this_process_built_equals_reading_it_back(setup, tmp_path):
    agent, saver, *_ = setup
    fork = forget_by_hand(agent)
    kw = dict(fork_checkpoint_id=fork, suffix_thread=SCRATCH, holds_target=holds, marker={"unsee_rewritten": "ev1"})
    copy_thread(saver, T, "u")  # the same history twice: one swapped from memory, one read back
    copy_thread(saver, SCRATCH, "u~cf-x")
    staged = stage_rewrite(saver, T, stage_thread=STAGE, **kw)
    assert _history(saver, STAGE)[-1][0] == staged.written[-1].config["configurable"]["checkpoint_id"]
    calls = _listing(saver)
    assert swap_in(saver, T, STAGE, staged.written) == 11
    assert STAGE not in calls  # the stage was not read back
    stage_rewrite(saver, "u", stage_thread="u~er-x", **{**kw, "suffix_thread": "u~cf-x",
                                                        "fork_checkpoint_id": fork})
    assert swap_in(saver, "u", "u~er-x") == 11
    mine, read_back = _history(saver, T), _history(saver, "u")
    assert [(p, m.get("source"), m.get("step"), v, w) for _, p, m, v, w in mine] == \
        [(p, m.get("source"), m.get("step"), v, w) for _, p, m, v, w in read_back]
    assert history_holding(saver, T, holds) == (11, 0)
