"""A forget is a trace of its own (plugins/forget/trace.py): the pure layout by table, then a real
forget through ``Unsee`` with an in-memory exporter (the agent, its sandbox and its erasure
real): the root span names the event and the target only by its keyed hash, the phases and the
erasure routes are its children, the receipt's digest is the file's, and no span carries the
target."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from unsee.plugins.forget import RevocationEvent
from unsee.plugins.forget.report import ForgetReport, TransitionOutcome
from unsee.plugins.forget.trace import ATTR, ForgetTiming, _Phase, failed_spans, forget_spans


def _report(**kw):
    base = dict(session_id="s1", strategy="B7", event_id="ev-1", target_hash="hmac-sha256:ab", tau=3,
                closure_size=5, checkpoint_id="ckpt-1", checkpoint_kind="turn", committed=True,
                transitions_replayed=4, outcome=TransitionOutcome(decoded=["a", "b"], rematerialised=["c"],
                                                                 from_record=["d"], executed=[]))
    return ForgetReport(**{**base, **kw})


def _erasure(routes):
    receipt = SimpleNamespace(routes=[SimpleNamespace(name=n, method=m, copies_before=b, copies_after=a)
                                      for n, m, b, a in routes])
    return SimpleNamespace(receipt=receipt, times={"unsee.ledger": (1500, 1600)})


# (phases timed, erasure routes) -> expected (span name, parent name) and attributes per span
CASES = [
    pytest.param(
        ["locate", "plan", "replay", "commit", "erase"],
        [("langgraph.checkpoints", "rewrite", 4, 0), ("unsee.ledger", "redact", 1, 0)],
        [("invoke_workflow unsee.forget", None), ("unsee.forget.locate", "invoke_workflow unsee.forget"),
         ("unsee.forget.plan", "invoke_workflow unsee.forget"), ("unsee.forget.replay", "invoke_workflow unsee.forget"),
         ("unsee.forget.commit", "invoke_workflow unsee.forget"), ("unsee.forget.erase", "invoke_workflow unsee.forget"),
         ("unsee.erasure langgraph.checkpoints", "unsee.forget.erase"),
         ("unsee.erasure unsee.ledger", "unsee.forget.erase")],
        id="replay-commit-erase"),
    pytest.param(["locate", "plan"], [], [("invoke_workflow unsee.forget", None),
                                          ("unsee.forget.locate", "invoke_workflow unsee.forget"),
                                          ("unsee.forget.plan", "invoke_workflow unsee.forget")], id="an-edit"),
]


@pytest.mark.parametrize(("phases", "routes", "expected"), CASES)
def test_the_layout_of_a_forgets_trace(phases, routes, expected):
    t = ForgetTiming(start_ns=1000, end_ns=2000,
                     phases=[_Phase(p, 1000 + 100 * i, 1100 + 100 * i) for i, p in enumerate(phases)],
                     erasure=_erasure(routes) if routes else None)
    specs = forget_spans(_report(), t, raised_by="detector")
    got = [(s.name, None if s.parent is None else specs[s.parent].name) for s in specs]
    assert got == expected
    root = specs[0].attributes
    assert root["gen_ai.operation.name"] == "invoke_workflow" and root["gen_ai.workflow.name"] == "unsee.forget"
    assert {root[ATTR[k]] for k in ("event", "raised_by", "target_hash", "strategy")} == {
        "ev-1", "detector", "hmac-sha256:ab", "B7"}
    assert (root[ATTR["tau"]], root[ATTR["influence"]], root[ATTR["fork"]]) == (3, 5, "ckpt-1")
    assert all(s.attributes["gen_ai.conversation.id"] == "s1" for s in specs)
    assert not any("unsee.session.id" in s.attributes for s in specs)  # not a record of the session
    assert not any("gen_ai.operation.name" in s.attributes for s in specs[1:])  # unsee's steps, not GenAI ops
    by_name = {s.name: s for s in specs}
    if "unsee.forget.replay" in by_name:
        r = by_name["unsee.forget.replay"].attributes
        assert (r[ATTR["decoded"]], r[ATTR["rematerialised"]], r[ATTR["from_record"]]) == (2, 1, 1)
    if routes:
        ledger = by_name["unsee.erasure unsee.ledger"]
        assert (ledger.start_ns, ledger.end_ns) == (1500, 1600)  # the route's own times
        assert (ledger.attributes[ATTR["before"]], ledger.attributes[ATTR["after"]]) == (1, 0)
        assert ledger.attributes[ATTR["method"]] == "redact"


def _scenario_exporting(tmp_path, monkeypatch):
    """The erasure scenario (``erasure_agents.build``) in ``tmp_path/home``, its ``Unsee``'s spans
    also exported to memory: (u, agent, close, exporter)."""
    from tests.support import erasure_agents as ea
    from unsee import Unsee

    exporter = InMemorySpanExporter()
    original = Unsee.__init__

    def with_exporter(self, *a, **kw):
        kw.setdefault("span_processors", [SimpleSpanProcessor(exporter)])
        original(self, *a, **kw)

    monkeypatch.setattr(Unsee, "__init__", with_exporter)
    home = tmp_path / "home"
    home.mkdir()
    return (*ea.build(home), exporter)


def test_restore_steps_and_turns_nest_under_the_replay_and_link_what_they_supersede():
    t = ForgetTiming(start_ns=1000, end_ns=3000, phases=[
        _Phase("plan", 1000, 1100),
        _Phase("replay", 1100, 2000),
        _Phase("restore", 1110, 1200, parent=1),
        _Phase("restore.kv_cache", 1120, 1130, parent=2, attrs={"kv_offset": 42, "kv_cropped": True}),
        _Phase("restore.sandbox", 1140, 1190, parent=2, attrs={"snapshot": "snap-1"}),
        _Phase("turn", 1200, 1500, parent=1, attrs={"turn": 2}),
        _Phase("turn", 1500, 1990, parent=1, attrs={"turn": 3}, error="ReplayFailed"),
    ], superseded={"a": (2, "0" * 31 + "1", "0" * 15 + "a"), "c": (3, "0" * 31 + "1", "0" * 15 + "c"),
                   "d": (3, None, None)})
    specs = forget_spans(_report(), t)
    got = [(s.name, None if s.parent is None else specs[s.parent].name) for s in specs]
    assert got == [("invoke_workflow unsee.forget", None), ("unsee.forget.plan", "invoke_workflow unsee.forget"),
                   ("unsee.forget.replay", "invoke_workflow unsee.forget"),
                   ("unsee.forget.restore", "unsee.forget.replay"),
                   ("unsee.forget.restore.kv_cache", "unsee.forget.restore"),
                   ("unsee.forget.restore.sandbox", "unsee.forget.restore"),
                   ("unsee.forget.turn", "unsee.forget.replay"), ("unsee.forget.turn", "unsee.forget.replay")]
    kv, sandbox, t2, t3 = specs[4], specs[5], specs[6], specs[7]
    assert (kv.attributes[ATTR["kv_offset"]], kv.attributes[ATTR["kv_cropped"]]) == (42, True)
    assert sandbox.attributes[ATTR["snapshot"]] == "snap-1"
    # outcome: decoded a, b; rematerialised c; from_record d
    assert (t2.attributes[ATTR["turn"]], t2.attributes[ATTR["decoded"]], t2.attributes[ATTR["rematerialised"]]) == (
        2, 1, 0)
    assert (t3.attributes[ATTR["rematerialised"]], t3.attributes[ATTR["from_record"]], t3.error) == (
        1, 1, "ReplayFailed")
    assert [(c.span_id, a[ATTR["mode"]]) for c, a in t2.links] == [(0xa, "decoded")]
    assert [(c.span_id, a[ATTR["mode"]]) for c, a in t3.links] == [(0xc, "rematerialised")]  # d: no span known


def test_a_failed_forgets_layout():
    t = ForgetTiming(start_ns=1000, end_ns=2000, phases=[_Phase("plan", 1000, 1100),
                                                         _Phase("replay", 1100, 1900, error="ReplayFailed")])
    specs = failed_spans("s1", "ev-9", "hmac-sha256:ab", t, RuntimeError("x"), raised_by="detector", strategy="B7")
    assert [s.name for s in specs] == ["invoke_workflow unsee.forget", "unsee.forget.plan", "unsee.forget.replay"]
    assert specs[0].error == "RuntimeError" and specs[2].error == "ReplayFailed"
    assert specs[0].attributes[ATTR["committed"]] is False and specs[0].attributes[ATTR["raised_by"]] == "detector"


def test_a_forget_sends_its_own_trace(tmp_path, monkeypatch):
    from tests.support import erasure_agents as ea

    u, agent, close, exporter = _scenario_exporting(tmp_path, monkeypatch)
    try:
        ea.run(agent, "t1")
        u.flush()
        session_traces = {s.context.trace_id for s in exporter.get_finished_spans()}
        exporter.clear()
        report = u.forget("t1", RevocationEvent(target=ea.SECRET, event_id="ev-trace"))
        assert report.committed and report.erased_clean
        u.flush()
        spans = exporter.get_finished_spans()
        roots = [s for s in spans if s.name == "invoke_workflow unsee.forget"]
        assert len(roots) == 1
        root = roots[0]
        assert root.parent is None and root.context.trace_id not in session_traces  # a trace of its own
        mine = [s for s in spans if s.context.trace_id == root.context.trace_id]
        names = {s.name for s in mine}
        assert {"unsee.forget.plan", "unsee.forget.replay", "unsee.forget.commit", "unsee.forget.erase",
                "unsee.forget.receipt", "unsee.erasure sandbox", "unsee.erasure unsee.ledger"} <= names, names
        a = root.attributes
        assert a[ATTR["event"]] == "ev-trace" and a[ATTR["target_hash"]] == u.hasher.hash(ea.SECRET)
        assert a[ATTR["tau"]] == report.tau and a[ATTR["influence"]] == report.closure_size
        assert a[ATTR["fork"]] == report.checkpoint_id and a[ATTR["clean"]] is True
        receipt = next(s for s in mine if s.name == "unsee.forget.receipt")
        digest = "sha256:" + hashlib.sha256(Path(report.receipt).read_bytes()).hexdigest()
        assert receipt.attributes[ATTR["receipt"]] == digest
        for s in mine:  # every phase inside the root's time
            assert root.start_time <= s.start_time <= s.end_time <= root.end_time, s.name
        # the target is on no span at all (the replay's agent spans included)
        dumped = json.dumps([dict(s.attributes or {}) for s in spans] +
                            [[dict(e.attributes or {}) for e in s.events] for s in spans], default=str)
        assert ea.SECRET not in dumped
        # each replayed turn is a span under replay, linked to the spans it supersedes (in the
        # session's recorded traces)
        replay = next(s for s in mine if s.name == "unsee.forget.replay")
        turns = [s for s in mine if s.name == "unsee.forget.turn"]
        assert turns and all(s.parent.span_id == replay.context.span_id for s in turns)
        superseded = [l for s in turns for l in s.links]
        assert superseded and all(l.context.trace_id in session_traces for l in superseded)
        assert {l.attributes[ATTR["link"]] for l in superseded} == {"supersedes"}
        assert sum(s.attributes[ATTR["decoded"]] + s.attributes[ATTR["rematerialised"]]
                   + s.attributes[ATTR["from_record"]] for s in turns) == len(
            report.outcome.decoded + report.outcome.rematerialised + report.outcome.from_record)
        restore = next(s for s in mine if s.name == "unsee.forget.restore")
        assert restore.parent.span_id == replay.context.span_id
        steps = {s.name for s in mine if s.parent is not None and s.parent.span_id == restore.context.span_id}
        assert {"unsee.forget.restore.records", "unsee.forget.restore.agent_state",
                "unsee.forget.restore.sandbox"} <= steps, steps
        # the store keeps the forget's trace with the session's spans (so `unsee export` sends it),
        # not as records of the session
        stored = {r.span_id for r in u.store.spans("t1") if r.trace_id == format(root.context.trace_id, "032x")}
        assert stored == {format(s.context.span_id, "016x") for s in mine}
        assert not [a for a in u.graph("t1") if a.trace_id == format(root.context.trace_id, "032x")]
        jaeger = tmp_path / "t1.json"
        u.export_jaeger_json("t1", jaeger)
        assert "invoke_workflow unsee.forget" in jaeger.read_text()
    finally:
        close()


def test_a_later_forget_keeps_the_trace_of_an_earlier_one(tmp_path, monkeypatch):
    """A commit replaces the session's spans from its fork point on, but not the traces that
    describe the session (an earlier forget's)."""
    from tests.support import erasure_agents as ea

    home = tmp_path / "home"
    home.mkdir()
    u, agent, close = ea.build(home)
    try:
        ea.run(agent, "t1")
        u.forget("t1", RevocationEvent(target=ea.SECRET, event_id="ev-first"))
        u.flush()
        first = {r.trace_id for r in u.store.spans("t1") if r.name == "invoke_workflow unsee.forget"}
        assert len(first) == 1
        ea.run(agent, "t1")  # the session goes on, and the secret comes back in
        u.forget("t1", RevocationEvent(target=ea.SECRET, event_id="ev-second"))
        u.flush()
        roots = [r for r in u.store.spans("t1") if r.name == "invoke_workflow unsee.forget"]
        assert {r.attributes[ATTR["event"]] for r in roots} == {"ev-first", "ev-second"}
        assert first <= {r.trace_id for r in roots}
    finally:
        close()


def test_a_failed_forget_sends_a_trace_marked_with_its_error(tmp_path, monkeypatch):
    from tests.support import erasure_agents as ea
    from unsee.middleware import faults

    u, agent, close, exporter = _scenario_exporting(tmp_path, monkeypatch)
    try:
        ea.run(agent, "t1")
        u.flush()
        exporter.clear()
        with faults.crash_at("replay:done"), pytest.raises(BaseException):
            u.forget("t1", RevocationEvent(target=ea.SECRET, event_id="ev-fails"))
        u.flush()
        spans = exporter.get_finished_spans()
        root = next(s for s in spans if s.name == "invoke_workflow unsee.forget")
        assert root.status.status_code.name == "ERROR" and root.attributes["error.type"]
        assert root.attributes[ATTR["event"]] == "ev-fails" and root.attributes[ATTR["committed"]] is False
        names = {s.name for s in spans if s.context.trace_id == root.context.trace_id}
        assert {"unsee.forget.plan", "unsee.forget.replay", "unsee.forget.restore"} <= names
        assert ea.SECRET not in json.dumps([dict(s.attributes or {}) for s in spans], default=str)
    finally:
        close()


def test_an_erasure_on_its_own_sends_a_trace_kept_with_the_session(tmp_path):
    """``u.erase`` after a forget that did not erase: its own trace (root, a span per route, the
    receipt's digest), kept with the session's spans so ``unsee export`` sends it."""
    from tests.support import erasure_agents as ea

    home = tmp_path / "home"
    home.mkdir()
    u, agent, close = ea.build(home)
    try:
        ea.run(agent, "t1")
        ev = RevocationEvent(target=ea.SECRET, event_id="ev-later")
        u.forget("t1", ev, erase=False)
        result = u.erase("t1", ev)
        assert result.clean
        u.flush()
        rows = [r for r in u.store.spans("t1") if r.scope == "unsee.erasure"]
        root = next(r for r in rows if r.name == "invoke_workflow unsee.erase")
        assert root.attributes[ATTR["event"]] == "ev-later" and root.attributes["gen_ai.conversation.id"] == "t1"
        assert {r.name for r in rows if r.parent_span_id == root.span_id} >= {
            f"unsee.erasure {r.name}" for r in result.receipt.routes} | {"unsee.erase.receipt"}
        assert ea.SECRET not in json.dumps([r.attributes for r in rows])
    finally:
        close()
