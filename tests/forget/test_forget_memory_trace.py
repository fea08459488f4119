"""The memory part of a forget's trace (plugins/forget/memory_trace.py): the memory store operations a
forget makes away from an agent's path, as the GenAI conventions' memory spans. The pure layout by
table (a commit's rollback under ``unsee.forget.commit``, an erasure route's deletes under
``unsee.erasure <route>``), then real runs: a forget whose counterfactual never makes a memory write
the recorded run made (the commit's rollback deletes it: a ``delete_memory`` span with keyed hashes
only), and a data subject's erasure, whose namespace delete its result reports."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.support.forget_agents import SECRET, TOOLS, build, say
from unsee import RevocationEvent, Unsee
from unsee.middleware.memory import MemoryChange
from unsee.plugins.forget.report import ForgetReport
from unsee.plugins.forget.trace import ForgetTiming, _Phase, forget_spans
from unsee.plugins.model import ScriptedChatModel, call_id

STORE, RECORD, COUNT = "gen_ai.memory.store.id", "gen_ai.memory.record.id", "gen_ai.memory.record.count"
IDS = "unsee.memory.record.ids"
ROOT, COMMIT, ERASE = "invoke_workflow unsee.forget", "unsee.forget.commit", "unsee.forget.erase"
DEL = MemoryChange("delete_memory", "hmac-sha256:ns1", 1, ("hmac-sha256:r1",), 1320, 1330)
UPS = MemoryChange("upsert_memory", "hmac-sha256:ns1", 2, ("hmac-sha256:r2", "hmac-sha256:r3"), 1340, 1350)
NS_DELETE = MemoryChange("delete_memory", "hmac-sha256:ns2", 3, (), 0, 0)  # a namespace: every record


def _report():
    return ForgetReport(session_id="s1", strategy="B7", event_id="ev-1", target_hash="hmac-sha256:ab", tau=3,
                        closure_size=5, checkpoint_id="ckpt-1", checkpoint_kind="turn", committed=True)


def _erasure(memory):
    routes = [SimpleNamespace(name=n, method="m", copies_before=1, copies_after=0)
              for n in ("langgraph.store", "unsee.records")]
    return SimpleNamespace(receipt=SimpleNamespace(routes=routes), times={"langgraph.store": (1500, 1600)},
                           memory=memory)


# (commit's changes, erasure's changes per route) -> the memory spans: (name, parent name, start, end,
# store id, record count, record id or None, record ids or None)
CASES = [
    pytest.param([DEL, UPS], {}, [
        ("delete_memory", COMMIT, 1320, 1330, "hmac-sha256:ns1", 1, "hmac-sha256:r1", None),
        ("upsert_memory", COMMIT, 1340, 1350, "hmac-sha256:ns1", 2, None, ["hmac-sha256:r2", "hmac-sha256:r3"])],
        id="rollback"),
    pytest.param([], {"langgraph.store": [NS_DELETE]}, [
        ("delete_memory", "unsee.erasure langgraph.store", 1500, 1600, "hmac-sha256:ns2", 3, None, None)],
        id="erasure-route"),
    pytest.param([DEL], {"langgraph.store": [NS_DELETE]}, [
        ("delete_memory", COMMIT, 1320, 1330, "hmac-sha256:ns1", 1, "hmac-sha256:r1", None),
        ("delete_memory", "unsee.erasure langgraph.store", 1500, 1600, "hmac-sha256:ns2", 3, None, None)],
        id="both"),
    pytest.param([], {}, [], id="none"),
]


@pytest.mark.parametrize(("rollback", "erased", "expected"), CASES)
def test_the_memory_spans_of_a_forgets_trace(rollback, erased, expected):
    phases = [_Phase(p, 1000 + 100 * i, 1100 + 100 * i) for i, p in enumerate(["plan", "replay", "commit", "erase"])]
    t = ForgetTiming(start_ns=1000, end_ns=2000, phases=phases, erasure=_erasure(erased), memory=list(rollback))
    specs = forget_spans(_report(), t)
    mem = [s for s in specs if s.attributes.get("gen_ai.operation.name", "").endswith("_memory")]
    got = [(s.name, specs[s.parent].name, s.start_ns, s.end_ns, s.attributes[STORE], s.attributes[COUNT],
            s.attributes.get(RECORD), s.attributes.get(IDS)) for s in mem]
    assert got == expected
    for s in mem:
        assert s.attributes["gen_ai.operation.name"] == s.name  # the span is named by its operation alone
        assert s.attributes["gen_ai.conversation.id"] == "s1" and "unsee.session.id" not in s.attributes
    # a commit the trace has no phase for (a forget that failed before it): its changes are left out
    t.phases = phases[:2]
    assert not [s for s in forget_spans(_report(), t) if s.attributes.get(STORE) == "hmac-sha256:ns1"]


def _policy(messages, tools):
    """Look a ticket up; asked to keep it, note that a card is on file, but only if a looked-up
    ticket shows a card number: the counterfactual (the number forgotten) writes nothing."""
    last = messages[-1]
    if isinstance(last, ToolMessage):
        return AIMessage(content="Result: " + str(last.content))
    text = str(last.content)
    if t := re.search(r"\bT\d\b", text):
        return AIMessage(content="", tool_calls=[{"name": "lookup", "args": {"ticket": t.group(0)},
                                                  "id": call_id(messages), "type": "tool_call"}])
    if "keep it" in text:
        if any(re.search(r"\d{4}-\d{4}", str(m.content)) for m in messages if isinstance(m, ToolMessage)):
            return AIMessage(content="", tool_calls=[{"name": "note", "args": {"fact": "a card is on file"},
                                                      "id": call_id(messages), "type": "tool_call"}])
        return AIMessage(content="nothing to keep")
    return AIMessage(content="ok")


def test_a_forgets_rollback_delete_is_a_delete_memory_span(tmp_path):
    exporter = InMemorySpanExporter()
    u = Unsee(home=tmp_path / "home", span_processors=[SimpleSpanProcessor(exporter)])
    store = u.recorded_store(InMemoryStore())
    agent = create_agent(ScriptedChatModel(policy=_policy), TOOLS, system_prompt="You are support.",
                         middleware=[u.middleware(), u.memory_middleware(store, ("mem", "dana"))],
                         checkpointer=InMemorySaver(), store=store)
    try:
        for text in ["hello", "look at T1", "keep it", "bye"]:
            say(agent, "s", text)
        assert store.inner.get(("mem", "dana"), "note") is not None  # written after the card was seen
        u.flush()
        exporter.clear()
        report = u.forget("s", RevocationEvent(target=SECRET, event_id="ev-mem"), agent=agent)
        assert report.committed and report.erased_clean
        assert store.inner.get(("mem", "dana"), "note") is None  # the counterfactual never wrote it
        u.flush()
        spans = exporter.get_finished_spans()
        (root,) = [s for s in spans if s.name == ROOT]
        mine = [s for s in spans if s.context.trace_id == root.context.trace_id]
        by_id = {s.context.span_id: s for s in mine}
        (deleted,) = [s for s in mine if s.name == "delete_memory"]
        a = deleted.attributes
        assert by_id[deleted.parent.span_id].name == COMMIT
        assert a["gen_ai.operation.name"] == "delete_memory" and a[COUNT] == 1
        assert a[STORE] == u.hasher.hash("mem/dana")  # the namespace as the erasure receipts label it
        assert a[RECORD] == u.hasher.hash("memory:mem/dana/note")  # the record's source id, keyed
        commit = by_id[deleted.parent.span_id]
        assert commit.start_time <= deleted.start_time <= deleted.end_time <= commit.end_time
        assert not [s for s in mine if s.name == "upsert_memory"]  # the rollback put nothing back
        # no namespace, key or value of the store on the forget's trace
        dumped = json.dumps([dict(s.attributes or {}) for s in mine], default=str)
        assert "mem/dana" not in dumped and "card is on file" not in dumped and SECRET not in dumped
    finally:
        u.close()


def test_a_subject_erasures_namespace_delete_is_in_its_result(tmp_path):
    u = Unsee(home=tmp_path / "home")
    agent, store = build(u)
    try:
        for text in ["hello", "remember I like tea", "bye"]:
            say(agent, "s", text)
        store.inner.put(("mem", "dana", "old"), "k", {"text": "older"})  # a namespace under it
        result = u.erase_subject(["s"], [("mem", "dana")], agent=agent)
        assert result.clean
        (change,) = result.memory["langgraph.store"]
        assert (change.op, change.store, change.count, change.records) == (
            "delete_memory", u.hasher.hash("mem/dana"), 2, ())  # every record: no record ids
        assert 0 < change.start_ns <= change.end_ns
        assert store.inner.search(("mem", "dana")) == []
        assert set(result.memory) == {"langgraph.store"}  # the only route that deletes memory records
    finally:
        u.close()


def test_a_subject_erasure_sends_a_trace_with_its_memory_deletes(tmp_path):
    """``u.erase_subject`` is a trace of its own: the root, a span per route of its receipt, the
    namespace it deleted as a ``delete_memory`` span under the store's route, the receipt's digest;
    no namespace, key or thread id in clear."""
    import hashlib

    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    u = Unsee(home=tmp_path / "home", span_processors=[SimpleSpanProcessor(exporter)])
    agent, store = build(u)
    try:
        for text in ["hello", "remember I like tea", "bye"]:
            say(agent, "s", text)
        u.flush()
        exporter.clear()
        result = u.erase_subject(["s"], [("mem", "dana")], agent=agent)
        spans = exporter.get_finished_spans()
        root = next(s for s in spans if s.name == "invoke_workflow unsee.erase_subject")
        mine = [s for s in spans if s.context.trace_id == root.context.trace_id]
        assert root.attributes["gen_ai.workflow.name"] == "unsee.erase_subject"
        assert root.attributes["unsee.erasure.clean"] is result.clean
        routes = {s.name for s in mine if s.name.startswith("unsee.erasure ")}
        assert routes == {f"unsee.erasure {r.name}" for r in result.receipt.routes}
        (delete,) = [s for s in mine if s.name == "delete_memory"]
        parent = next(s for s in mine if s.context.span_id == delete.parent.span_id)
        assert parent.name == "unsee.erasure langgraph.store"
        assert delete.attributes["gen_ai.memory.store.id"] == u.hasher.hash("mem/dana")
        receipt = next(s for s in mine if s.name == "unsee.erase_subject.receipt")
        assert receipt.attributes["unsee.receipt.digest"] == (
            "sha256:" + hashlib.sha256(result.path.read_bytes()).hexdigest())
        dumped = repr([dict(s.attributes) for s in mine])
        assert "dana" not in dumped and "gen_ai.conversation.id" not in dumped
    finally:
        u.close()
