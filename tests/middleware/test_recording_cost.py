"""What recording costs the agent's thread (issue 15), asserted by counting work, not by timing.

The hooks hand token counting, records and span completion to the recorder's task queue
(``middleware/deferred.py``); these tests check that the records are the ones synchronous
recording made (token counts, offsets, spans ended by the time the run returns), that
failures are still recorded, and that a turn's Python work does not grow with the thread.
"""

import threading

from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.support.recording_agents import make_agent, say
from unsee import ArtifactType, Unsee
from unsee.middleware import semconv as sc
from unsee.middleware.tokens import tiktoken_counter

UNCOUNTED = {ArtifactType.PLAN, ArtifactType.REPLY, ArtifactType.TOOL_CALL, ArtifactType.RUN_INPUT}


def _expected_offsets(g, count):
    """Replay the session's token accounting in seq order: each counted artifact takes
    ``count(content)`` tokens after the previous ones; a checkpoint lies at the offset then."""
    records = sorted([*((a.seq, a) for a in g), *((c.seq, c) for c in g.checkpoints)], key=lambda x: x[0])
    offset, spans, offsets = 0, {}, {}
    for _, r in records:
        if hasattr(r, "token_span"):
            n = count(g.content(r.id) or "") if r.type not in UNCOUNTED else 0
            spans[r.id] = (offset, offset + n)
            offset += n
        else:
            offsets[r.id] = offset
    return spans, offsets


def test_token_spans_counted_off_the_hooks_equal_the_counts(u):
    agent = make_agent(u, InMemorySaver())
    for text in ("look at T1 please", "refund A77", "hello", "look at T2 and T3"):
        say(agent, "tok", text)
    g = u.graph("tok")
    count = tiktoken_counter().count
    spans, offsets = _expected_offsets(g, count)
    assert {a.id: a.token_span for a in g} == spans
    assert {c.id: c.token_offset for c in g.checkpoints} == offsets
    assert any(a.token_span[1] > a.token_span[0] for a in g)
    # the stored spans carry the same numbers as the records
    by_id = {}
    for s in u.store.spans("tok"):
        for attrs in [s.attributes, *(e["attributes"] for e in s.events)]:
            if sc.A + "id" in attrs:
                by_id[attrs[sc.A + "id"]] = tuple(attrs[sc.A + "token_span"])
    assert by_id == {a.id: a.token_span for a in g}


def test_the_system_prompt_is_counted_once_per_text(u):
    counted = []
    real = u.recorder.counter_factory

    class Counting:
        def __init__(self, inner):
            self.inner, self.name = inner, inner.name

        def count(self, text):
            counted.append(text)
            return self.inner.count(text)

    u.recorder.counter_factory = lambda model: Counting(real(model))
    agent = make_agent(u, InMemorySaver(), system_prompt="You are support. Be brief.")
    for i in range(4):
        say(agent, f"fresh-{i}", "hello")
    graphs = [u.graph(f"fresh-{i}") for i in range(4)]  # (read-your-writes: the counting is done)
    assert counted.count("You are support. Be brief.") == 1
    blocks = [next(a for a in g if a.type is ArtifactType.PROMPT_BLOCK) for g in graphs]
    assert len({b.token_span for b in blocks}) == 1  # the same count in every session


def test_tokens_are_counted_in_tasks_not_in_the_hooks(u):
    """Counting is a task (run by the store's writer while the agent waits, or at the end of the
    run), never part of a hook's own work."""
    in_task = []
    real = u.recorder.counter_factory
    tasks = u.recorder.tasks

    class Spy:
        def __init__(self, inner):
            self.inner, self.name = inner, inner.name

        def count(self, text):
            in_task.append(tasks._running == threading.get_ident())
            return self.inner.count(text)

    u.recorder.counter_factory = lambda model: Spy(real(model))
    say(make_agent(u, InMemorySaver()), "spy", "look at T1 please")
    u.flush()
    assert in_task and all(in_task)


def test_a_run_returns_before_its_last_spans_end_and_a_flush_ends_them(tmp_path):
    """invoke returns when the agent is done; the writer ends the run's last spans and writes
    its records (issue 32). A flush is read-your-writes: every span has ended and is stored."""
    exporter = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    u = Unsee(home=tmp_path, tracer_provider=tp)
    say(make_agent(u, InMemorySaver()), "e", "look at T1 please")
    u.flush()
    spans = exporter.get_finished_spans()
    names = [s.name for s in spans]
    for name in ("invoke_agent", "chat scripted-policy", "execute_tool lookup"):
        assert name in names, (name, names)
    assert names[-1] == "invoke_agent"  # the children end before the run's span
    # the records that used to get spans of their own are events on the spans that follow them
    first_chat = next(s for s in spans if s.name == "chat scripted-policy")
    kinds = [e.attributes.get("unsee.record.kind") or e.attributes.get("unsee.checkpoint.kind")
             for e in first_chat.events]
    assert kinds[:4] == ["session_start", "user_input", "run_input", "prompt_block system"], kinds
    assert not u.recorder.tasks
    stored = {s.span_id for s in u.store.spans("e")}
    assert {format(s.context.span_id, "016x") for s in spans} == stored
    u.close()


def test_a_failing_task_marks_the_session_incomplete(u):
    agent = make_agent(u, InMemorySaver())
    say(agent, "f", "hello")
    st = u.recorder.state("f")

    class Broken:
        name = st.counter.name

        def count(self, text):
            raise RuntimeError("tokenizer broke")

    st.counter = Broken()
    out = say(agent, "f", "look at T1")  # the agent still runs
    assert "Found" in out["messages"][-1].content
    info = u.session("f")
    assert info.incomplete and info.failures >= 1


def test_a_turn_costs_the_same_python_work_at_any_length_of_thread(u, monkeypatch):
    """Per turn, the messages mapped one by one, the recording tasks and the span links do not
    grow with the thread (they did: every model call mapped and hashed the whole history).
    (Every manifest a delta: the one stored whole every FULL_EVERY has no base to link.)"""
    from unsee.middleware import context_delta

    monkeypatch.setattr(context_delta, "FULL_EVERY", 10**9)
    agent = make_agent(u, InMemorySaver())
    cfg = {"configurable": {"thread_id": "long"}}
    links = []
    real_link = u.recorder._link

    def counting_link(st, span, ids):
        links.append(len(ids))
        return real_link(st, span, ids)

    u.recorder._link = counting_link

    def turn(i):
        u.recorder.run_tasks()  # (what the previous turn queued after its end: its lease)
        st = u.recorder.state("long")
        ids = st.message_ids
        mapped, done, n_links = ids.mapped, u.recorder.tasks.done, len(links)
        agent.invoke({"messages": [HumanMessage(f"look at T{i}" if i % 2 else f"hello {i}")]}, cfg)
        u.recorder.run_tasks()
        return ids.mapped - mapped, u.recorder.tasks.done - done, sum(links[n_links:])

    say(agent, "long", "hello")
    early = [turn(i) for i in range(1, 7)]
    for i in range(7, 60):
        turn(i)
    late = [turn(i) for i in range(61, 67)]
    assert early == late, (early, late)
    st = u.recorder.state("long")
    assert len(st.live) > 150  # (the history did grow)


def test_manifest_bookkeeping_is_exact_when_it_skips_work():
    from unsee.middleware.session_state import SessionState

    st = SessionState(session_id="s", counter=tiktoken_counter())
    assert st.new_in(["a", "b"]) == ["a", "b"] and st.set_manifest(["a", "b"])
    assert st.new_in(["a", "b", "c", "a"]) == ["c"]  # an extension: only its tail is looked at
    assert not st.set_manifest(["a", "b", "c", "a"])  # the tail repeats an id of the prefix
    assert st.last_manifest_set == {"a", "b", "c"}
    assert st.set_manifest(["x", "y"]) and st.new_in(["y", "z"]) == ["z"]  # not an extension: a set
    assert not st.set_manifest(["x", "y", "z", "z"])  # a repeat inside the tail
    assert not st.set_manifest(["x", "y", "z", "z", "w"])  # (once repeated, the extension is too)


def test_message_ids_map_each_message_once_and_stay_exact():
    from langchain_core.messages import AIMessage, ToolMessage

    from unsee.middleware.messages import MessageIds, message_artifact

    def aid(m):
        return (message_artifact("s", m) or (None,))[0]

    ids = MessageIds("s")
    msgs = [HumanMessage("a", id="1"), AIMessage("b", id="2"), ToolMessage("c", tool_call_id="t", id="3")]
    got, new, fresh = ids.of(msgs, known=set())
    assert got == [aid(m) for m in msgs] and new == [0, 1, 2] and ids.mapped == 3
    # not settled (its recording failed): the next call maps and records them again
    got, new, fresh = ids.of(msgs, known=set())
    assert new == [0, 1, 2] and ids.mapped == 6
    ids.settle(msgs, got, fresh)
    longer = [*msgs, HumanMessage("d", id="4")]
    got, new, fresh = ids.of(longer, known=set(got))
    assert got == [aid(m) for m in longer] and new == [3] and ids.mapped == 7  # the prefix is reused
    ids.settle(longer, got, fresh)
    ids.release()
    copies = [m.model_copy() for m in longer]  # the next run: other objects, the same ids
    got, new, fresh = ids.of(copies, known=set(got))
    assert got == [aid(m) for m in copies] and new == [] and ids.mapped == 7
    # a message replaced under its id by one of another class is mapped afresh
    swapped = [*copies[:3], AIMessage("d", id="4")]
    got, new, fresh = ids.of(swapped, known=set())
    assert got == [aid(m) for m in swapped] and got[3].startswith("mt-") and ids.mapped == 8


def test_artifacts_past_the_span_event_cap_get_spans_of_their_own(tmp_path, monkeypatch):
    from unsee.middleware import deferred

    def record(home, cap):
        monkeypatch.setattr(deferred, "MAX_EVENTS_PER_SPAN", cap)
        u = Unsee(home=home)
        make_agent(u, InMemorySaver()).invoke(
            {"messages": [HumanMessage("look at T1 and T2 and T3", id="m1")]},
            {"configurable": {"thread_id": "cap"}, "max_concurrency": 1})
        g = u.graph("cap")
        names = [s.name for s in u.store.spans("cap")]
        u.close()
        # (the system prompt's id is a keyed hash: each home has its key)
        return [(a.type, len(a.parents), a.token_span, a.seq, a.committed) for a in g], names

    capped, names = record(tmp_path / "capped", 1)
    plain, plain_names = record(tmp_path / "plain", 100)
    assert capped == plain
    assert names.count("tool_call") == 3 and "tool_call" not in plain_names
