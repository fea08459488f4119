"""Incremental labels and indexed decisions equal the reference pipeline (pure).

``LabelTable`` (labels kept up to date as a graph is extended) must give what
``label_graph`` gives, and ``SessionDecisions.evaluate`` (an identifier index,
labels by setting) what ``evaluate`` decides, after random appends,
revocations and endorsements, including parents recorded after their children.
"""

from __future__ import annotations

import urllib.parse

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from unsee.middleware.graph import ProvenanceGraph
from unsee.middleware.records import Artifact, ArtifactType
from unsee.plugins.ifc import evaluate, label_graph
from unsee.plugins.ifc.adapter import BoundedLRU
from unsee.plugins.ifc.index import SessionDecisions, unvetted_sources
from unsee.plugins.ifc.labels import LABEL_SETS, LabelTable, _matches, source_matches

T = ArtifactType
SID = "s-inc"
SOURCES = ["tool:web", "tool:web/page", "tool:send", "tool:send_money", "memory:users", "memory:users/42",
           "memory:users_old/1", "user", "system_prompt", "tool:", ""]
KEYS = ["tool:web", "tool:send", "memory:users", "memory:", "tool:", "user", "tool:web/"]


def _chunks(items, cuts):
    out, start = [], 0
    for c in sorted(set(cuts)):
        if start < c < len(items):
            out.append(items[start:c])
            start = c
    out.append(items[start:])
    return [c for c in out if c]


def _grow(arts, contents, cuts):
    """Graphs of ``arts`` growing chunk by chunk (``extended``), the last holding them all."""
    chunks = _chunks(arts, cuts)
    g = ProvenanceGraph.from_records(chunks[0], contents={a.id: contents[a.id] for a in chunks[0]
                                                          if a.id in contents}, session_id=SID)
    yield g
    for c in chunks[1:]:
        g = g.extended(c, contents={a.id: contents[a.id] for a in c if a.id in contents})
        yield g


@st.composite
def sessions(draw, max_size=14, with_content=False):
    n = draw(st.integers(1, max_size))
    ids = [f"a{i}" for i in range(n)]
    arts = []
    for i, aid in enumerate(ids):
        typ = draw(st.sampled_from(list(T)) | st.sampled_from([T.TOOL_RETURN, T.MEMORY_READ, T.USER_INPUT]))
        # mostly earlier parents; sometimes later ones, itself, or one never recorded
        pool = ids[:i] + (ids[i:] if draw(st.integers(0, 5)) == 0 else []) + ["ghost"]
        parents = draw(st.lists(st.sampled_from(pool), max_size=3)) if pool else []
        arts.append(Artifact(id=aid, session_id=SID, type=typ, seq=i + 1, parents=tuple(parents),
                             source_ids=tuple(draw(st.lists(st.sampled_from(SOURCES), max_size=2))),
                             labels=tuple(draw(st.lists(st.sampled_from(["untrusted", "revoked", "trusted"]),
                                                        max_size=1))),
                             content_hash=f"h-{aid}", attrs={"executed": draw(st.booleans())}))
    contents = {}
    if with_content:
        for a in arts:
            contents[a.id] = draw(texts())
    cuts = draw(st.lists(st.integers(1, max(1, n - 1)), max_size=4))
    return arts, contents, cuts


@st.composite
def setting(draw, ids):
    return dict(
        trusted_sources=draw(st.lists(st.sampled_from(KEYS), max_size=2)),
        revoked=draw(st.lists(st.sampled_from(ids + KEYS), max_size=2)),
        endorsed=draw(st.lists(st.sampled_from(ids), max_size=3)),
        reset_at_trusted_sources=draw(st.booleans()),
    )


@given(st.sampled_from(SOURCES), st.lists(st.sampled_from(KEYS + SOURCES), max_size=4))
def test_source_matching_by_prefixes_equals_trying_every_key(source, keys):
    assert _matches([source], frozenset(keys)) == any(source_matches(source, k) for k in keys)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions(), st.data())
def test_label_table_equals_label_graph_as_the_graph_grows(session, data):
    arts, contents, cuts = session
    kw = data.draw(setting([a.id for a in arts]))
    table = LabelTable(kw["trusted_sources"], kw["revoked"], reset_at_trusted_sources=kw["reset_at_trusted_sources"],
                       endorsed=kw["endorsed"])
    for g in _grow(arts, contents, cuts):
        table.update(g)
        expected = label_graph(g, **kw)
        assert {a.id: table.get(g, a.id) for a in g} == expected


def test_label_table_relabels_when_a_parent_arrives_after_its_child():
    arts = [Artifact(id="mt", session_id=SID, type=T.MODEL_TURN, seq=1, parents=("tr",)),
            Artifact(id="sum", session_id=SID, type=T.SUMMARY, seq=2, parents=("mt",)),
            Artifact(id="tr", session_id=SID, type=T.TOOL_RETURN, seq=3, source_ids=("tool:web",))]
    g1 = ProvenanceGraph.from_records(arts[:2], session_id=SID)
    table = LabelTable()
    table.update(g1)
    assert LABEL_SETS[table.masks[1]] == frozenset({"trusted"})  # no parent in the graph yet
    g2 = g1.extended(arts[2:])
    table.update(g2)
    assert table.relabels == 2 and {a.id: table.get(g2, a.id) for a in g2} == label_graph(g2)
    table.update(g1)  # an older graph of the same lineage: labelled as it is
    assert {a.id: table.get(g1, a.id) for a in g1} == label_graph(g1)


# -- decisions -------------------------------------------------------------------

IDENTS = ["DE89 3704 0044 0532 0130 00", "GB82 WEST 1234 5698 7654 32", "bob@evil.com", "alice@example.org",
          "https://pay.evil.com/x?id=1", "www.evil.com", "evil.com", "devil.community", "+49 170 1234567",
          "4111 1111 1111 1111", "0x52908400098527886E0F7030069857D2E4169EE7"]
FILLER = ["pay", "to", "the", "invoice", "at", " ", ", ", "\n", "see"]


def texts():
    return st.lists(st.sampled_from(IDENTS + FILLER), max_size=6).map(" ".join)


@st.composite
def sink_value(draw):
    ident = draw(st.sampled_from(IDENTS + ["nobody@nowhere.net", "pay.evil.com", "EVIL.COM"]))
    how = draw(st.sampled_from(["same", "upper", "nospace", "dashes", "www", "percent", "embedded", "prefix"]))
    if how == "upper":
        return ident.upper()
    if how == "nospace":
        return ident.replace(" ", "")
    if how == "dashes":
        return ident.replace(" ", "-")
    if how == "www":
        return "www." + ident
    if how == "percent":
        return urllib.parse.quote(ident)
    if how == "embedded":
        return f"please send it to {ident} today"
    if how == "prefix":
        return ident[: max(1, len(ident) // 2)]
    return ident


@st.composite
def calls(draw):
    tool = draw(st.sampled_from(["send_money", "send_email"]))
    v1, v2 = draw(sink_value()), draw(sink_value())
    shape = draw(st.sampled_from(["one", "split", "two", "list", "nested"]))
    if shape == "split":  # an identifier split over two sink arguments
        cut = draw(st.integers(0, len(v1)))
        args = {"recipient": v1[:cut], "memo": v1[cut:]}
    elif shape == "two":
        args = {"recipient": v1, "memo": v2}
    elif shape == "list":
        args = {"recipient": [v1, v2]}
    elif shape == "nested":
        args = {"recipient": {"iban": v1[:8], "rest": v1[8:]}, "amount": 5}
    else:
        args = {"recipient": v1, "amount": 100}
    sinks = draw(st.sampled_from([["send_money.recipient"], ["send_money.*"],
                                  ["send_money.recipient", "send_money.memo", "send_email.*"]]))
    return tool, args, sinks


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(sessions(max_size=10, with_content=True), st.data())
def test_indexed_decisions_equal_evaluate_as_the_session_grows(session, data):
    arts, contents, cuts = session
    ids = [a.id for a in arts]
    state = SessionDecisions(cache=BoundedLRU(10_000))
    for g in _grow(arts, contents, cuts):
        for _ in range(data.draw(st.integers(1, 3))):
            kw = data.draw(setting(ids))
            external = [a.id for a in g if a.type in (T.TOOL_RETURN, T.MEMORY_READ)]
            kw["endorsed"] = data.draw(st.lists(st.sampled_from(external), max_size=4)) if external else []
            tool, args, sinks = data.draw(calls())
            mode = data.draw(st.sampled_from(["block", "ask", "audit"]))
            expected = evaluate(g, tool, args, sinks, mode=mode, **kw)
            assert state.evaluate(g, tool, args, sinks, mode=mode, **kw) == expected
            flagged = expected.artifact_ids
            assert state.unvetted_sources(g, flagged) == unvetted_sources(g, flagged)


def test_indexed_decision_on_a_long_session_is_the_reference_one():
    arts, contents, prev = [], {}, None
    for i in range(300):
        for aid, typ, text in ((f"mt{i}", T.MODEL_TURN, f"reading page {i}"),
                               (f"tr{i}", T.TOOL_RETURN, f"From bob{i}@mail{i}.example.com, pay DE89 3704 0044 0532"
                                                          f" 0130 00 at https://pay{i}.example.org/x?id={i}")):
            arts.append(Artifact(id=aid, session_id=SID, type=typ, seq=len(arts) + 1,
                                 parents=(prev,) if prev else (), content_hash=f"h-{aid}",
                                 source_ids=("tool:read_inbox",) if typ is T.TOOL_RETURN else ()))
            contents[aid] = text
            prev = aid
    arts.append(Artifact(id="in", session_id=SID, type=T.USER_INPUT, seq=len(arts) + 1, content_hash="h-in"))
    contents["in"] = "my own address is bob7@mail7.example.com"
    g = ProvenanceGraph.from_records(arts, contents=dict(contents), session_id=SID)
    state = SessionDecisions(cache=BoundedLRU(10_000))
    for args in ({"recipient": "bob150@mail150.example.com"}, {"recipient": "BOB7@MAIL7.EXAMPLE.COM"},
                 {"recipient": "de89370400440532013000"}, {"recipient": "https://pay3.example.org/x?id=3"},
                 {"recipient": "nobody@nowhere.net"}, {"recipient": "mail299.example.com"}):
        for endorsed in ((), ("tr150", "tr3")):
            expected = evaluate(g, "send_money", args, ["send_money.recipient"], endorsed=endorsed)
            assert state.evaluate(g, "send_money", args, ["send_money.recipient"], endorsed=endorsed) == expected


def test_sessions_evaluate_checks_the_mode_first():
    from unsee.plugins.ifc import InvalidMode

    g = ProvenanceGraph.from_records([], session_id=SID)
    with pytest.raises(InvalidMode):
        SessionDecisions().evaluate(g, "send_money", {"recipient": "x"}, ["send_money.recipient"], mode="nope")
