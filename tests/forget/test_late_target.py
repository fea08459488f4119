"""A late target's forget does the suffix's work where unsee can choose (issue 32).

The session's LangGraph state is loaded no more often than the fork and the
write-back need (no load to check that the fork checkpoint exists, none to
read a mark a fresh commit cannot have written); the plan walks the suffix,
not the session; and the forget's result is the one it was (B7 == B5).
"""

from __future__ import annotations

from collections import Counter

import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from unsee import RevocationEvent, Unsee
from unsee.middleware.graph import ProvenanceGraph
from unsee.middleware.records import Artifact, ArtifactType
from unsee.plugins.forget.thread import has_checkpoint
from unsee.plugins.model import ScriptedChatModel

from tests.support.forget_agents import SECRET, TOOLS, policy


class CountingSaver(InMemorySaver):
    """An ``InMemorySaver`` that counts the states it loads (a checkpoint's channel values), per thread."""

    def __init__(self):
        super().__init__()
        self.loads: Counter = Counter()

    def _load_blobs(self, thread_id, checkpoint_ns, versions):
        self.loads[thread_id] += 1
        return super()._load_blobs(thread_id, checkpoint_ns, versions)


class OwnReads(InMemorySaver):
    """A saver that reads its own way (``get_tuple`` overridden)."""

    def get_tuple(self, config):
        return super().get_tuple(config)


def _agent(u: Unsee, saver):
    return create_agent(ScriptedChatModel(policy=policy), TOOLS, system_prompt="You are support.",
                        middleware=[u.middleware()], checkpointer=saver)


TURNS = ["Hello, I'm Dana.", "Please look up T2.", f"My card is {SECRET}.", "Please look up T2.", "thanks"]


def _run(agent, thread: str = "t1") -> None:
    for text in TURNS:
        agent.invoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": thread}})


def _live(agent, thread: str = "t1") -> list[tuple[str, str]]:
    msgs = agent.get_state({"configurable": {"thread_id": thread}}).values["messages"]
    return [(type(m).__name__, str(m.content)) for m in msgs]


def test_b7_loads_the_session_state_only_to_fork_and_write_back(tmp_path):
    worlds = {}
    for strategy in ("B5", "B7"):
        u = Unsee(home=tmp_path / strategy)
        saver = CountingSaver()
        agent = _agent(u, saver)
        _run(agent)
        u.flush()
        saver.loads.clear()
        report = u.forget("t1", RevocationEvent(target=SECRET), strategy, erase=False)
        assert report.committed
        if strategy == "B7":
            assert report.checkpoint_kind == "turn"
            # the check before anything changes (the live state: the agent's checkpointer holds the
            # thread, no interrupt pending, no input the records lack), the fork checkpoint
            # (fork_state) and the write-back (update_state): nothing else; before, the fork's
            # existence check and the commit's mark each loaded a whole state too
            assert saver.loads["t1"] == 3, saver.loads
        worlds[strategy] = _live(agent)
        assert SECRET not in repr(worlds[strategy])
        u.close()
    assert worlds["B7"] == worlds["B5"]


def test_has_checkpoint_in_memory_and_sqlite(tmp_path):
    import sqlite3

    from langgraph.checkpoint.sqlite import SqliteSaver

    conn = sqlite3.connect(tmp_path / "lg.sqlite", check_same_thread=False)
    for saver in (InMemorySaver(), SqliteSaver(conn)):
        u = Unsee(home=tmp_path / type(saver).__name__)
        agent = _agent(u, saver)
        agent.invoke({"messages": [HumanMessage("Hello")]}, {"configurable": {"thread_id": "t1"}})
        ids = [t.config["configurable"]["checkpoint_id"] for t in saver.list({"configurable": {"thread_id": "t1"}})]
        assert ids and all(has_checkpoint(saver, "t1", i) is True for i in ids)
        assert has_checkpoint(saver, "t1", "no-such-checkpoint") is False
        assert has_checkpoint(saver, "t2", ids[0]) is False
        assert has_checkpoint(saver, "t1", ids[0], "some-namespace") is False
        if isinstance(saver, InMemorySaver):
            assert "t2" not in saver.storage  # (asking does not make the thread)
        u.close()
    conn.close()
    # a saver that reads its own way: unknown (the forget loads the checkpoint instead)
    assert has_checkpoint(OwnReads(), "t1", "x") is None
    assert has_checkpoint(object(), "t1", "x") is None


def _art(i: int, seq: int) -> Artifact:
    return Artifact(id=f"a{i}", session_id="s", type=ArtifactType.USER_INPUT, parents=(), step=seq, turn=seq,
                    seq=seq, content_hash="h")


@pytest.mark.parametrize("seqs", [[1, 2, 3, 5, 8, 13], [2, 2, 3, 3, 3, 7], [4]])
def test_since_seq_is_the_suffix(seqs):
    g = ProvenanceGraph.from_records([_art(i, s) for i, s in enumerate(seqs)], contents={})
    for at in range(0, max(seqs) + 2):
        assert [a.id for a in g.since_seq(at)] == [a.id for a in g if a.seq >= at]
    # an extended graph and the graph it was extended from each see their own artifacts
    more = g.extended([_art(100, max(seqs) + 1), _art(101, max(seqs) + 4)])
    for at in range(0, max(seqs) + 6):
        assert [a.id for a in more.since_seq(at)] == [a.id for a in more if a.seq >= at]
        assert [a.id for a in g.since_seq(at)] == [a.id for a in g if a.seq >= at]


def test_since_seq_with_repeated_ids():
    arts = [_art(0, 1), _art(1, 2), _art(0, 3), _art(2, 4)]  # a0 recorded twice
    g = ProvenanceGraph.from_records(arts, contents={})
    for at in range(0, 6):
        assert [a.id for a in g.since_seq(at)] == [a.id for a in g if a.seq >= at]
