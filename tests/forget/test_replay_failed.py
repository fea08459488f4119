"""A replay that fails in the user's own code (issue 31): ``ReplayFailed``, state unchanged.

A forget's replay calls the agent's model and tools again for the replayed turns. A
scripted test model with a fixed list of replies that runs out there must end the forget
with one typed error naming the session, the recorded turn and the call, the original
exception as its cause, and nothing changed: the thread's head checkpoint, the store, the
recorded sessions and graph are as before, so the same forget succeeds once the model has
replies again.
"""

from __future__ import annotations

import logging
import os
import sys

import pytest
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from tests.support.cli_helpers import assert_one_line_error, run
from tests.support.forget_agents import SECRET, note
from unsee import RevocationEvent, Unsee
from unsee.plugins.forget.errors import ReplayFailed

CFG = {"configurable": {"thread_id": "s"}}
TURNS = ["hello", f"my card is {SECRET}", "remember tea"]


class FakeToolModel(GenericFakeChatModel):
    """GenericFakeChatModel accepting tools (its replies carry the tool calls)."""

    def bind_tools(self, tools, **kw):
        return self


def _replies() -> list[AIMessage]:
    """What recording TURNS takes: one reply a turn, turn 3 a write tool call and its answer."""
    return [AIMessage("hi"), AIMessage("noted"),
            AIMessage("", tool_calls=[{"name": "note", "args": {"fact": "tea"}, "id": "c1", "type": "tool_call"}]),
            AIMessage("done")]


def _state(u: Unsee, agent, store) -> tuple:
    snap = agent.get_state(CFG)
    msgs = [(type(m).__name__, str(m.content), m.id) for m in snap.values["messages"]]
    items = sorted((tuple(i.namespace), i.key, str(i.value)) for i in store.inner.search((), limit=100))
    graph = u.graph("s")
    return (snap.config["configurable"]["checkpoint_id"], msgs, items, u.sessions(),
            [(a.id, a.content_hash) for a in graph], [c.id for c in graph.checkpoints])


def test_a_model_out_of_replies_in_the_replay_is_replay_failed_and_changes_nothing(tmp_path, caplog):
    u = Unsee(home=tmp_path / "h")
    store = u.recorded_store(InMemoryStore())
    # The replay forks at turn 2 (tau) and decodes turns 2 and 3 again: reply #1 repeats the
    # record, reply #2 writes another fact (a write tool runs again, into the replay's store
    # overlay), then the model has no reply #3 for turn 3's answer.
    model = FakeToolModel(messages=iter(_replies() + [AIMessage("noted"), AIMessage("", tool_calls=[
        {"name": "note", "args": {"fact": "coffee"}, "id": "c2", "type": "tool_call"}])]))
    agent = create_agent(model, [note], middleware=[u.middleware()], checkpointer=InMemorySaver(), store=store)
    for text in TURNS:
        agent.invoke({"messages": [HumanMessage(text)]}, CFG)
    before = _state(u, agent, store)

    with caplog.at_level(logging.DEBUG, logger="unsee.forget"), pytest.raises(ReplayFailed) as ei:
        u.forget("s", RevocationEvent(target=SECRET))
    e = ei.value
    assert (e.session_id, e.turn, e.strategy, e.exit_code) == ("s", 3, "B7", 4)
    assert isinstance(e, RuntimeError) and type(e.__cause__) is StopIteration and e.original is e.__cause__
    msg = str(e)
    assert "session 's'" in msg and "turn 3" in msg and "reply #3" in msg and "StopIteration" in msg
    assert "\n" not in msg
    assert any(r.exc_info for r in caplog.records if r.name == "unsee.forget")  # the traceback, at DEBUG
    assert _state(u, agent, store) == before  # head checkpoint, messages, store, sessions, graph

    # nothing was half-done: with replies for the replay the same forget commits
    model.messages = iter([AIMessage("noted"), *_replies()[2:]])
    report = u.forget("s", RevocationEvent(target=SECRET))
    assert report.committed and SECRET not in str(agent.get_state(CFG).values["messages"])
    u.close()


AGENT_MODULE = '''
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from unsee import Unsee
from unsee.core import resolve_home

# records the session when the CLI imports it: one reply a turn, none left for a replay
u = Unsee(home=resolve_home())
agent = create_agent(GenericFakeChatModel(messages=iter([AIMessage("hi"), AIMessage("noted"), AIMessage("ok")])),
                     [], middleware=[u.middleware()], checkpointer=InMemorySaver())
for text in {turns!r}:
    agent.invoke({{"messages": [HumanMessage(text)]}}, {{"configurable": {{"thread_id": "s"}}}})
'''


@pytest.mark.skipif(os.environ.get("UNSEE_TEST_STORE") == "postgres",
                    reason="the CLI finds the home by unsee's SQLite files (make test's first pass runs it)")
def test_the_cli_says_replay_failed_in_one_line_and_exits_4(tmp_path, capsys, monkeypatch):
    name = f"h1_replay_agent_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(AGENT_MODULE.format(turns=TURNS))
    monkeypatch.chdir(tmp_path)  # (the CLI imports --agent modules from the working directory)
    Unsee(home=tmp_path / "h").close()  # the command acts on an existing home only
    try:
        code, out, err = run(capsys, "--home", tmp_path / "h", "forget", "s", "--target", SECRET,
                             "--agent", f"{name}:agent")
        assert code == 4, err  # 4: the operation failed and changed nothing
        line = assert_one_line_error(err)
        assert "session 's'" in line and "turn 2" in line and "StopIteration" in line
        assert sys.modules[name].u.sessions()[0].session_id == "s"
    finally:
        mod = sys.modules.pop(name, None)
        if mod is not None:
            mod.u.close()
