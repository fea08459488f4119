"""Trust labels on small hand-built provenance graphs (pure)."""

from __future__ import annotations

import pytest

from unsee.middleware.graph import ProvenanceGraph
from unsee.middleware.records import Artifact, ArtifactType
from unsee.plugins.ifc.labels import (
    REVOKED,
    TRUSTED,
    UNTRUSTED,
    label_graph,
    own_labels,
    source_matches,
)

T = ArtifactType
SID = "s-ifc"
TR = frozenset({TRUSTED})
UN = frozenset({UNTRUSTED})


def art(aid, type_, seq, *, parents=(), source_ids=(), labels=()) -> Artifact:
    return Artifact(id=aid, session_id=SID, type=type_, seq=seq, parents=tuple(parents),
                    source_ids=tuple(source_ids), labels=tuple(labels))


def graph(arts, contents=None) -> ProvenanceGraph:
    return ProvenanceGraph(arts, content_of=dict(contents or {}).get)


def session():
    """sys + in1 -> mt1 -> call1 -> tr1 (lookup_ticket) ; mem1 (memory users) ;
    mt2 reads everything -> call2 -> tr2 (web) ; mt3 reads sys, in1 only ; in2 (user)."""
    return [
        art("sys", T.PROMPT_BLOCK, 0, source_ids=("system_prompt",)),
        art("in1", T.USER_INPUT, 1, source_ids=("user",)),
        art("mt1", T.MODEL_TURN, 2, parents=("sys", "in1")),
        art("call1", T.TOOL_CALL, 3, parents=("mt1",)),
        art("tr1", T.TOOL_RETURN, 4, parents=("call1",), source_ids=("tool:lookup_ticket",)),
        art("mem1", T.MEMORY_READ, 5, source_ids=("memory:users/42/iban",)),
        art("mt2", T.MODEL_TURN, 6, parents=("sys", "in1", "mt1", "tr1", "mem1")),
        art("call2", T.TOOL_CALL, 7, parents=("mt2",)),
        art("tr2", T.TOOL_RETURN, 8, parents=("call2",), source_ids=("tool:web_search",)),
        art("mt3", T.MODEL_TURN, 9, parents=("sys", "in1")),
        art("in2", T.USER_INPUT, 10, source_ids=("user",)),
        art("mt4", T.MODEL_TURN, 11, parents=("sys", "in1", "mt2", "tr2", "in2")),
    ]


def test_default_labels_user_trusted_tools_and_memory_untrusted():
    labels = label_graph(graph(session()))
    assert list(labels) == [a.id for a in session()]  # recording order
    assert labels["sys"] == TR and labels["in1"] == TR and labels["in2"] == TR
    assert labels["mt1"] == TR and labels["call1"] == TR and labels["mt3"] == TR
    assert labels["tr1"] == UN and labels["mem1"] == UN and labels["tr2"] == UN
    # propagation: everything downstream of an untrusted observation is untrusted
    assert labels["mt2"] == UN and labels["call2"] == UN and labels["mt4"] == UN


def test_declared_trusted_sources_by_prefix():
    labels = label_graph(graph(session()), trusted_sources={"tool:lookup_ticket", "memory:users"})
    assert labels["tr1"] == TR and labels["mem1"] == TR
    assert labels["mt2"] == TR and labels["call2"] == TR
    assert labels["tr2"] == UN and labels["mt4"] == UN


def test_source_prefix_respects_boundaries():
    assert source_matches("memory:users/42/iban", "memory:users")
    assert source_matches("memory:users/42/iban", "memory:users/")
    assert source_matches("tool:lookup_ticket", "tool:lookup_ticket")
    assert source_matches("tool:mcp:files", "tool:mcp")
    assert not source_matches("memory:users_old/1", "memory:users")
    assert not source_matches("tool:send_money", "tool:send")
    assert not source_matches("tool:x", "")


def test_revoked_artifact_and_its_descendants():
    labels = label_graph(graph(session()), trusted_sources={"tool:lookup_ticket", "memory:users"},
                         revoked={"in1"})
    assert labels["in1"] == {REVOKED}
    assert REVOKED in labels["mt1"] and REVOKED in labels["tr1"] and REVOKED in labels["mt3"]
    assert labels["mt4"] == {REVOKED, UNTRUSTED}
    assert labels["in2"] == TR and labels["sys"] == TR
    assert not any(TRUSTED in v and (v - TR) for v in labels.values())  # never trusted + restrictive


def test_revoked_by_source_key():
    labels = label_graph(graph(session()), revoked={"memory:users/42"})
    assert labels["mem1"] == {REVOKED, UNTRUSTED}
    assert REVOKED in labels["mt2"] and REVOKED not in labels["mt1"]


def test_strict_propagation_reaches_a_trusted_tool_through_its_call():
    arts = [
        art("in1", T.USER_INPUT, 0, source_ids=("user",)),
        art("tr0", T.TOOL_RETURN, 1, source_ids=("tool:web",)),
        art("mt1", T.MODEL_TURN, 2, parents=("in1", "tr0")),
        art("call1", T.TOOL_CALL, 3, parents=("mt1",)),
        art("tr1", T.TOOL_RETURN, 4, parents=("call1",), source_ids=("tool:lookup_ticket",)),
    ]
    strict = label_graph(graph(arts), trusted_sources=["tool:lookup_ticket"])
    assert strict["tr1"] == UN
    reset = label_graph(graph(arts), trusted_sources=["tool:lookup_ticket"], reset_at_trusted_sources=True)
    assert reset["tr1"] == TR and reset["call1"] == UN
    # revoked still flows through a reset
    revoked = label_graph(graph(arts), trusted_sources=["tool:lookup_ticket"], revoked=["tr0"],
                          reset_at_trusted_sources=True)
    assert revoked["tr1"] == {REVOKED}


def test_restrictive_labels_on_records_are_kept_and_trusted_ones_ignored():
    arts = [
        art("in1", T.USER_INPUT, 0, source_ids=("user",), labels=("untrusted",)),
        art("tr1", T.TOOL_RETURN, 1, source_ids=("tool:web",), labels=("trusted",)),
        art("mt1", T.MODEL_TURN, 2, parents=("in1",)),
    ]
    labels = label_graph(graph(arts))
    assert labels["in1"] == UN and labels["tr1"] == UN and labels["mt1"] == UN


def test_out_of_order_parent_and_missing_parent():
    arts = [
        art("mt1", T.MODEL_TURN, 0, parents=("tr9", "ghost")),  # parent recorded later; one not in graph
        art("sum1", T.SUMMARY, 1, parents=("mt1",)),
        art("tr9", T.TOOL_RETURN, 2, source_ids=("tool:web",)),
    ]
    labels = label_graph(graph(arts))
    assert labels["mt1"] == UN and labels["sum1"] == UN


def test_parentless_derived_artifact_is_trusted_and_missing_parents_count_as_none():
    a = art("blk", T.PROMPT_BLOCK, 0, parents=("elsewhere",), source_ids=("system_prompt",))
    assert own_labels(a) == frozenset()
    assert own_labels(a, has_parents=False) == TR
    assert label_graph(graph([a])) == {"blk": TR}


def test_empty_graph():
    assert label_graph(graph([])) == {}


@pytest.mark.parametrize("n", [2000])
def test_long_chain_is_fast(n):
    arts = [art("tr0", T.TOOL_RETURN, 0, source_ids=("tool:web",))]
    arts += [art(f"m{i}", T.MODEL_TURN, i, parents=(arts[-1].id if i == 1 else f"m{i - 1}",))
             for i in range(1, n)]
    labels = label_graph(graph(arts))
    assert labels[f"m{n - 1}"] == UN
