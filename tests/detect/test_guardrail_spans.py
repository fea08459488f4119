"""A detector's verdict is a ``run_guardrail`` span (plugins/detect/trace.py): the attribute names
by table against the conventions' draft (``unsee.middleware.semconv.GUARDRAIL``), then a real late
verdict whose automatic forget's trace links back to it. No span carries the flagged text."""

from __future__ import annotations

import json

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.support.ifc_agents import say, setup  # the IFC tests' injection scenario (tests/ifc)
from unsee.middleware.semconv import GUARDRAIL
from unsee.plugins.detect import Finding
from unsee.plugins.detect.trace import verdict_span

REQUIRED = {"gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.conversation.id"} | {
    GUARDRAIL[k] for k in ("component", "target_type", "target_subtype", "target_id", "verdict", "action",
                           "risk_category", "risk_score", "rule_id", "input_hash")}


@pytest.mark.parametrize(("policy", "action"), [("auto", "escalate"), ("queue", "escalate"), ("alert", "audit")])
def test_a_verdicts_span_by_table(policy, action):
    f = Finding(4, 10, "IGNORE", 0.9, "imperative to the model", "signals")
    spec = verdict_span("s1", "tr-1", f, policy=policy, hash_text=lambda t: "hmac-sha256:" + "0" * 32,
                        start_ns=1, end_ns=2, event_id="ev-1")
    a = spec.attributes
    assert spec.name == "run_guardrail unsee.detector" and spec.parent is None
    assert REQUIRED <= set(a)
    assert a["gen_ai.operation.name"] == "run_guardrail" and a[GUARDRAIL["verdict"]] == "deny"
    assert a[GUARDRAIL["action"]] == action and a[GUARDRAIL["risk_category"]] == "prompt_injection"
    assert (a[GUARDRAIL["target_type"]], a[GUARDRAIL["target_subtype"]], a[GUARDRAIL["target_id"]]) == (
        "output", "tool_call", "tr-1")
    assert (a["unsee.finding.start"], a["unsee.finding.end"], a["unsee.revocation.event_id"]) == (4, 10, "ev-1")
    assert a[GUARDRAIL["input_hash"]].startswith("hmac-sha256:")
    assert "IGNORE" not in json.dumps(a)


def test_a_late_verdict_is_a_guardrail_span_the_forgets_trace_links_to(tmp_path):
    exporter = InMemorySpanExporter()
    u, agent, sent, _ = setup(tmp_path, mode="audit")
    u.tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    say(agent, "check my inbox")
    svc = u.detect(timing="async", policy="auto")
    verdicts = svc.scan("s")
    assert verdicts and verdicts[0].status == "applied", verdicts[0].error
    u.flush()
    spans = exporter.get_finished_spans()
    guards = [s for s in spans if s.name == "run_guardrail unsee.detector"]
    assert len(guards) == len(verdicts)
    g = guards[0]
    assert g.attributes[GUARDRAIL["action"]] == "escalate" and g.attributes["gen_ai.conversation.id"] == "s"
    assert g.attributes["unsee.revocation.event_id"] == verdicts[0].event.event_id
    root = next(s for s in spans if s.name == "invoke_workflow unsee.forget")
    assert root.attributes["unsee.revocation.raised_by"] == "detector"
    assert [link.context.span_id for link in root.links] == [g.context.span_id]  # forget <- verdict
    flagged = verdicts[0].finding.text
    assert flagged not in json.dumps([dict(g.attributes), dict(root.attributes)])
