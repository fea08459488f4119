"""An IFC sink decision is a ``run_guardrail unsee.ifc`` span (plugins/ifc/trace.py): the layout by
table against the conventions' draft names (``unsee.middleware.semconv.GUARDRAIL``), the span made off
the agent's path (handed to a deferred queue, a child of the tool call's span), and each action on a real
agent, found after ``u.flush()``. No span or event carries an identifier or payload text."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from tests.support.ifc_agents import ATTACKER, FRIEND, INJECTION, say, setup
from unsee.middleware.graph import ProvenanceGraph
from unsee.middleware.messages import tool_call_artifact_id
from unsee.middleware.records import Artifact, ArtifactType
from unsee.middleware.semconv import GUARDRAIL
from unsee.middleware.trace_after import AfterSpans
from unsee.plugins.ifc import Decision, Evidence, IFCInterceptor, SessionGraphs
from unsee.plugins.ifc.trace import RISK_CATEGORY, decision_span

NAME = "run_guardrail unsee.ifc"
FINDING = "gen_ai.guardrail.security.finding"
BASE = {"gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.conversation.id", "gen_ai.tool.call.id",
        "gen_ai.tool.name"} | {GUARDRAIL[k] for k in ("component", "target_type", "target_subtype", "target_id",
                                                     "verdict", "action", "verdict_reason", "policy_id", "rule_id")}
FLAGGED = BASE | {GUARDRAIL["risk_category"], GUARDRAIL["input_hash"]}
IDENT = "de89370400440532013000"  # (normalized: what a decision holds)


def fake_hash(text: str) -> str:
    return "hmac-sha256:" + format(abs(hash(text)) % 10**12, "032d")


def decision(action: str, *, labels=("untrusted",), endorsed=False) -> Decision:
    if action == "allow":
        ends = (Evidence("tr-1", ("endorsed", "trusted")),) if endorsed else ()
        return Decision("allow", "send_money", ("recipient",), None, (), (), "send_money: sink values ...", "block",
                        ends)
    return Decision(action, "send_money", ("recipient",), IDENT, (IDENT, "x@evil.example"),
                    (Evidence("tr-1", labels),), f"{action}: arguments 'recipient' of send_money carry ...", action)


@pytest.mark.parametrize(("action", "labels", "endorsed", "verdict", "act", "rule"), [
    ("block", ("untrusted",), False, "deny", "block", "untrusted@send_money.recipient"),
    ("block", ("revoked", "untrusted"), False, "deny", "block", "revoked@send_money.recipient"),
    ("ask", ("untrusted",), False, "escalate", "escalate", "untrusted@send_money.recipient"),
    ("audit", ("untrusted",), False, "audit", "audit", "untrusted@send_money.recipient"),
    ("allow", (), False, "allow", "allow", "trusted@send_money.recipient"),
    ("allow", (), True, "allow", "allow", "endorsed@send_money.recipient"),
])
def test_a_decisions_span_by_table(action, labels, endorsed, verdict, act, rule):
    d = decision(action, labels=labels, endorsed=endorsed)
    spec = decision_span(d, session="s", thread="s", tool_call_id="call-7", parent="ctx", hash_text=fake_hash,
                         start_ns=1, end_ns=2)
    a = spec.attributes
    assert spec.name == NAME and spec.parent is None and spec.parent_context == "ctx"
    assert (spec.start_ns, spec.end_ns) == (1, 2)
    assert FLAGGED <= set(a) if d.flagged else BASE <= set(a) and GUARDRAIL["risk_category"] not in a
    assert a["gen_ai.operation.name"] == "run_guardrail" and a["gen_ai.provider.name"] == "unsee"
    assert (a[GUARDRAIL["target_type"]], a[GUARDRAIL["target_subtype"]]) == ("input", "tool_call")
    assert a[GUARDRAIL["target_id"]] == tool_call_artifact_id("s", "call-7") and a["gen_ai.tool.call.id"] == "call-7"
    assert (a[GUARDRAIL["verdict"]], a[GUARDRAIL["action"]], a[GUARDRAIL["rule_id"]]) == (verdict, act, rule)
    assert a[GUARDRAIL["policy_id"]] == "unsee.ifc.identifier_sinks" and a["unsee.ifc.action"] == action
    if d.flagged:
        assert a[GUARDRAIL["risk_category"]] == RISK_CATEGORY == "custom:untrusted_identifier_flow"
        assert [e[0] for e in spec.events] == [FINDING, FINDING]  # one per identifier
        assert [e[1][GUARDRAIL["input_hash"]] for e in spec.events] == [fake_hash(i) for i in d.identifiers]
        assert all(e[1]["unsee.ifc.sinks"] == ["send_money.recipient"] and e[1]["unsee.ifc.evidence"] == ["tr-1"]
                   for e in spec.events)
    else:
        assert spec.events == ()
    assert IDENT not in json.dumps([a, spec.events]) and "evil.example" not in json.dumps([a, spec.events])


def test_no_sink_among_the_arguments_is_its_own_rule():
    d = Decision("allow", "send_money", (), None, (), (), "send_money: no identifier sink among its arguments")
    spec = decision_span(d, session="s", thread="s~cf", tool_call_id="c", parent=None, hash_text=fake_hash,
                         start_ns=1, end_ns=1)
    assert spec.attributes[GUARDRAIL["rule_id"]] == "no_sink@send_money"
    assert spec.attributes[GUARDRAIL["target_id"]] == tool_call_artifact_id("s~cf", "c")


# -- the agent's path: timed there, made later -------------------------------------------

def one_session() -> ProvenanceGraph:
    arts = [Artifact(id="in0", session_id="default", type=ArtifactType.USER_INPUT, seq=0, source_ids=("user",)),
            Artifact(id="tr1", session_id="default", type=ArtifactType.TOOL_RETURN, seq=1, parents=("in0",),
                     source_ids=("tool:read_inbox",))]
    contents = {"in0": "check my inbox", "tr1": INJECTION}
    return ProvenanceGraph(arts, content_of=contents.get, session_id="default")


def test_the_span_is_handed_off_and_made_later_under_the_tool_calls_span():
    exporter = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = tp.get_tracer("test")
    held: list = []
    g = one_session()
    ifc = IFCInterceptor(SessionGraphs(lambda s: s == "default", lambda s: g),
                         SimpleNamespace(hash=fake_hash), ["send_money.recipient"],
                         spans=AfterSpans(tp.get_tracer("unsee.ifc"), defer=lambda fn, *a: held.append((fn, a))))
    ran = []
    request = SimpleNamespace(tool_call={"name": "send_money", "args": {"recipient": ATTACKER}, "id": "call-1"},
                              tool=None)
    with tracer.start_as_current_span("execute_tool send_money") as tool_span:
        out = ifc.tool_call(request, lambda r: ran.append(r))
        assert [e.name for e in tool_span.events] == ["unsee.ifc.decision"]  # (still on the path: others read it)
    assert not ran and "blocked by unsee IFC" in out.content
    assert [s.name for s in exporter.get_finished_spans()] == ["execute_tool send_money"]  # none made yet
    assert len(held) == 1
    fn, args = held[0]
    fn(*args)  # (what the recorder's writer, or a flush, does)
    guard = next(s for s in exporter.get_finished_spans() if s.name == NAME)
    assert guard.parent.span_id == tool_span.get_span_context().span_id
    assert guard.context.trace_id == tool_span.get_span_context().trace_id and guard.kind == SpanKind.INTERNAL
    assert guard.attributes[GUARDRAIL["verdict"]] == "deny" and guard.attributes[GUARDRAIL["action"]] == "block"
    assert guard.start_time <= guard.end_time <= tool_span.end_time


def test_without_a_queue_the_span_is_sent_at_once():
    exporter = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    g = one_session()
    ifc = IFCInterceptor(SessionGraphs(lambda s: True, lambda s: g), SimpleNamespace(hash=fake_hash),
                         ["send_money.recipient"], mode="audit", spans=AfterSpans(tp.get_tracer("unsee.ifc")))
    request = SimpleNamespace(tool_call={"name": "send_money", "args": {"recipient": FRIEND}, "id": "c"}, tool=None)
    ifc.tool_call(request, lambda r: "sent")
    (guard,) = exporter.get_finished_spans()
    assert guard.name == NAME and guard.attributes[GUARDRAIL["verdict"]] == "allow"
    assert guard.parent is None  # (no tool span was current)


# -- each action on a real agent ----------------------------------------------------

def texts_of(spans) -> str:
    return json.dumps([[dict(s.attributes), [[e.name, dict(e.attributes)] for e in s.events]] for s in spans],
                      default=str)


@pytest.mark.parametrize(("mode", "prompt", "verdict", "action"), [
    ("block", "check my inbox", "deny", "block"),
    ("ask", "check my inbox", "escalate", "escalate"),
    ("audit", "check my inbox", "audit", "audit"),
    ("block", f"pay {FRIEND}", "allow", "allow"),
])
def test_each_action_on_a_real_agent_is_a_span_under_its_tool_call(tmp_path, mode, prompt, verdict, action):
    u, agent, sent, exporter = setup(tmp_path, mode=mode)
    say(agent, prompt)
    u.flush()  # (the spans are made off the agent's path: a flush makes them all)
    spans = exporter.get_finished_spans()
    (guard,) = [s for s in spans if s.name == NAME]
    a = guard.attributes
    assert (a[GUARDRAIL["verdict"]], a[GUARDRAIL["action"]]) == (verdict, action)
    assert (FLAGGED if verdict != "allow" else BASE) <= set(a)
    tool = next(s for s in spans if s.name == "execute_tool send_money")
    assert guard.parent.span_id == tool.context.span_id and guard.context.trace_id == tool.context.trace_id
    assert a["gen_ai.tool.call.id"] == tool.attributes["gen_ai.tool.call.id"] and a["gen_ai.conversation.id"] == "s"
    assert a[GUARDRAIL["target_id"]] == tool_call_artifact_id("s", a["gen_ai.tool.call.id"])
    findings = [e for e in guard.events if e.name == FINDING]
    assert len(findings) == (1 if verdict != "allow" else 0)
    if findings:
        ret = u.graph("s").of_type(ArtifactType.TOOL_RETURN)[0]
        assert ret.id in findings[0].attributes["unsee.ifc.evidence"]
        ident = u.ifc_interceptor.decisions[0].identifier
        assert findings[0].attributes[GUARDRAIL["input_hash"]] == a[GUARDRAIL["input_hash"]] == u.hasher.hash(ident)
        assert ident not in texts_of(spans)
    dump = texts_of([s for s in spans if s.name.startswith("run_guardrail")])
    bare = ATTACKER.replace(" ", ""), FRIEND.replace(" ", "")
    for secret in (ATTACKER, FRIEND, *bare, *(x.lower() for x in bare), INJECTION, "Ignore previous instructions"):
        assert secret not in dump
    # the span event other code reads is still on the tool's span
    assert [e.attributes["unsee.ifc.action"] for e in tool.events if e.name == "unsee.ifc.decision"] == [
        "allow" if verdict == "allow" else mode]
    u.close()
