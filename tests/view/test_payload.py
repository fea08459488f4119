"""The page's data, by table: forget outcomes, IFC decisions, findings, texts only when asked."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from unsee.middleware.records import Artifact, ArtifactType
from unsee.plugins.view import ForgetRecord, build_payload, detector_findings, ifc_decisions
from unsee.plugins.view.payload import COLLAPSE_AT, before_outcomes


def art(id, type, step, parents=()):
    return {"id": id, "type": type, "step": step, "parents": list(parents), "turn": 0, "token_span": [0, 0],
            "source_ids": [], "committed": True}


BEFORE = [art("in-1", "user_input", 0), art("mt-1", "model_turn", 0, ["in-1"]),
          art("call-1", "tool_call", 0, ["mt-1"]), art("tr-1", "tool_return", 1, ["call-1"]),
          art("mt-2", "model_turn", 1, ["tr-1"]), art("call-2", "tool_call", 1, ["mt-2"]),
          art("tr-2", "tool_return", 2, ["call-2"]), art("in-2", "user_input", 3),
          art("mt-3", "model_turn", 3, ["in-2", "tr-2"]), art("mt-4", "model_turn", 3, ["mt-3"]),
          art("repl-4", "reply", 3, ["mt-4"])]


@pytest.mark.parametrize("decoded,remat,from_record,expect", [
    # the entry is sanitized, the prefix kept, inputs re-fed, a call served from the record takes its return
    ([], ["mt-2"], ["call-2"], {"prefix": ["in-1", "mt-1", "call-1"], "sanitized": ["tr-1"], "refed": ["in-2"],
                                "rematerialised": ["mt-2"], "from_record": ["call-2", "tr-2"],
                                "replaced": ["mt-3", "mt-4", "repl-4"], "decoded": []}),
    # a divergence at mt-2: everything derived after it is replaced
    (["mt-2"], [], [], {"prefix": ["in-1", "mt-1", "call-1"], "sanitized": ["tr-1"], "refed": ["in-2"],
                        "rematerialised": [], "from_record": [], "decoded": ["mt-2"],
                        "replaced": ["call-2", "tr-2", "mt-3", "mt-4", "repl-4"]}),
])
def test_every_artifact_before_a_forget_has_one_outcome(decoded, remat, from_record, expect):
    rec = ForgetRecord(event_id="e1", session_id="s", strategy="B7", created_at="2026-12-01T00:00:00+00:00",
                       tau=1, entry="tr-1", decoded=decoded, rematerialised=remat, from_record=from_record,
                       before_artifacts=BEFORE)
    got = before_outcomes(rec)
    assert {k: sorted(v) for k, v in got.items()} == {k: sorted(v) for k, v in expect.items()}
    assert sorted(x for v in got.values() for x in v) == sorted(a["id"] for a in BEFORE)


def test_ifc_decisions_go_on_the_artifacts_they_name_as_evidence():
    ev = {"name": "unsee.ifc.decision", "attributes": {
        "unsee.ifc.action": "block", "unsee.ifc.mode": "block", "unsee.ifc.tool": "send_money",
        "unsee.ifc.sinks": ["send_money.recipient"], "unsee.ifc.evidence": ["tr-1", "tr-2"],
        "unsee.ifc.labels": ["untrusted"], "unsee.ifc.identifier_hashes": ["hmac-sha256:00"]}}
    spans = [SimpleNamespace(events=[{"name": "unsee.artifact", "attributes": {}}, ev]), SimpleNamespace(events=[])]
    got = ifc_decisions(spans)
    assert set(got) == {"tr-1", "tr-2"}
    assert got["tr-1"] == [{"decision": "block", "mode": "block", "tool": "send_money",
                            "sink": "send_money.recipient", "label": "untrusted"}]


class Graph:
    """The part of a provenance graph the payload reads."""

    def __init__(self, arts, texts):
        self.session_id, self._arts, self._texts, self.checkpoints = "s", arts, texts, []

    def __iter__(self):
        return iter(self._arts)

    def content(self, aid):
        return self._texts.get(aid)


def graph(n=3):
    arts = [Artifact(id=f"a{i}", session_id="s", type=ArtifactType.TOOL_RETURN if i % 2 else ArtifactType.USER_INPUT,
                     step=i, parents=(f"a{i-1}",) if i else ()) for i in range(n)]
    return Graph(arts, {a.id: f"text of {a.id}" for a in arts})


def test_findings_screen_observations_of_the_world_and_never_carry_the_flagged_text():
    g = graph()
    seen = []

    def detect(text, aid):
        seen.append(aid)
        return [SimpleNamespace(detector="d", score=0.91234, reason="why", start=0, end=4)]

    got = detector_findings(g, detect)
    assert seen == ["a1"]  # tool returns only: user inputs are the user's own words
    assert got == {"a1": [{"detector": "d", "score": 0.912, "reason": "why", "start": 0, "end": 4}]}


def test_texts_are_in_the_payload_only_when_asked_and_large_sessions_start_collapsed():
    g = graph()
    plain = build_payload(g)
    assert plain["content_included"] is False and all(a["text"] is None for a in plain["graph"]["artifacts"])
    full = build_payload(g, contents={"a0": "hello"})
    assert full["content_included"] is True and full["graph"]["artifacts"][0]["text"] == "hello"
    assert plain["collapse"] is False and build_payload(graph(COLLAPSE_AT + 1))["collapse"] is True
    assert build_payload(g, collapse=True)["collapse"] is True
    hit = build_payload(g, closure={"a1", "a2"}, entry=g._arts[1])
    assert hit["target"] == {"entry": "a1", "tau": 1, "closure": ["a1", "a2"], "source": None}


def test_a_forgets_reconciliation_is_in_its_payload_by_ids_names_and_states_only():
    from unsee.plugins.view.layout import DX

    from .payloads import RECONCILED_ARGS, reconciled_payload, reconciled_record

    payload = reconciled_payload()
    f = payload["forget"]
    assert f["outcome"]["reconciliation"] == [
        {"id": "rec-comp", "type": "compensation", "parents": ["call-1"], "action": "compensate",
         "tool": "issue_refund", "runs": "reverse_refund", "state": "done"},
        {"id": "rec-run", "type": "deferred_run", "parents": [], "action": "run", "tool": "issue_refund",
         "runs": "issue_refund", "state": "planned"},
        {"id": "rec-left", "type": "left", "parents": ["call-2"], "action": "report", "tool": "remember",
         "runs": None, "state": "left"}]
    assert RECONCILED_ARGS not in json.dumps(payload)  # the record's sketches held it: never the page
    # a compensation sits in a lane below the before graph's, at the step of the call it undoes
    lay = f["before"]["layout"]
    assert lay["reconciliation"] == {"y": max(lane["y"] for lane in lay["lanes"]) + lay["dy"],
                                     "nodes": {"rec-comp": {"x": 2 * DX, "y": lay["reconciliation"]["y"]}}}
    # a record written before reconciliation existed: no items, nothing laid out
    old = reconciled_record().model_copy(update={"reconciliation": []})
    part = build_payload(Graph([], {}), forget=old)["forget"]
    assert part["outcome"]["reconciliation"] == [] and part["before"]["layout"]["reconciliation"]["nodes"] == {}
    assert build_payload(Graph([], {}))["forget"] is None
