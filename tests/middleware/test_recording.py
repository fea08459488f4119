"""The recording middleware on real create_agent runs (scripted model)."""

import asyncio
import threading

import pytest
from langchain.agents.middleware import SummarizationMiddleware
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.support.recording_agents import SECRET, make_agent, policy, say
from unsee import ArtifactType, CheckpointKind, TargetNotFound, Unsee
from unsee.middleware import semconv as sc
from unsee.plugins.model import ScriptedChatModel


def types_of(g):
    return [a.type for a in g]


def test_every_hook_records(u):
    agent = make_agent(u, InMemorySaver())
    say(agent, "s1", "look at T1 please")
    g = u.graph("s1")
    kinds = types_of(g)
    for t in (ArtifactType.USER_INPUT, ArtifactType.PROMPT_BLOCK, ArtifactType.MODEL_TURN, ArtifactType.PLAN,
              ArtifactType.TOOL_CALL, ArtifactType.TOOL_RETURN, ArtifactType.REPLY):
        assert t in kinds, t
    ret = g.of_type(ArtifactType.TOOL_RETURN)[0]
    call = g.get(ret.parents[0])
    assert call.type is ArtifactType.TOOL_CALL and call.committed
    assert call.attrs["tool"] == "lookup" and call.attrs["effect"] == "read"
    assert ret.source_ids == ("tool:lookup",)
    second_turn = g.of_type(ArtifactType.MODEL_TURN)[1]
    manifest = g.manifest(second_turn.id)
    assert ret.id in manifest and g.of_type(ArtifactType.USER_INPUT)[0].id in manifest
    assert any(g.get(x).type is ArtifactType.PROMPT_BLOCK for x in manifest)  # the system prompt
    # token spans are real counts, contiguous and non-overlapping
    spans = sorted(a.token_span for a in g if a.token_span[1] > a.token_span[0])
    assert all(b[0] >= a[1] for a, b in zip(spans, spans[1:]))
    assert g.session_id == "s1"


def test_locate_and_taint_through_tool_return(u):
    agent = make_agent(u, InMemorySaver())
    say(agent, "s1", "hello")
    say(agent, "s1", "look at T1")
    say(agent, "s1", "thanks")
    g = u.graph("s1")
    hit = g.locate(SECRET)
    assert hit.artifact_type is ArtifactType.TOOL_RETURN and hit.source_ids == ("tool:lookup",)
    first_input = g.of_type(ArtifactType.USER_INPUT)[0]
    assert hit.step > first_input.step
    closure = g.taint(hit)
    turns = g.of_type(ArtifactType.MODEL_TURN)
    assert not (set(g.manifest(turns[0].id)) & closure)  # the turn before tau is independent
    assert g.independent(turns[0].id, closure)
    assert all(t.id in closure for t in turns[2:])  # every later turn saw the return
    assert SECRET not in hit.target_hash
    with pytest.raises(TargetNotFound):
        g.locate("never-said")
    with pytest.raises(LookupError):
        g.locate(SECRET, source="tool:refund")
    assert g.locate(SECRET, source="tool:lookup").artifact_id == hit.artifact_id


def test_checkpoints_registered(u):
    agent = make_agent(u, InMemorySaver())
    say(agent, "s1", "look at T1")
    say(agent, "s1", "refund A77")
    g = u.graph("s1")
    kinds = [c.kind for c in g.checkpoints]
    assert kinds[0] is CheckpointKind.SESSION_START
    assert CheckpointKind.TURN in kinds
    tool_cps = [c for c in g.checkpoints if c.kind is CheckpointKind.TOOL_CALL]
    assert len(tool_cps) == 1  # only the external refund, not the read-only lookup
    refund_ret = [a for a in g.of_type(ArtifactType.TOOL_RETURN) if a.attrs["tool"] == "refund"][0]
    assert tool_cps[0].step == refund_ret.step
    assert all(c.langgraph_checkpoint_id for c in g.checkpoints)
    assert tool_cps[0].cache_handle is None and tool_cps[0].env_snapshot_id is None
    turn_cp = [c for c in g.checkpoints if c.kind is CheckpointKind.TURN][0]
    assert turn_cp.prompt_manifest and turn_cp.token_offset > 0
    # the latest checkpoint at or before the entry of the secret is the session start
    assert g.checkpoint_before(g.locate(SECRET).step).kind is CheckpointKind.SESSION_START


def test_parallel_tool_calls(u):
    agent = make_agent(u, InMemorySaver())
    say(agent, "p", "look at T1 and T2 and T3")
    g = u.graph("p")
    calls = g.of_type(ArtifactType.TOOL_CALL)
    rets = g.of_type(ArtifactType.TOOL_RETURN)
    assert len(calls) == 3 and len(rets) == 3
    assert {r.parents[0] for r in rets} == {c.id for c in calls}
    assert sorted(r.step for r in rets) == sorted(c.attrs["return_step"] for c in calls)
    final = g.of_type(ArtifactType.MODEL_TURN)[-1]
    assert {r.id for r in rets} <= set(g.manifest(final.id))
    closure = g.taint(g.locate(SECRET))
    t2 = [r for r in rets if "T2" in g.content(r.id)][0]
    assert t2.id not in closure and final.id in closure


def test_summarization_parents_and_taint(u):
    summarize = SummarizationMiddleware(
        ScriptedChatModel(policy=policy),
        trigger=("messages", 6), keep=("messages", 2),
        summarizer=lambda msgs: " / ".join(str(m.content) for m in msgs),
    )
    agent = make_agent(u, InMemorySaver(), extra_middleware=[summarize])
    say(agent, "c", "look at T1")
    say(agent, "c", "hello")
    say(agent, "c", "hello again")
    g = u.graph("c")
    summaries = g.of_type(ArtifactType.SUMMARY)
    assert summaries, "summarization should have fired"
    s = summaries[0]
    assert s.parents and all(g.get(p).type in (ArtifactType.USER_INPUT, ArtifactType.MODEL_TURN,
                                                ArtifactType.TOOL_RETURN) for p in s.parents)
    hit = g.locate(SECRET)
    assert hit.artifact_id in s.parents  # the summary replaced the tainted return
    assert s.id in g.taint(hit)
    assert any(c.kind is CheckpointKind.COMPACTION for c in g.checkpoints)
    later = [t for t in g.of_type(ArtifactType.MODEL_TURN) if t.seq > s.seq]
    assert later and s.id in g.manifest(later[0].id)
    assert hit.artifact_id not in g.manifest(later[0].id)  # compacted away from the live prompt


def test_memory_injection_and_writes(u):
    from langchain.agents import create_agent
    from langchain.tools import ToolRuntime
    from langchain_core.tools import tool

    from unsee.plugins.model import ScriptedChatModel, call_id
    from langchain_core.messages import AIMessage, ToolMessage

    @tool
    def note(fact: str, runtime: ToolRuntime) -> str:
        """Remember a fact."""
        runtime.store.put(("mem", "u1"), "pref", {"text": fact})
        return "noted"

    note.metadata = {"unsee.effect": "write"}

    def pol(messages, tools):
        last = messages[-1]
        if isinstance(last, ToolMessage):
            return AIMessage(content="saved")
        if "remember" in str(last.content):
            return AIMessage(content="", tool_calls=[{"name": "note", "args": {"fact": f"card {SECRET}"},
                                                      "id": call_id(messages), "type": "tool_call"}])
        return AIMessage(content="hi")

    store = u.recorded_store(InMemoryStore())
    agent = create_agent(ScriptedChatModel(policy=pol), [note], system_prompt="sys",
                         middleware=[u.middleware(), u.memory_middleware(store, ("mem", "u1"))],
                         checkpointer=InMemorySaver(), store=store)
    say(agent, "m", "please remember my card")
    say(agent, "m", "what do you know?")
    g = u.graph("m")
    writes = g.of_type(ArtifactType.MEMORY_WRITE)
    assert len(writes) == 1 and g.get(writes[0].parents[0]).type is ArtifactType.TOOL_CALL
    reads = g.of_type(ArtifactType.MEMORY_READ)
    assert len(reads) == 1 and reads[0].parents == (writes[0].id,)
    assert reads[0].source_ids == ("memory:mem/u1/pref",)
    blocks = [a for a in g.of_type(ArtifactType.PROMPT_BLOCK) if a.attrs.get("role") == "memory"]
    assert blocks and blocks[0].parents == (reads[0].id,)
    last_turn = g.of_type(ArtifactType.MODEL_TURN)[-1]
    assert blocks[0].id in g.manifest(last_turn.id)
    assert any(c.kind is CheckpointKind.MEMORY_INJECTION for c in g.checkpoints)
    # the entry point of the secret is the tool call's argument (written by the model here);
    # restricting to the memory source finds the memory read
    assert g.locate(SECRET, source="memory:mem/u1/pref").artifact_id == reads[0].id
    # the system prompt artifact is the original one, not the memory-augmented one
    sys_blocks = [a for a in g.of_type(ArtifactType.PROMPT_BLOCK) if a.attrs.get("role") == "system"]
    assert len(sys_blocks) == 1 and g.content(sys_blocks[0].id) == "sys"


def test_memory_middleware_outer_order(u):
    store = u.recorded_store(InMemoryStore())
    store.put(("mem", "x"), "k", {"text": "likes tea"})
    from langchain.agents import create_agent

    from tests.support.recording_agents import lookup, policy
    from unsee.plugins.model import ScriptedChatModel

    agent = create_agent(ScriptedChatModel(policy=policy), [lookup], system_prompt="sys",
                         middleware=[u.memory_middleware(store, ("mem", "x")), u.middleware()],
                         checkpointer=InMemorySaver(), store=store)
    say(agent, "o", "hello")
    g = u.graph("o")
    turn = g.of_type(ArtifactType.MODEL_TURN)[0]
    block = [a for a in g.of_type(ArtifactType.PROMPT_BLOCK) if a.attrs.get("role") == "memory"][0]
    assert block.id in g.manifest(turn.id)
    sys_blocks = [a for a in g.of_type(ArtifactType.PROMPT_BLOCK) if a.attrs.get("role") == "system"]
    assert [g.content(a.id) for a in sys_blocks] == ["sys"]


async def test_async_invoke(u):
    agent = make_agent(u, InMemorySaver())
    await agent.ainvoke({"messages": [HumanMessage("look at T1 and T2")]}, {"configurable": {"thread_id": "a"}})
    g = u.graph("a")
    assert len(g.of_type(ArtifactType.TOOL_RETURN)) == 2
    assert g.locate(SECRET).artifact_type is ArtifactType.TOOL_RETURN


def test_streaming(u):
    agent = make_agent(u, InMemorySaver())
    chunks = list(agent.stream({"messages": [HumanMessage("look at T1")]}, {"configurable": {"thread_id": "st"}},
                               stream_mode="updates"))
    assert chunks
    g = u.graph("st")
    assert len(g.of_type(ArtifactType.MODEL_TURN)) == 2


def test_concurrent_threads_stay_separate(u):
    agent = make_agent(u, InMemorySaver())
    errors = []

    def run(thread, text):
        try:
            for _ in range(3):
                say(agent, thread, text)
        except Exception as e:  # pragma: no cover - surfaced below
            errors.append(e)

    ts = [threading.Thread(target=run, args=("A", "look at T1")), threading.Thread(target=run, args=("B", "look at T2"))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors
    ga, gb = u.graph("A"), u.graph("B")
    assert ga.locate(SECRET)
    with pytest.raises(TargetNotFound):
        gb.locate(SECRET)
    for g in (ga, gb):
        ids = {a.id for a in g}
        for a in g:
            assert set(a.parents) <= ids, "a parent from the other thread leaked in"
        assert len(g.of_type(ArtifactType.USER_INPUT)) == 3
        assert sorted(a.seq for a in g) == list(range(1, len(g) + 1)) or len({a.seq for a in g}) == len(g)


async def test_concurrent_async_threads(u):
    agent = make_agent(u, InMemorySaver())
    await asyncio.gather(*[
        agent.ainvoke({"messages": [HumanMessage(f"look at T{i}")]}, {"configurable": {"thread_id": f"t{i}"}})
        for i in range(1, 5)
    ])
    for i in range(1, 5):
        g = u.graph(f"t{i}")
        rets = g.of_type(ArtifactType.TOOL_RETURN)
        assert len(rets) == 1 and f"T{i}" in g.content(rets[0].id)


def test_recording_survives_a_new_process_state(tmp_path):
    """A second Unsee on the same home continues the session's counters."""
    saver = InMemorySaver()
    u1 = Unsee(home=tmp_path)
    say(make_agent(u1, saver), "r", "look at T1")
    n1 = len(u1.graph("r"))
    u1.close()
    u2 = Unsee(home=tmp_path)
    say(make_agent(u2, saver), "r", "thanks")
    g = u2.graph("r")
    assert len(g) > n1
    assert len({a.seq for a in g}) == len(g)
    turns = g.of_type(ArtifactType.MODEL_TURN)
    assert g.of_type(ArtifactType.USER_INPUT)[0].id in g.manifest(turns[-1].id)
    assert max(a.turn for a in g) == 2
    u2.close()


def test_store_failure_fails_open_and_marks_incomplete(u, monkeypatch):
    agent = make_agent(u, InMemorySaver())
    say(agent, "f", "hello")

    def boom(batches):
        raise OSError("disk full")

    monkeypatch.setattr(u.store, "_write", boom)
    out = say(agent, "f", "look at T1")  # the agent still runs
    assert "Found" in out["messages"][-1].content
    u.store.flush()
    monkeypatch.undo()
    info = u.session("f")
    assert info.incomplete and info.failures >= 1
    assert u.store.failures >= 1


def test_spans_follow_genai_conventions(tmp_path):
    exporter = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    u = Unsee(home=tmp_path, tracer_provider=tp)  # bring-your-own provider
    agent = make_agent(u, InMemorySaver())
    say(agent, "g", "look at T1")
    u.flush()  # (a run returns before its last spans end: the writer ends them)
    spans = exporter.get_finished_spans()
    by_name = {s.name: s for s in spans}
    chat = [s for s in spans if s.attributes.get(sc.GEN_AI_OPERATION) == "chat"]
    tool_spans = [s for s in spans if s.name == "execute_tool lookup"]
    assert chat and tool_spans and "invoke_agent" in by_name
    t = tool_spans[0]
    assert t.attributes[sc.GEN_AI_TOOL_NAME] == "lookup" and t.attributes[sc.GEN_AI_TOOL_CALL_ID]
    assert t.attributes[sc.GEN_AI_OPERATION] == "execute_tool"
    assert chat[0].attributes[sc.GEN_AI_PROVIDER] == "scripted"
    root = by_name["invoke_agent"]
    assert all(s.context.trace_id == root.context.trace_id for s in spans)
    assert all(s.parent is not None and s.parent.span_id == root.context.span_id for s in chat + tool_spans)
    # the second chat span links to the tool span that produced its input, and says so in an attribute
    second = chat[1]
    assert t.context.span_id in {l.context.span_id for l in second.links}
    # (its context manifest: what it added to the first turn's, which it names as its base)
    assert t.attributes["unsee.artifact.id"] in second.attributes["unsee.context.added"]
    assert second.attributes["unsee.context.base"] == chat[0].attributes["unsee.artifact.id"]
    assert chat[0].context.span_id in {l.context.span_id for l in second.links}
    # no payload text on any span by default
    for s in spans:
        blob = repr(dict(s.attributes)) + repr([dict(e.attributes) for e in s.events])
        assert SECRET not in blob
    # the store was built from these spans through our processor on the user's provider
    assert u.graph("g").locate(SECRET)
    u.close()


def test_content_in_spans_opt_in(tmp_path):
    exporter = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    u = Unsee(home=tmp_path, tracer_provider=tp, content_in_spans=True)
    say(make_agent(u, InMemorySaver()), "g", "look at T1")
    u.flush()
    assert any(SECRET in str(s.attributes.get(sc.CONTENT, "")) for s in exporter.get_finished_spans())
    u.close()


def test_unknown_session(u):
    from unsee import SessionNotFound

    with pytest.raises(SessionNotFound):
        u.graph("nope")


def test_a_failed_run_ends_its_turn(u):
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage, ToolMessage
    from langchain_core.tools import tool

    from unsee.plugins.model import call_id

    @tool
    def boom(x: str) -> str:
        """Explode."""
        raise ValueError("kaboom")

    def pol(m, t):
        if isinstance(m[-1], ToolMessage):
            return AIMessage(content="after")
        return AIMessage(content="", tool_calls=[{"name": "boom", "args": {"x": "1"}, "id": call_id(m),
                                                   "type": "tool_call"}])

    agent = create_agent(ScriptedChatModel(policy=pol), [boom], middleware=[u.middleware()],
                         checkpointer=InMemorySaver())
    with pytest.raises(ValueError):
        say(agent, "e", "hi")
    assert not u.recorder.activity.is_running("e")  # a forget would not wait for it
    spans = {s.name: s.status_code for s in u.store.spans("e")}
    assert spans["execute_tool boom"] == "ERROR" and spans["invoke_agent"] == "ERROR"
