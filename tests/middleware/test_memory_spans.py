"""Memory spans after the GenAI conventions' memory span (``semconv.MEMORY``), one table row per
span kind, on a real ``create_agent`` run: a tool writes the row's ops through unsee's
``RecordingStore`` (a put, a delete, a batch, a batch of mixed kinds and namespaces), the memory
injection searches a namespace. Each span is named by its operation alone and carries the
conventions' attribute names; the artifacts stay in ``unsee.artifact`` events, so the provenance
store reads the same records back; no payload on a span unless content is opted in, and then only
as ``unsee.content`` (the conventions' opt-in attributes are never set)."""

from __future__ import annotations

import json

import pytest
from langchain.agents import create_agent
from langchain.tools import ToolRuntime
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.base import PutOp
from langgraph.store.memory import InMemoryStore
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from unsee import ArtifactType, Unsee
from unsee.middleware import semconv as sc
from unsee.plugins.model import ScriptedChatModel, call_id

U1, U2, INJ = ("mem", "u1"), ("mem", "u2"), ("inj",)
TEA = {"text": "likes tea"}
#: the conventions' names (open-telemetry/semantic-conventions-genai at 002c8a6: registry.yaml)
STORE, RECORD, COUNT = "gen_ai.memory.store.id", "gen_ai.memory.record.id", "gen_ai.memory.record.count"
NEVER = ("gen_ai.memory.query.text", "gen_ai.memory.records")

# the ops one tool call writes -> (span name = gen_ai.operation.name, store id, record count,
# record id or None) per span, in order, and the artifacts recorded (source id, deleted)
WRITES = [
    pytest.param([PutOp(U1, "pref", TEA)], [("upsert_memory", "mem/u1", 1, "pref")],
                 [("memory:mem/u1/pref", False)], id="put"),
    pytest.param([PutOp(U1, "pref", None)], [("delete_memory", "mem/u1", 1, "pref")],
                 [("memory:mem/u1/pref", True)], id="delete"),
    pytest.param([PutOp(U1, "a", TEA), PutOp(U1, "b", TEA)], [("upsert_memory", "mem/u1", 2, None)],
                 [("memory:mem/u1/a", False), ("memory:mem/u1/b", False)], id="batch"),
    pytest.param([PutOp(U1, "a", TEA), PutOp(U1, "b", None), PutOp(U2, "c", TEA), PutOp(U1, "d", TEA)],
                 [("upsert_memory", "mem/u1", 2, None), ("delete_memory", "mem/u1", 1, "b"),
                  ("upsert_memory", "mem/u2", 1, "c")],
                 [("memory:mem/u1/a", False), ("memory:mem/u1/b", True), ("memory:mem/u2/c", False),
                  ("memory:mem/u1/d", False)], id="mixed"),
]


def _run(tmp_path, ops, *, seed=(), content=False):
    """One turn of a real agent whose tool writes ``ops`` through the recorded store; the memory
    injection reads ``INJ`` (``seed``: items put there first, past the recorder)."""
    exporter = InMemorySpanExporter()
    u = Unsee(home=tmp_path / "home", span_processors=[SimpleSpanProcessor(exporter)], content_in_spans=content)
    inner = InMemoryStore()
    for key, value in seed:
        inner.put(INJ, key, value)
    store = u.recorded_store(inner)

    @tool
    def write(runtime: ToolRuntime) -> str:
        """Write the case's ops."""
        runtime.store.batch(ops)
        return "written"

    write.metadata = {"unsee.effect": "write"}

    def pol(messages, tools):
        if isinstance(messages[-1], ToolMessage):
            return AIMessage(content="done")
        if not ops:
            return AIMessage(content="nothing to write")
        return AIMessage(content="", tool_calls=[{"name": "write", "args": {}, "id": call_id(messages),
                                                  "type": "tool_call"}])

    agent = create_agent(ScriptedChatModel(policy=pol), [write], system_prompt="sys",
                         middleware=[u.middleware(), u.memory_middleware(store, INJ)],
                         checkpointer=InMemorySaver(), store=store)
    agent.invoke({"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": "m"}})
    u.flush()
    return u, exporter.get_finished_spans()


def _memory(spans):
    return [s for s in spans if s.attributes.get(sc.GEN_AI_OPERATION) in sc.MEMORY_OPERATIONS]


def _events(span):
    return [dict(e.attributes) for e in span.events if e.name == sc.ARTIFACT_EVENT]


@pytest.mark.parametrize(("ops", "expected", "artifacts"), WRITES)
def test_write_spans(tmp_path, ops, expected, artifacts):
    u, spans = _run(tmp_path, ops)
    try:
        mem = _memory(spans)
        got = [(s.name, s.attributes[sc.GEN_AI_OPERATION], s.attributes[STORE], s.attributes[COUNT],
                s.attributes.get(RECORD)) for s in mem]
        assert got == [(name, name, store, n, rid) for name, store, n, rid in expected]
        g = u.graph("m")
        root = next(s for s in spans if s.name.startswith("invoke_agent"))
        for s in mem:
            assert s.parent.span_id == root.context.span_id  # an operation of the run, like the tool's
            # linked to the tool call that wrote it (its data-flow parent)
            (call,) = {link.attributes["unsee.link.artifact"] for link in s.links}
            assert g.get(call).type is ArtifactType.TOOL_CALL and g.get(call).attrs["tool"] == "write"
            assert not any(k in s.attributes for k in NEVER)
        # the artifacts: one unsee.artifact event per op, in the batch's order across the spans
        events = sorted((e for s in mem for e in _events(s)), key=lambda e: e["unsee.artifact.seq"])
        got_events = [(e["unsee.artifact.type"], e["unsee.artifact.source_ids"][0],
                       json.loads(e["unsee.artifact.attrs"])["deleted"]) for e in events]
        assert got_events == [("memory_write", src, gone) for src, gone in artifacts]
        # the provenance store reads the same records back from the spans
        writes = g.of_type(ArtifactType.MEMORY_WRITE)
        assert [(w.source_ids[0], w.attrs["deleted"]) for w in writes] == artifacts
        assert [w.id for w in writes] == [e["unsee.artifact.id"] for e in events]
        assert "likes tea" not in repr([dict(s.attributes) for s in spans] + [_events(s) for s in spans])
    finally:
        u.close()


def test_the_injections_search_span(tmp_path):
    u, spans = _run(tmp_path, [], seed=[("k1", TEA), ("k2", {"text": "lives in Lyon"})])
    try:
        (s,) = _memory(spans)
        a = s.attributes
        assert (s.name, a[sc.GEN_AI_OPERATION], a[STORE], a[COUNT]) == ("search_memory", "search_memory", "inj", 2)
        assert RECORD not in a and not any(k in a for k in NEVER)  # no single record; no query, no payload
        reads = [e for e in _events(s) if e["unsee.artifact.type"] == "memory_read"]
        assert sorted(e["unsee.artifact.source_ids"][0] for e in reads) == ["memory:inj/k1", "memory:inj/k2"]
        g = u.graph("m")
        assert len(g.of_type(ArtifactType.MEMORY_READ)) == 2
        assert "Lyon" not in repr(dict(a)) + repr(_events(s))
    finally:
        u.close()


def test_content_opt_in_puts_the_value_in_unsee_content_only(tmp_path):
    u, spans = _run(tmp_path, [PutOp(U1, "pref", TEA)], content=True)
    try:
        (s,) = _memory(spans)
        (event,) = _events(s)
        assert "likes tea" in event[sc.CONTENT]  # the project's opt-in, on the artifact
        assert not any(k in s.attributes for k in NEVER)  # the conventions' opt-in attributes: never
    finally:
        u.close()


def test_memory_names_are_the_pinned_conventions():
    assert {sc.OP_SEARCH_MEMORY, sc.OP_UPSERT_MEMORY, sc.OP_DELETE_MEMORY} <= set(sc.MEMORY_OPERATIONS)
    assert set(sc.MEMORY.values()) == {STORE, RECORD, COUNT, *NEVER, "unsee.memory.record.ids"}
    assert sc.memory_attributes("delete_memory", "", 3) == {sc.GEN_AI_OPERATION: "delete_memory", COUNT: 3}
