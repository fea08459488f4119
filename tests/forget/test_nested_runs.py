"""Agents run nested in another graph on the same thread are one session with it.

A subagent a tool invokes, a swarm's agents, an agent used as a ``StateGraph``
node: their runs are parts of the outer run's turn, never user turns. The
subagent's input is derived from the tool call that started it
(``NESTED_INPUT``), its result is a parent of that call's return, so the
target has one entry and its taint follows into and out of the nested run. A
forget replays the graph that owns the thread (the nested agents run again
inside it, their calls matched to their records), reaches B5 computed
independently, fires each side effect once, and its erasure leaves no
checkpoint of a nested run holding the target.
"""

from __future__ import annotations

import sqlite3
from types import SimpleNamespace

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from tests.support.agent_shapes import SECRET, TURNS, World, build, file_copies, normalized, reference, run, sqlite_saver
from tests.support.safety_cases import fault_then_retry
from unsee import RevocationEvent, Unsee
from unsee.middleware.graph import ProvenanceGraph
from unsee.middleware.records import Artifact, ArtifactType, CheckpointKind
from unsee.plugins.forget import UnsupportedSession
from unsee.plugins.forget.decide import Action, ToolCall, decide
from unsee.plugins.forget.plan import RecordedCall
from unsee.plugins.forget.preflight import recorded_refusals, unrecorded_agents


def _recorded(tmp_path, shape: str, turns=TURNS, saver=None):
    u = Unsee(home=tmp_path / "home")
    world = World()
    app = build(shape, world, middleware=lambda: [u.middleware()], checkpointer=saver or InMemorySaver())
    run(app, "s", turns)
    return u, world, app, u.graph("s")


def _of(g: ProvenanceGraph, type_: ArtifactType) -> list[Artifact]:
    return [a for a in g if a.type is type_]


# -- the record: one session, nested runs inside the outer turns ------------------------------
def test_a_subagent_run_is_part_of_the_tool_call_that_started_it(tmp_path):
    _, _, _, g = _recorded(tmp_path, "tool_subagent")
    assert max(a.turn for a in g) == len(TURNS)  # no turn of its own
    assert [g.content(a.id) for a in _of(g, ArtifactType.USER_INPUT)] == list(TURNS)
    assert not any(a.attrs.get("graph_ns") for a in _of(g, ArtifactType.USER_INPUT))
    nested = _of(g, ArtifactType.NESTED_INPUT)
    assert [g.content(a.id) for a in nested] == ["look at T1", "look at T2", "refund A7"]
    for a in nested:
        (call,) = a.parents
        assert g.get(call).type is ArtifactType.TOOL_CALL and g.get(call).attrs["tool"] == "ask_specialist"
        ret = next(g.get(x) for x in g.children(call) if g.get(x).type is ArtifactType.TOOL_RETURN)
        result = [g.get(p) for p in ret.parents if p != call]
        assert [r.type for r in result] == [ArtifactType.MODEL_TURN] and result[0].attrs.get("graph_ns")
    # no splice point inside a nested run: one per turn the thread's own graph took input
    assert len([c for c in g.checkpoints if c.kind in (CheckpointKind.SESSION_START, CheckpointKind.TURN)]) \
        == len(TURNS)


def test_the_target_has_one_entry_and_its_taint_leaves_the_nested_run(tmp_path):
    _, _, _, g = _recorded(tmp_path, "tool_subagent")
    hit = g.locate(SECRET)  # (no AmbiguousTarget between the inner lookup and the outer return)
    entry = g.get(hit.artifact_id)
    assert entry.type is ArtifactType.TOOL_RETURN and entry.source_ids == ("tool:lookup",)
    assert entry.attrs.get("graph_ns")
    closure = g.taint(hit)
    outer = [a for a in _of(g, ArtifactType.TOOL_RETURN) if a.source_ids == ("tool:ask_specialist",)
             and SECRET in (g.content(a.id) or "")]
    assert outer and all(a.id in closure for a in outer)
    assert any(g.get(a).type is ArtifactType.REPLY and not g.get(a).attrs.get("graph_ns")
               and SECRET in (g.content(a) or "") for a in closure)


def test_the_taint_of_a_user_input_follows_into_the_nested_run(tmp_path):
    turns = ["hello", f"look at T2 card {SECRET}", "refund A7", "bye"]
    u, world, app, g = _recorded(tmp_path, "tool_subagent", turns, sqlite_saver(tmp_path / "live.sqlite"))
    hit = g.locate(SECRET)
    assert hit.artifact_type is ArtifactType.USER_INPUT
    closure = g.taint(hit)
    (inner,) = [a for a in _of(g, ArtifactType.NESTED_INPUT) if SECRET in (g.content(a.id) or "")]
    assert inner.id in closure
    fired = list(world.fired)
    ref, _ = reference("tool_subagent", [t.replace(SECRET, "") for t in turns],
                       sqlite_saver(tmp_path / "ref.sqlite"))
    report = u.forget("s", RevocationEvent(target=SECRET, event_id="ev-ui"))
    assert report.committed and report.errors == [] and report.erased_clean is True
    assert normalized(app, "s") == ref
    assert world.fired == fired
    assert file_copies([tmp_path / "home", *tmp_path.glob("live.sqlite*")], SECRET) == {}


def test_a_handoff_goes_on_in_the_turn_it_was_made_in(tmp_path):
    _, _, _, g = _recorded(tmp_path, "swarm")
    assert max(a.turn for a in g) == len(TURNS)
    refund_turn = next(a.turn for a in _of(g, ArtifactType.USER_INPUT) if g.content(a.id) == "refund A7")
    agents = {str(a.attrs.get("graph_ns", "")).split(":", 1)[0] for a in _of(g, ArtifactType.MODEL_TURN)
              if a.turn == refund_turn}
    assert agents == {"alice", "bob"}
    assert len([c for c in g.checkpoints if c.kind in (CheckpointKind.SESSION_START, CheckpointKind.TURN)]) \
        == len(TURNS)


def test_an_agent_node_takes_the_users_input(tmp_path):
    _, _, _, g = _recorded(tmp_path, "graph_node")
    inputs = _of(g, ArtifactType.USER_INPUT)
    assert [g.content(a.id) for a in inputs] == list(TURNS)
    assert [a.turn for a in inputs] == list(range(1, len(TURNS) + 1))
    assert not _of(g, ArtifactType.NESTED_INPUT)


# -- the forget: B7 == B5, once, erased -------------------------------------------------------
@pytest.mark.parametrize("shape", ["tool_subagent", "swarm", "graph_node"])
def test_the_erasure_leaves_no_nested_checkpoint(tmp_path, shape, cases, request):
    case = cases(tmp_path, shape, "sqlite")
    conn = sqlite3.connect(str(tmp_path / "live.sqlite"))
    request.addfinalizer(conn.close)
    nested = "SELECT count(*) FROM checkpoints WHERE thread_id = ? AND checkpoint_ns != ''"
    assert conn.execute(nested, ("s",)).fetchone()[0] > 0
    report = case.forget()
    assert report.committed and report.errors == [] and report.erased_clean is True
    case.counterfactual(report)
    assert conn.execute(nested, ("s",)).fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM checkpoints WHERE thread_id != 's' AND thread_id != 'reference'"
                        ).fetchone()[0] == 0  # (no scratch or stage thread left)
    # the thread goes on from the counterfactual
    case.app.invoke({"messages": [("user", "look at T2")]}, {"configurable": {"thread_id": "s"}})
    assert SECRET not in str(normalized(case.app, "s"))


@pytest.mark.parametrize("crash", [True, False], ids=["crash", "failure"])
@pytest.mark.parametrize("step", ["replay:turn:", "commit:state", "erase:history:staged", "erase:"])
@pytest.mark.parametrize("shape", ["tool_subagent", "swarm"])
def test_a_fault_in_a_forget_of_nested_runs(tmp_path, shape, step, crash, cases):
    fault_then_retry(cases(tmp_path, shape, "sqlite"), step, crash, retry_agent=crash)


# -- what is still refused, and why -----------------------------------------------------------
def test_a_supervisor_without_unsee_is_refused_by_name(tmp_path, cases):
    case = cases(tmp_path, "supervisor", "memory")
    assert unrecorded_agents(case.app) == ["supervisor"]
    with pytest.raises(UnsupportedSession) as e:
        case.forget(agent=case.app, event={"source": "tool:lookup"})
    assert "supervisor" in str(e.value) and "middleware" in str(e.value)
    case.unchanged()


def _artifact(seq: int, type_: ArtifactType, turn: int, **attrs) -> Artifact:
    return Artifact(id=f"a{seq}", session_id="s", type=type_, turn=turn, seq=seq, attrs=attrs)


def test_a_record_of_nested_runs_as_turns_of_their_own_is_refused():
    """Nested runs recorded as turns of their own (an older recording: no ``in_turn``) would give
    their inputs to the outer graph as the user's."""
    ns = "tools:1|model:2"
    legacy = ProvenanceGraph([_artifact(1, ArtifactType.USER_INPUT, 1), _artifact(2, ArtifactType.MODEL_TURN, 1),
                              _artifact(3, ArtifactType.USER_INPUT, 2, graph_ns=ns),
                              _artifact(4, ArtifactType.MODEL_TURN, 2, graph_ns=ns),
                              _artifact(5, ArtifactType.MODEL_TURN, 2)], session_id="s")
    (why,) = recorded_refusals(legacy, SimpleNamespace(fork_seq=0))
    assert "tools/model" in why and "earlier unsee" in why
    node = ProvenanceGraph([_artifact(1, ArtifactType.USER_INPUT, 1, graph_ns="assistant:1", in_turn=True),
                            _artifact(2, ArtifactType.MODEL_TURN, 1, graph_ns="assistant:1", in_turn=True)],
                           session_id="s")
    assert recorded_refusals(node, SimpleNamespace(fork_seq=0)) == []


def test_every_record_of_a_nested_run_says_it_is_part_of_a_turn(tmp_path):
    for shape in ("tool_subagent", "swarm", "graph_node"):
        _, _, _, g = _recorded(tmp_path / shape, shape)
        nested = [a for a in g if a.attrs.get("graph_ns")]
        assert nested and all(a.attrs.get("in_turn") for a in nested)


def test_a_tool_agents_ran_in_runs_again():
    hosted = RecordedCall("c1", "call_1", "ask_specialist", {"question": "q"}, None, "r1", "answer", "success",
                          hosts_run=True)
    call = ToolCall("ask_specialist", {"question": "q"}, "call_1")
    assert decide(call, hosted).action is Action.EXECUTE
    assert decide(call, None, identical=[hosted]).action is Action.EXECUTE
    new = ToolCall("ask_specialist", {"question": "other"}, "call_9")
    assert decide(new, None).action is Action.DEFER
    assert decide(new, None, hosts_runs=True).action is Action.EXECUTE


@pytest.mark.postgres
@pytest.mark.parametrize("shape", ["tool_subagent", "swarm", "graph_node"])
def test_on_postgres_no_row_of_the_thread_holds_the_target(tmp_path, shape, pg_url, cases):
    import psycopg

    case = cases(tmp_path, shape, "postgres", pg_url=pg_url)
    needle = SECRET.encode()

    def rows_holding(conn) -> int:
        return conn.execute(
            "SELECT (SELECT count(*) FROM checkpoints WHERE thread_id <> 'reference' AND "
            "  (checkpoint::text LIKE %s OR metadata::text LIKE %s)) + "
            "(SELECT count(*) FROM checkpoint_writes WHERE thread_id <> 'reference' AND position(%s IN blob) > 0) + "
            "(SELECT count(*) FROM checkpoint_blobs WHERE thread_id <> 'reference' AND position(%s IN blob) > 0)",
            (f"%{SECRET}%", f"%{SECRET}%", needle, needle)).fetchone()[0]

    nested = "SELECT count(*) FROM {} WHERE thread_id = 's' AND checkpoint_ns != ''"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert rows_holding(conn) > 0 and conn.execute(nested.format("checkpoints")).fetchone()[0] > 0
    report = case.forget()
    assert report.committed and report.errors == [] and report.erased_clean is True
    case.counterfactual(report)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        for table in ("checkpoints", "checkpoint_writes", "checkpoint_blobs"):
            assert conn.execute(nested.format(table)).fetchone()[0] == 0
        assert rows_holding(conn) == 0


@pytest.mark.postgres
@pytest.mark.parametrize("step", ["commit:state", "erase:history:staged"])
@pytest.mark.parametrize("shape", ["tool_subagent", "swarm"])
def test_a_crash_in_a_forget_of_nested_runs_on_postgres(tmp_path, shape, step, pg_url, cases):
    fault_then_retry(cases(tmp_path, shape, "postgres", pg_url=pg_url), step, True, retry_agent=False)
