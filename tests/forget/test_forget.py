"""The forget operator on real create_agent agents with a deterministic policy."""

import json

import pytest

from unsee.middleware.semconv import DESCRIBING_SCOPES
from langgraph.store.memory import InMemoryStore

from tests.support.forget_agents import FIRED, SECRET, build, say, state_of
from unsee import (AmbiguousTarget, IncompleteSession, RevocationEvent, SessionNotFound,
                   TargetNotFound, Unsee)
from unsee.plugins.forget import crash_at
from unsee.plugins.forget.errors import InjectedCrash, UnknownStrategy

SCENARIOS = {
    "tool_return": ["hello", "look at T1", "thanks", "refund A7 please", "look at T2", "bye"],
    "user_input": ["hello", f"my card is {SECRET}, look at T2", "refund A7 please", "remember I like tea", "bye"],
    "memory": ["hello", "look at T2", "refund A7 please", "bye"],
}


def record(tmp_path, name, scenario, summarize=False, window=None):
    u = Unsee(home=tmp_path / name)
    inner = InMemoryStore()
    if scenario == "memory":
        inner.put(("mem", "dana"), "card", {"text": f"card {SECRET}"})
    agent, store = build(u, summarize=summarize, store=None, window=window)
    store.inner = inner
    for text in SCENARIOS[scenario]:
        say(agent, "s", text)
    return u, agent, store


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
@pytest.mark.parametrize("summarize,window", [(False, None), (True, None), (False, 1), (True, 1), (True, 2)])
def test_b7_equals_b5(tmp_path, scenario, summarize, window):
    """``window``: the model sees the last user turns only (a view-only trim outer to unsee's
    recording): the forget keeps the messages the view left out (the state holds them)."""
    results = {}
    for strategy in ("B7", "B5", "B5'"):
        u, agent, store = record(tmp_path, f"{strategy}-{scenario}", scenario, summarize, window)
        fired_before = len(FIRED)
        report = u.forget("s", RevocationEvent(target=SECRET), strategy)
        assert report.committed and len(FIRED) == fired_before  # never fires again
        results[strategy] = (state_of(agent, store, "s"), report)
        u.close()
    (b7, r7), (b5, r5), (b5p, r5p) = results["B7"], results["B5"], results["B5'"]
    assert b7 == b5 == b5p
    assert SECRET not in json.dumps(b7, default=str)
    # B7 re-decodes no more turns than B5' and B5, and reuses the clean prefix
    assert r7.model_turns_decoded <= r5p.model_turns_decoded <= r5.model_turns_decoded
    assert r7.transitions_replayed <= r5.transitions_replayed


def test_a_view_only_window_keeps_the_messages_it_hides(tmp_path):
    """The model sees the last user turn only (an outer ``request.override``): the model
    turns' prompts are the window, the state is everything, and B7 forks from the state. The
    turns after the one that read the target repeat their recorded prompts: B7 re-materialises
    them after the divergence (resync) instead of decoding them again."""
    turns = ["hello", "any news?", "look at T1", "thanks", "look at T2", "bye"]
    states = {}
    for strategy in ("B7", "B5"):
        u = Unsee(home=tmp_path / strategy)
        agent, store = build(u, window=1)
        for text in turns:
            say(agent, "s", text)
        report = u.forget("s", RevocationEvent(target=SECRET), strategy)
        states[strategy] = state_of(agent, store, "s")
        if strategy == "B7":  # decoded: the turn that read T1; re-materialised: the call before, 4 after
            assert (report.model_turns_decoded, report.model_turns_rematerialised) == (1, 5)
        u.close()
    assert states["B7"] == states["B5"]
    assert [t for kind, t, _ in states["B7"][0] if kind == "HumanMessage"] == turns


def test_b7_leaves_no_trace_in_live_state_records_and_store(tmp_path):
    u, agent, store = record(tmp_path, "x", "tool_return", summarize=True)
    assert SECRET in json.dumps(state_of(agent, store, "s"), default=str)
    report = u.forget("s", RevocationEvent(target=SECRET, reason="user request"))
    assert report.tau >= 1 and report.closure_size > 1 and report.checkpoint_id
    assert report.model_turns_rematerialised >= 1  # the turn before tau was not decoded again
    norm, items = state_of(agent, store, "s")
    assert SECRET not in json.dumps(norm) and SECRET not in json.dumps(items)
    with pytest.raises(TargetNotFound):
        u.graph("s").locate(SECRET)
    assert not any(SECRET in c for c in u.store.contents("s").values())
    # the agent continues from the counterfactual state
    out = say(agent, "s", "look at T2")
    assert "blender" in out["messages"][-1].content and SECRET not in out["messages"][-1].content
    assert len(u.graph("s").of_type(__import__("unsee").ArtifactType.USER_INPUT)) == 7


def test_orphaned_side_effect_is_reported(tmp_path):
    """A refund whose arguments quoted the target fired; the counterfactual makes a different call."""
    u, agent, store = record(tmp_path, "o", "tool_return")
    n = len(FIRED)
    report = u.forget("s", RevocationEvent(target=SECRET))
    assert len(FIRED) == n
    orphans = report.orphaned_side_effects
    # the report says where the target went (a keyed hash), never reprints it
    assert [o.tool for o in orphans] == ["refund"] and SECRET not in repr(orphans)
    assert "[erased hmac-sha256:" in orphans[0].args["reason"]
    assert orphans[0].result and "refund of A7" in orphans[0].result
    assert [d.tool for d in report.deferred_side_effects] == ["refund"]  # the clean call is deferred
    assert SECRET not in json.dumps(report.deferred_side_effects[0].args)


def test_memory_entry_sanitizes_the_store_item(tmp_path):
    u, agent, store = record(tmp_path, "m", "memory")
    assert u.graph("s").locate(SECRET).artifact_type.value == "memory_read"
    u.forget("s", RevocationEvent(target=SECRET))
    item = store.inner.get(("mem", "dana"), "card")
    assert item is not None and SECRET not in str(item.value)


def test_external_fires_once_across_forgets_crashes_and_retries(tmp_path):
    u, agent, store = record(tmp_path, "e", "user_input")
    n = len(FIRED)
    for step in ("fork", "replay:turn:", "replay:done"):
        with crash_at(step), pytest.raises(InjectedCrash):
            u.forget("s", RevocationEvent(target=SECRET))
        assert len(FIRED) == n
    ev = RevocationEvent(target=SECRET)
    with crash_at("commit:state"), pytest.raises(InjectedCrash):
        u.forget("s", ev)
    u.forget("s", ev)  # journaled: the retry rolls the commit forward
    assert len(FIRED) == n
    # forgetting something else later still never refires the refund
    u.forget("s", RevocationEvent(target="I like tea"))
    assert len(FIRED) == n


@pytest.mark.parametrize("step", ["plan", "fork", "replay:turn:", "replay:done"])
def test_crash_before_commit_leaves_old_state_and_retry_matches(tmp_path, step):
    u, agent, store = record(tmp_path, "c", "tool_return")
    before = state_of(agent, store, "s")
    graph_before = [a.id for a in u.graph("s")]
    ev = RevocationEvent(target=SECRET)
    with crash_at(step), pytest.raises(InjectedCrash):
        u.forget("s", ev)
    assert state_of(agent, store, "s") == before
    assert [a.id for a in u.graph("s")] == graph_before
    u.forget("s", ev)
    after = state_of(agent, store, "s")
    u2, agent2, store2 = record(tmp_path, "c2", "tool_return")
    u2.forget("s", RevocationEvent(target=SECRET))
    assert after == state_of(agent2, store2, "s")


@pytest.mark.parametrize("step", ["commit:begin", "commit:state", "commit:store", "commit:records"])
def test_crash_during_commit_rolls_forward(tmp_path, step):
    u, agent, store = record(tmp_path, "r", "tool_return")
    ev = RevocationEvent(target=SECRET)
    with crash_at(step), pytest.raises(InjectedCrash):
        u.forget("s", ev)
    u.forget("s", ev)  # same event id: finishes the interrupted commit
    u2, agent2, store2 = record(tmp_path, "r2", "tool_return")
    u2.forget("s", RevocationEvent(target=SECRET))
    assert state_of(agent, store, "s") == state_of(agent2, store2, "s")
    with pytest.raises(TargetNotFound):
        u.graph("s").locate(SECRET)


def test_bad_input_changes_nothing(tmp_path):
    u, agent, store = record(tmp_path, "b", "tool_return")
    before = (state_of(agent, store, "s"), [a.id for a in u.graph("s")])
    with pytest.raises(SessionNotFound):
        u.forget("nope", RevocationEvent(target=SECRET))
    with pytest.raises(TargetNotFound):
        u.forget("s", RevocationEvent(target="not-in-session"))
    with pytest.raises(ValueError):
        RevocationEvent(target="  ")
    with pytest.raises(UnknownStrategy):
        u.forget("s", RevocationEvent(target=SECRET), strategy="B42")
    with pytest.raises(NotImplementedError):
        u.forget("s", RevocationEvent(target=SECRET), strategy="B9")
    assert (state_of(agent, store, "s"), [a.id for a in u.graph("s")]) == before


def test_ambiguous_source(tmp_path):
    u = Unsee(home=tmp_path / "amb")
    agent, store = build(u)
    say(agent, "s", f"my card is {SECRET}")
    say(agent, "s", "look at T1")
    with pytest.raises(AmbiguousTarget) as e:
        u.forget("s", RevocationEvent(target=SECRET))
    assert set(e.value.sources) == {"user", "tool:lookup"}
    report = u.forget("s", RevocationEvent(target=SECRET, source="user"), dry_run=True)
    assert report.entry_type == "user_input"


def test_incomplete_session_refused(tmp_path, monkeypatch):
    u, agent, store = record(tmp_path, "i", "tool_return")
    u.store.mark_failure("s", "simulated")
    with pytest.raises(IncompleteSession):
        u.forget("s", RevocationEvent(target=SECRET))


def test_dry_run_changes_nothing(tmp_path):
    u, agent, store = record(tmp_path, "d", "tool_return")
    before = state_of(agent, store, "s")
    plan = u.forget("s", RevocationEvent(target=SECRET), dry_run=True)
    assert plan.tau >= 1 and plan.checkpoint_id and plan.model_turns_to_rematerialise
    assert [s.tool for s in plan.side_effects_at_risk] == ["refund"]
    assert state_of(agent, store, "s") == before


@pytest.mark.parametrize("strategy", ["B0", "B1", "B2", "B3", "B4", "B6"])
def test_editing_baselines_run(tmp_path, strategy):
    u, agent, store = record(tmp_path, strategy, "tool_return", summarize=True)
    report = u.forget("s", RevocationEvent(target=SECRET), strategy)
    assert report.strategy == strategy
    norm, _ = state_of(agent, store, "s")
    live = json.dumps(norm)
    if strategy in ("B0", "B1", "B2"):
        assert SECRET in live
    if strategy in ("B4", "B6"):
        assert SECRET not in live


def _messages(agent):
    return agent.get_state({"configurable": {"thread_id": "s"}}).values["messages"]


def test_b1_deletes_the_entry_record_only(tmp_path):
    u, agent, store = record(tmp_path, "B1x", "tool_return")
    entry = u.graph("s").locate(SECRET).artifact_id
    assert SECRET in u.store.content("s", entry)
    live_before = state_of(agent, store, "s")
    others_before = {a: c for a, c in u.store.contents("s").items() if a != entry}
    report = u.forget("s", RevocationEvent(target=SECRET), "B1")
    assert report.strategy == "B1" and report.committed
    assert u.store.content("s", entry) is None  # the entry's recorded content is gone from the vault
    assert {a: c for a, c in u.store.contents("s").items() if a != entry} == others_before
    assert state_of(agent, store, "s") == live_before  # the live state is unchanged: it still holds z
    assert SECRET in json.dumps(live_before)


def test_b3_redacts_the_entry_only(tmp_path):
    from langchain_core.messages import AIMessage, ToolMessage

    u, agent, store = record(tmp_path, "B3x", "tool_return")
    entry = u.graph("s").locate(SECRET).artifact_id
    before = {m.id: m for m in _messages(agent)}
    (tau_msg,) = [m for m in before.values() if isinstance(m, ToolMessage) and m.content.startswith("ticket T1")]
    assert SECRET in tau_msg.content
    report = u.forget("s", RevocationEvent(target=SECRET), "B3")
    assert report.strategy == "B3" and report.committed
    after = {m.id: m for m in _messages(agent)}
    assert list(after) == list(before)  # same messages, same order: only edited in place
    assert after[tau_msg.id].content == tau_msg.content.replace(SECRET, "")  # the entry message is redacted
    assert SECRET not in u.store.content("s", entry) and "ticket T1: card" in u.store.content("s", entry)
    # derived artifacts still hold the target: the reply that quoted it, the refund's arguments and return
    derived = [m for i, m in after.items() if i != tau_msg.id and SECRET in json.dumps(m.model_dump(), default=str)]
    assert any(isinstance(m, AIMessage) and SECRET in str(m.content) for m in derived)
    assert any(SECRET in c["args"].get("reason", "") for m in derived for c in getattr(m, "tool_calls", []))
    assert any(isinstance(m, ToolMessage) and "refund of A7" in m.content for m in derived)
    assert all(after[i] == m for i, m in before.items() if i != tau_msg.id)  # nothing else changed
    assert any(SECRET in c for a, c in u.store.contents("s").items() if a != entry)  # derived records too


def test_forget_waits_for_a_running_agent(tmp_path):
    from unsee.middleware.errors import SessionBusy

    u, agent, store = record(tmp_path, "w", "tool_return")
    u.recorder.activity.mark_running("s", True)
    with pytest.raises(SessionBusy):
        u.forget("s", RevocationEvent(target=SECRET), wait=False)
    import threading

    threading.Timer(0.3, lambda: u.recorder.activity.mark_running("s", False)).start()
    assert u.forget("s", RevocationEvent(target=SECRET)).committed


def _sandbox_agent(u, checkpointer=None):
    from langchain.agents import create_agent
    from langgraph.checkpoint.memory import InMemorySaver

    from langchain_core.messages import AIMessage, ToolMessage

    from tests.support.forget_agents import policy as base_policy
    from unsee.plugins.model import ScriptedChatModel, call_id

    def policy(messages, tools):
        last = messages[-1]
        if not isinstance(last, ToolMessage) and "save" in str(last.content):
            prior = [str(m.content) for m in messages if isinstance(m, ToolMessage) and m.content != "noted"]
            return AIMessage(content="", tool_calls=[{"name": "note", "args": {"fact": prior[-1] if prior else "-"},
                                                      "id": call_id(messages), "type": "tool_call"}])
        return base_policy(messages, tools)

    @u.tool(effect="read", sandboxed=True)
    def lookup(ticket: str, env) -> str:
        """Look up a ticket."""
        return env.read_file(f"tickets/{ticket}.txt").decode()

    @u.tool(effect="write", sandboxed=True)
    def note(fact: str, env) -> str:
        """Append a fact to the case file."""
        old = env.read_file("case.txt").decode() if b"case.txt" in env.exec("ls").stdout else ""
        env.write_file("case.txt", (old + fact + "\n").encode())
        return "noted"

    return create_agent(ScriptedChatModel(policy=policy), [lookup, note], system_prompt="support",
                        middleware=[u.middleware()], checkpointer=checkpointer or InMemorySaver())


@pytest.mark.parametrize("backend", ["local", pytest.param("docker", marks=pytest.mark.docker)])
def test_b7_equals_b5_with_sandbox_files(tmp_path, backend):
    # docker: the default image (unsee-sandbox:latest) is built by scripts/docker-up.sh;
    # a missing one fails here rather than skipping (tests/conftest.py skips without a daemon)
    results = {}
    for strategy in ("B7", "B5"):
        def setup(session, env):
            env.write_file("tickets/T1.txt", f"ticket T1: card {SECRET}".encode())
            env.write_file("tickets/T2.txt", b"ticket T2: blender broken")

        u = Unsee(home=tmp_path / strategy, sandbox=backend, sandbox_setup=setup)
        agent = _sandbox_agent(u)
        for text in ["hello", "look at T1", "save that", "look at T2", "bye"]:
            say(agent, "s", text)
        assert any(c.env_snapshot_id for c in u.graph("s").checkpoints)
        u.forget("s", RevocationEvent(target=SECRET), strategy)
        msgs = agent.get_state({"configurable": {"thread_id": "s"}}).values["messages"]
        case = u.environments.env("s").read_file("case.txt").decode()
        results[strategy] = ([(type(m).__name__, str(m.content)) for m in msgs], case)
        u.close()
    assert results["B7"] == results["B5"]
    assert SECRET not in json.dumps(results["B7"])


@pytest.mark.parametrize("backend", ["local", pytest.param("docker", marks=pytest.mark.docker)])
def test_second_forget_in_a_later_process_restores_snapshots_the_first_replay_took(tmp_path, backend):
    """A committed replay's shadow becomes the session's sandbox; the snapshots it took are on the
    new checkpoints, so they must outlive the process (regression: the second forget, run from
    another process, failed with SnapshotNotFound because the shadow's snapshots were temporary)."""
    import sqlite3

    from langgraph.checkpoint.sqlite import SqliteSaver

    def setup(session, env):
        env.write_file("tickets/T1.txt", f"ticket T1: card {SECRET}".encode())
        env.write_file("tickets/T2.txt", b"ticket T2: blender broken, call 555-0199")

    def open_agent():
        u = Unsee(home=tmp_path / "h", sandbox=backend, sandbox_setup=setup)
        conn = sqlite3.connect(tmp_path / "lg.sqlite", check_same_thread=False)
        return u, _sandbox_agent(u, SqliteSaver(conn)), conn

    u, agent, conn = open_agent()
    for text in ["hello", "look at T1", "save that", "look at T2", "save that", "bye"]:
        say(agent, "s", text)
    u.close(), conn.close()
    u, agent, conn = open_agent()  # the first forget, from a new process
    assert u.forget("s", RevocationEvent(target=SECRET), agent=agent).committed
    u.close(), conn.close()
    u, agent, conn = open_agent()  # the second one, from yet another process, forks after the first tau
    report = u.forget("s", RevocationEvent(target="555-0199"), agent=agent)
    assert report.committed
    case = u.environments.env("s").read_file("case.txt").decode()
    assert "555-0199" not in case and SECRET not in case
    u.close(), conn.close()


def test_rebuilt_spans_keep_the_session_id(tmp_path):
    """A trace backend searched by the session id finds the whole rebuilt session: spans the
    replay recorded (in its scratch thread) carry the session's id, and the scratch thread and
    the event in attributes of their own."""
    u, agent, store = record(tmp_path, "spans", "tool_return")
    ev = RevocationEvent(target=SECRET)
    u.forget("s", ev)
    every = u.store.spans("s")
    assert every and {sp.attributes["gen_ai.conversation.id"] for sp in every} == {"s"}
    # the session's records, and the forget's own trace kept with them (not a record: no session id)
    spans = [sp for sp in every if sp.scope not in DESCRIBING_SCOPES]
    assert {sp.name for sp in every if sp.scope == "unsee.forget"} >= {"invoke_workflow unsee.forget"}
    assert {sp.attributes["unsee.session.id"] for sp in spans} == {"s"}
    rebuilt = [sp for sp in spans if "unsee.replay.thread" in sp.attributes]
    assert rebuilt and all(sp.attributes["unsee.replay.thread"].startswith("s~cf-") for sp in rebuilt)
    assert {sp.attributes["unsee.replay.event"] for sp in rebuilt} == {ev.event_id}
