"""The span processor takes the records the recorder put on each span as they were built,
and they are exactly what decoding the span would give (the rows the store writes are the same)."""

from __future__ import annotations

from langchain.agents.middleware import SummarizationMiddleware
from langgraph.checkpoint.memory import InMemorySaver

from tests.support.recording_agents import make_agent, policy, say
from unsee.middleware import processor
from unsee.middleware.built_records import BuiltRecords
from unsee.middleware.store_schema import artifact_row, checkpoint_row
from unsee.plugins.model import ScriptedChatModel


def test_the_records_taken_are_the_records_decoded(u, monkeypatch):
    seen = {"built": 0, "decoded": 0}
    plain = processor.batch_from_span

    def both(span, built=None):
        got = plain(span, built)
        if built is None:
            seen["decoded"] += 1
            return got
        seen["built"] += 1
        decoded = plain(span, None)
        assert sorted(map(artifact_row, got.artifacts)) == sorted(map(artifact_row, decoded.artifacts)), span.name
        assert sorted(map(checkpoint_row, got.checkpoints)) == sorted(map(checkpoint_row, decoded.checkpoints))
        assert got.commits == decoded.commits and got.tokenizer == decoded.tokenizer
        return got

    monkeypatch.setattr(processor, "batch_from_span", both)
    summarize = SummarizationMiddleware(ScriptedChatModel(policy=policy), trigger=("messages", 6),
                                        keep=("messages", 2), summarizer=lambda msgs: " / ".join(
                                            str(m.content) for m in msgs))
    agent = make_agent(u, InMemorySaver(), extra_middleware=[summarize])
    for text in ("look at T1", "hello", "look at T2 and T3", "hello again"):
        say(agent, "b", text)
    u.flush()
    assert seen["built"] > 5, seen
    g = u.graph("b")
    assert g.of_type(*{a.type for a in g}) and g.checkpoints
    assert not u.store.built._by_span, seen  # (every note was taken when its span ended)
    assert seen["decoded"] == 0 or seen["built"] > seen["decoded"], seen


def test_notes_are_bounded_and_taken_once():
    class Ctx:
        def __init__(self, t, s):
            self.trace_id, self.span_id = t, s

    class Span:
        def __init__(self, t, s):
            self._c = Ctx(t, s)

        def get_span_context(self):
            return self._c

    b = BuiltRecords(limit=3)
    for i in range(5):
        b.note(Span(1, i), f"r{i}")
    b.note(Span(1, 4), "r4b")
    assert b.take(1, 0) is None and b.take(1, 1) is None  # (the oldest dropped: decoded instead)
    assert b.take(1, 4) == ["r4", "r4b"] and b.take(1, 4) is None
