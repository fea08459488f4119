"""Pure graph logic: locate (tau), taint (I(z)), independence, checkpoints.

The graph is built directly from ``Artifact`` records and a ``content_of``
accessor (a ``dict.get``): no store, no spans, no LangChain.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from unsee.middleware.errors import InvalidArgument, TargetNotFound, UnknownArtifact, UnseeError
from unsee.middleware.graph import ProvenanceGraph
from unsee.middleware.records import (
    OBSERVATION_TYPES,
    Artifact,
    ArtifactType,
    Checkpoint,
    CheckpointKind,
    Hit,
)

T = ArtifactType
SID = "s-test"
SECRET = "4417-2231"


def art(aid: str, type_: ArtifactType, seq: int, *, parents=(), step=0, source_ids=(), turn=0) -> Artifact:
    return Artifact(
        id=aid, session_id=SID, type=type_, parents=tuple(parents), source_ids=tuple(source_ids),
        seq=seq, step=step, turn=turn,
    )


def ckpt(cid: str, seq: int, step: int, kind=CheckpointKind.TURN, offset: int = 0) -> Checkpoint:
    return Checkpoint(id=cid, session_id=SID, kind=kind, step=step, turn=0, seq=seq, token_offset=offset)


def graph(artifacts, contents=None, checkpoints=(), **kw) -> ProvenanceGraph:
    contents = dict(contents or {})
    return ProvenanceGraph(artifacts, checkpoints, content_of=contents.get, **kw)


# A small support session, in recording order:
#   in1 (user) -> mt1 (model turn, asks for lookup) -> call1 -> tr1 (tool return with the secret)
#   mt2 reads sys, in1, mt1, tr1 -> reply2 ; in2 (second user turn) ; sum1 compacts in1, mt1, tr1, mt2
#   mt3 reads sys, sum1, in2 ; mt_clean reads only sys and in2 (independent of the secret)
def support_session():
    arts = [
        art("sys", T.PROMPT_BLOCK, 1, source_ids=("system_prompt",), step=1),
        art("in1", T.USER_INPUT, 2, source_ids=("user",), step=1),
        art("mt1", T.MODEL_TURN, 3, parents=("sys", "in1"), step=1),
        art("call1", T.TOOL_CALL, 4, parents=("mt1",), step=2),
        art("tr1", T.TOOL_RETURN, 5, parents=("call1",), source_ids=("tool:lookup_ticket",), step=2),
        art("mt2", T.MODEL_TURN, 6, parents=("sys", "in1", "mt1", "tr1"), step=2),
        art("reply2", T.REPLY, 7, parents=("mt2",), step=2),
        art("in2", T.USER_INPUT, 8, source_ids=("user",), step=3),
        art("sum1", T.SUMMARY, 9, parents=("in1", "mt1", "tr1", "mt2"), step=3),
        art("mt3", T.MODEL_TURN, 10, parents=("sys", "sum1", "in2"), step=3),
        art("mt_clean", T.MODEL_TURN, 11, parents=("sys", "in2"), step=3),
        art("mem1", T.MEMORY_READ, 12, source_ids=("memory:users/42/fact-1",), step=4),
    ]
    contents = {
        "sys": "You are support.",
        "in1": "Ticket T-1001 please",
        "mt1": '[{"name": "lookup_ticket"}]',
        "call1": '{"ticket_id": "T-1001"}',
        "tr1": f"Ticket T-1001: card {SECRET}",
        "mt2": f"Your card {SECRET} is on file",
        "reply2": f"Your card {SECRET} is on file",
        "in2": "what now?",
        "sum1": f"user asked about T-1001, card {SECRET}",
        "mt3": "Status: refund pending",
        "mt_clean": "Hello again",
        "mem1": f"- fact-1: card {SECRET}",
    }
    return arts, contents


@pytest.fixture
def g():
    arts, contents = support_session()
    return graph(arts, contents, hash_of=lambda s: "h:" + s)


# -- construction / access ------------------------------------------------------
def test_graph_orders_by_seq_and_indexes_children():
    arts, contents = support_session()
    g = graph(list(reversed(arts)), contents)
    assert [a.id for a in g] == [a.id for a in arts]
    assert len(g) == len(arts)
    assert "tr1" in g and "nope" not in g
    assert g.session_id == SID
    assert sorted(g.children("tr1")) == ["mt2", "sum1"]
    assert g.children("mem1") == []
    assert g.children("unknown") == []
    assert g.content("tr1") == contents["tr1"]
    assert [a.id for a in g.of_type(T.USER_INPUT)] == ["in1", "in2"]


def test_get_unknown_artifact_raises_unknown_artifact():
    g = graph([art("a", T.USER_INPUT, 1)])
    with pytest.raises(UnknownArtifact):
        g.get("b")
    assert issubclass(UnknownArtifact, LookupError) and issubclass(UnknownArtifact, UnseeError)


def test_empty_graph():
    g = graph([])
    assert len(g) == 0 and g.session_id is None
    with pytest.raises(TargetNotFound):
        g.locate("x")
    assert g.checkpoint_before(10) is None


def test_parents_outside_the_graph_are_ignored():
    g = graph([art("a", T.USER_INPUT, 1), art("b", T.MODEL_TURN, 2, parents=("a", "ghost"))])
    assert g.taint("a") == {"a", "b"}
    assert g.children("ghost") == []


# -- locate ------------------------------------------------------------------
def test_locate_earliest_observation_wins(g):
    hit = g.locate(SECRET)
    assert isinstance(hit, Hit)
    assert hit.artifact_id == "tr1"
    assert hit.artifact_type is T.TOOL_RETURN
    assert hit.step == 2
    assert hit.source_ids == ("tool:lookup_ticket",)
    assert hit.target_hash == "h:" + SECRET
    # every artifact containing the target, in recording order
    assert hit.occurrences == ("tr1", "mt2", "reply2", "sum1", "mem1")


def test_locate_observation_wins_over_earlier_derived_artifact():
    # The model said it first (seq 2), the tool returned it later (seq 4): the entry is the observation.
    arts = [
        art("in", T.USER_INPUT, 1, step=1),
        art("mt", T.MODEL_TURN, 2, parents=("in",), step=1),
        art("call", T.TOOL_CALL, 3, parents=("mt",), step=2),
        art("tr", T.TOOL_RETURN, 4, parents=("call",), step=2, source_ids=("tool:x",)),
    ]
    g = graph(arts, {"in": "hi", "mt": "guess 1234", "call": "{}", "tr": "value 1234"})
    hit = g.locate("1234")
    assert hit.artifact_id == "tr" and hit.step == 2
    assert hit.occurrences == ("mt", "tr")


def test_locate_derived_only_fallback():
    arts = [
        art("in", T.USER_INPUT, 1, step=1),
        art("mt", T.MODEL_TURN, 2, parents=("in",), step=1),
        art("plan", T.PLAN, 3, parents=("mt",), step=1),
        art("mt2", T.MODEL_TURN, 4, parents=("in", "mt"), step=2),
    ]
    g = graph(arts, {"in": "hi", "mt": "I invent XYZZY", "plan": "XYZZY plan", "mt2": "XYZZY again"})
    hit = g.locate("XYZZY")
    assert hit.artifact_id == "mt"
    assert hit.artifact_type is T.MODEL_TURN
    assert hit.occurrences == ("mt", "plan", "mt2")


def test_locate_with_source_by_artifact_id(g):
    hit = g.locate(SECRET, source="mem1")
    assert hit.artifact_id == "mem1"
    assert hit.occurrences == ("mem1",)
    # a derived artifact named as source is honoured too
    assert g.locate(SECRET, source="sum1").artifact_id == "sum1"


def test_locate_with_source_by_source_key(g):
    hit = g.locate(SECRET, source="memory:users/42/fact-1")
    assert hit.artifact_id == "mem1" and hit.step == 4
    assert g.locate(SECRET, source="tool:lookup_ticket").artifact_id == "tr1"


def test_locate_source_that_does_not_contain_target(g):
    with pytest.raises(TargetNotFound) as ei:
        g.locate(SECRET, source="in2")
    assert ei.value.source == "in2"
    assert ei.value.session_id == SID


def test_target_not_found_is_lookup_error(g):
    with pytest.raises(LookupError):
        g.locate("not in any artifact")
    with pytest.raises(TargetNotFound) as ei:
        g.locate("not in any artifact")
    assert ei.value.target == "not in any artifact"
    # the message never repeats the target text
    assert "not in any artifact" not in str(ei.value)


@pytest.mark.parametrize("bad", ["", "   ", "\n\t", None, 42])
def test_empty_or_non_string_target_is_invalid_argument(g, bad):
    with pytest.raises(InvalidArgument):
        g.locate(bad)
    assert issubclass(InvalidArgument, ValueError)


def test_locate_skips_artifacts_without_content(g):
    arts = [art("a", T.USER_INPUT, 1), art("b", T.TOOL_RETURN, 2)]
    gg = graph(arts, {"b": "needle"})  # "a" has no vault content (e.g. erased)
    assert gg.locate("needle").artifact_id == "b"


def test_entry_sources_distinct_observation_sources(g):
    assert g.entry_sources(SECRET) == ["tool:lookup_ticket", "memory:users/42/fact-1"]


# -- taint ---------------------------------------------------------------------
def test_taint_includes_entry_and_flows_through_model_turns_and_summaries(g):
    closure = g.taint(g.locate(SECRET))
    assert "tr1" in closure
    assert {"mt2", "reply2", "sum1", "mt3"} <= closure
    # upstream and unrelated artifacts are not tainted
    assert not ({"sys", "in1", "mt1", "call1", "in2", "mt_clean", "mem1"} & closure)
    assert closure == {"tr1", "mt2", "reply2", "sum1", "mt3"}


def test_taint_accepts_hit_id_or_sequence(g):
    hit = g.locate(SECRET)
    assert g.taint(hit) == g.taint("tr1")
    assert g.taint(["tr1", "mem1"]) == g.taint("tr1") | {"mem1"}
    assert g.taint(()) == frozenset()


def test_taint_of_leaf_is_itself(g):
    assert g.taint("mem1") == {"mem1"}
    assert isinstance(g.taint("mem1"), frozenset)


def test_taint_unknown_id_raises(g):
    with pytest.raises(UnknownArtifact):
        g.taint("nope")
    with pytest.raises(UnknownArtifact):
        g.taint(["tr1", "nope"])


# -- independence --------------------------------------------------------------
def test_independent_when_manifest_disjoint_from_closure(g):
    closure = g.taint("tr1")
    assert g.manifest("mt_clean") == ("sys", "in2")
    assert g.independent("mt_clean", closure)
    assert not g.independent("mt2", closure)   # reads tr1 directly
    assert not g.independent("mt3", closure)   # reads the summary that absorbed tr1
    assert g.independent("mt1", closure)       # came before the entry


def test_turn_in_closure_is_never_independent():
    # the entry itself is a model turn (derived-only target): its own manifest is clean
    arts = [art("in", T.USER_INPUT, 1), art("mt", T.MODEL_TURN, 2, parents=("in",))]
    g = graph(arts, {"in": "hi", "mt": "made up 999"})
    closure = g.taint(g.locate("999"))
    assert closure == {"mt"}
    assert not (set(g.manifest("mt")) & closure)
    assert not g.independent("mt", closure)


def test_manifest_of_non_model_turn_is_invalid(g):
    with pytest.raises(InvalidArgument):
        g.manifest("tr1")
    with pytest.raises(UnknownArtifact):
        g.manifest("nope")


# -- checkpoints ---------------------------------------------------------------
def test_checkpoint_before():
    cps = [
        ckpt("c3", 30, 3, CheckpointKind.TOOL_CALL, 300),
        ckpt("c1", 10, 1, CheckpointKind.SESSION_START, 0),
        ckpt("c2a", 20, 2, CheckpointKind.TURN, 200),
        ckpt("c2b", 25, 2, CheckpointKind.MEMORY_INJECTION, 250),
    ]
    g = graph([], checkpoints=cps)
    assert [c.id for c in g.checkpoints] == ["c1", "c2a", "c2b", "c3"]
    assert g.checkpoint_before(0) is None
    assert g.checkpoint_before(1).id == "c1"
    assert g.checkpoint_before(2).id == "c2b"   # the latest of equal steps
    assert g.checkpoint_before(3).id == "c3"
    assert g.checkpoint_before(99).id == "c3"


def test_checkpoint_before_for_located_target(g):
    gg = graph(list(g), {a.id: g.content(a.id) for a in g},
               checkpoints=[ckpt("start", 0, 1), ckpt("tool", 4, 2, CheckpointKind.TOOL_CALL)])
    hit = gg.locate(SECRET)
    assert gg.checkpoint_before(hit.step).id == "tool"


# -- properties on random DAGs ---------------------------------------------------
ALL_TYPES = list(ArtifactType)


def _build_dag(spec) -> list[Artifact]:
    arts = []
    for i, (raw_parents, type_) in enumerate(spec):
        parents = dict.fromkeys(p % i for p in raw_parents) if i else {}
        arts.append(art(f"a{i}", type_, seq=i + 1, parents=[f"a{p}" for p in parents], step=i))
    return arts


def dags(max_size: int = 40):
    """Random DAGs in recording order: parents only point to earlier artifacts."""
    node = st.tuples(st.lists(st.integers(0, 1 << 16), max_size=4), st.sampled_from(ALL_TYPES))
    return st.lists(node, min_size=1, max_size=max_size).map(_build_dag)


def reference_reach(arts: list[Artifact], roots: set[str]) -> set[str]:
    """Forward reachability computed as a fixpoint over parent lists (independent of taint)."""
    reach = set(roots)
    changed = True
    while changed:
        changed = False
        for a in arts:
            if a.id not in reach and any(p in reach for p in a.parents):
                reach.add(a.id)
                changed = True
    return reach


def reaches(by_id: dict[str, Artifact], src: str, dst: str) -> bool:
    """Is ``src`` an ancestor-or-self of ``dst`` (walk parents backwards from dst)?"""
    stack, seen = [dst], set()
    while stack:
        x = stack.pop()
        if x == src:
            return True
        if x in seen or x not in by_id:
            continue
        seen.add(x)
        stack.extend(by_id[x].parents)
    return False


PROP = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROP
@given(arts=dags(), data=st.data())
def test_taint_equals_reference_reachability(arts, data):
    g = graph(arts)
    root = data.draw(st.sampled_from(arts)).id
    assert g.taint(root) == reference_reach(arts, {root})


@PROP
@given(arts=dags(), data=st.data())
def test_taint_of_many_roots_is_union(arts, data):
    g = graph(arts)
    roots = data.draw(st.lists(st.sampled_from([a.id for a in arts]), max_size=4, unique=True))
    expected = frozenset().union(*(g.taint(r) for r in roots)) if roots else frozenset()
    assert g.taint(roots) == expected == reference_reach(arts, set(roots))


@PROP
@given(arts=dags(), data=st.data())
def test_closure_is_closed_under_children_and_every_member_reachable(arts, data):
    g = graph(arts)
    by_id = {a.id: a for a in arts}
    root = data.draw(st.sampled_from(arts)).id
    closure = g.taint(root)
    assert root in closure
    for x in closure:
        assert set(g.children(x)) <= closure
        assert reaches(by_id, root, x)
    # and nothing reachable is left out
    for a in arts:
        if a.id not in closure:
            assert not reaches(by_id, root, a.id)


@PROP
@given(arts=dags(), data=st.data())
def test_taint_is_monotone(arts, data):
    g = graph(arts)
    b = data.draw(st.sampled_from(arts)).id
    tb = g.taint(b)
    for a in tb:
        assert g.taint(a) <= tb


@PROP
@given(arts=dags(), data=st.data())
def test_independence_iff_manifest_disjoint_from_closure(arts, data):
    g = graph(arts)
    root = data.draw(st.sampled_from(arts)).id
    closure = g.taint(root)
    for t in g.of_type(ArtifactType.MODEL_TURN):
        disjoint = not (set(g.manifest(t.id)) & closure)
        if t.id in closure:
            assert not g.independent(t.id, closure)
            # only the entry itself can sit in the closure with a clean manifest
            assert not disjoint or t.id == root
        else:
            assert g.independent(t.id, closure) == disjoint


@PROP
@given(arts=dags(max_size=25), data=st.data())
def test_locate_prefers_earliest_observation(arts, data):
    contents = {a.id: data.draw(st.sampled_from(["", "x", "y", "xy", "zz"])) for a in arts}
    g = graph(arts, contents)
    containing = [a for a in arts if "x" in contents[a.id]]
    if not containing:
        with pytest.raises(TargetNotFound):
            g.locate("x")
        return
    hit = g.locate("x")
    by_id = {a.id: a for a in arts}
    # an observation, or a state write none of whose parents holds it (the tool brought it in)
    obs = [a for a in containing if a.type in OBSERVATION_TYPES or (
        a.type is ArtifactType.STATE_WRITE and not any("x" in contents[p] for p in a.parents if p in by_id))]
    expected = (obs or containing)[0]
    assert hit.artifact_id == expected.id
    assert hit.step == expected.step
    assert hit.occurrences == tuple(a.id for a in containing)


# -- extension (graphs kept up to date as a session grows) ------------------------
def _view(g: ProvenanceGraph) -> tuple:
    """Everything a caller reads of a graph."""
    ids = [a.id for a in g]
    return (len(g), list(g), [c.id for c in g.checkpoints], {i: g.children(i) for i in ids},
            {i: g.taint(i) for i in ids}, {i: g.content(i) for i in ids}, g.session_id)


def test_extended_equals_a_full_build_and_leaves_the_old_graph_as_it_was():
    arts, contents = support_session()
    cps = [ckpt("c1", 1, 1), ckpt("c2", 6, 2), ckpt("c3", 9, 3)]
    g1 = ProvenanceGraph.from_records(arts[:5], cps[:1], {k: contents[k] for k in ("sys", "in1", "mt1")},
                                      session_id=SID)
    before = _view(g1)
    g2 = g1.extended(arts[5:9], cps[1:2], {a.id: contents[a.id] for a in arts[3:9]})
    g3 = g2.extended(arts[9:], cps[2:], {a.id: contents[a.id] for a in arts[9:]})
    assert g3.lineage is g1.lineage  # shared, not copied
    assert _view(g3) == _view(ProvenanceGraph(arts, cps, content_of=contents.get))
    assert _view(g1)[:5] == before[:5]  # older graphs see what they saw
    assert "mt2" not in g1 and g1.children("mt1") == ["call1"] and g1.taint("tr1") == {"tr1"}
    with pytest.raises(UnknownArtifact):
        g1.get("mt2")


def test_extending_an_older_graph_copies():
    arts, _ = support_session()
    g1 = ProvenanceGraph.from_records(arts[:4])
    g2 = g1.extended(arts[4:6])
    g1b = g1.extended(arts[4:5])  # g1 is not the newest of its lineage any more
    assert g1b.lineage is not g1.lineage and [a.id for a in g1b] == [a.id for a in arts[:5]]
    assert [a.id for a in g2] == [a.id for a in arts[:6]] and len(g1) == 4


def test_a_parent_recorded_after_its_child_gets_its_edge():
    arts = [art("mt", T.MODEL_TURN, 1, parents=("tr",)), art("sum", T.SUMMARY, 2, parents=("mt",)),
            art("tr", T.TOOL_RETURN, 3)]
    g = ProvenanceGraph.from_records(arts[:2]).extended(arts[2:])
    full = ProvenanceGraph(arts)
    assert g.children("tr") == full.children("tr") == ["mt"]
    assert g.taint("mt") == full.taint("mt")


def test_replaced_records_are_versioned():
    arts = [art("in", T.USER_INPUT, 1), art("mt", T.MODEL_TURN, 2, parents=("in",)),
            art("call", T.TOOL_CALL, 3, parents=("mt",)).model_copy(update={"committed": False})]
    g1 = ProvenanceGraph.from_records(arts)
    g2 = g1.extended([art("ret", T.TOOL_RETURN, 4, parents=("call",))],
                     replaced=[g1.get("call").model_copy(update={"committed": True})])
    assert g2.get("call").committed and [a.committed for a in g2][2]
    assert not g1.get("call").committed and not list(g1)[2].committed


@pytest.mark.parametrize("bad", ["again", "earlier", "moved", "content"])
def test_extended_refuses_what_is_not_an_append(bad):
    arts, _ = support_session()
    g = ProvenanceGraph.from_records(arts[:5], contents={"tr1": SECRET})
    with pytest.raises(InvalidArgument):
        if bad == "again":
            g.extended([arts[2]])
        elif bad == "earlier":
            g.extended([art("x", T.REPLY, 3)])
        elif bad == "moved":
            g.extended(replaced=[g.get("mt1").model_copy(update={"parents": ("sys",)})])
        else:
            g.extended(arts[5:6], contents={"tr1": "something else"})


@given(arts=dags(), data=st.data())
def test_growing_graphs_answer_like_full_builds(arts, data):
    cuts = sorted(set(data.draw(st.lists(st.integers(1, max(1, len(arts) - 1)), max_size=3))))
    contents = {a.id: a.id * 2 for a in arts}
    pieces, start = [], 0
    for c in cuts + [len(arts)]:
        if c > start:
            pieces.append(arts[start:c])
            start = c
    g = ProvenanceGraph.from_records(pieces[0], contents={a.id: contents[a.id] for a in pieces[0]})
    views = [(g, pieces[0])]
    for p in pieces[1:]:
        g = g.extended(p, contents={a.id: contents[a.id] for a in p})
        views.append((g, views[-1][1] + p))
    for gv, seen in views:  # every graph of the lineage, old ones included
        assert _view(gv)[:5] == _view(ProvenanceGraph(seen, content_of=contents.get))[:5]
