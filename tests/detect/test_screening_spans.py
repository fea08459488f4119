"""A detector screening on an agent's path is a ``run_guardrail unsee.detector`` span
(plugins/detect/trace.py ``screening_span``): a tool return screened in ``mode="sync"`` and an
observation vetted for the IFC at a sink call (endorsement), ``allow`` or ``deny``, each a child of
the tool call it was screened for, made off the agent's path (found after ``u.flush()``). The layout
by table (the same attribute function as a late verdict's), then real agents. No span or event
carries the observation's or the flagged text."""

from __future__ import annotations

import json

import pytest
from langchain.agents import create_agent
from langgraph.checkpoint.memory import InMemorySaver
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.support.ifc_agents import ATTACKER, FRIEND, INJECTION, follow, say
from unsee import ArtifactType, Unsee
from unsee.middleware.semconv import GUARDRAIL
from unsee.plugins.detect import Finding
from unsee.plugins.detect.trace import screening_span, verdict_span
from unsee.plugins.model import ScriptedChatModel

NAME = "run_guardrail unsee.detector"
FINDING = "gen_ai.guardrail.security.finding"
BASE = {"gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.conversation.id"} | {
    GUARDRAIL[k] for k in ("component", "target_type", "target_subtype", "target_id", "verdict", "verdict_reason")}
DENY = BASE | {GUARDRAIL[k] for k in ("risk_category", "risk_score", "rule_id", "input_hash")}


def fake_hash(text: str) -> str:
    return "hmac-sha256:" + format(abs(hash(text)) % 10**12, "032d")


FOUND = (Finding(4, 10, "IGNORE", 0.7, "imperative", "signals"), Finding(20, 26, "SENDIT", 0.9, "payee", "rules"))


@pytest.mark.parametrize(("screening", "policy", "findings", "verdict", "action"), [
    ("sync", "auto", FOUND, "deny", "modify"),
    ("sync", "queue", FOUND, "deny", "audit"),
    ("sync", "alert", FOUND, "deny", "audit"),
    ("sync", "auto", (), "allow", "allow"),
    ("endorsement", "auto", FOUND, "deny", None),
    ("endorsement", "alert", (), "allow", "allow"),
])
def test_a_screenings_span_by_table(screening, policy, findings, verdict, action):
    spec = screening_span("s", "tr-1", findings, screening=screening, policy=policy, hash_text=fake_hash,
                          start_ns=1, end_ns=2, parent="ctx", tool_call_id="call-1", tool_name="read_inbox",
                          cached=False)
    a = spec.attributes
    assert spec.name == NAME and spec.parent_context == "ctx" and (spec.start_ns, spec.end_ns) == (1, 2)
    assert (DENY if findings else BASE) <= set(a)
    assert (a[GUARDRAIL["verdict"]], a.get(GUARDRAIL["action"])) == (verdict, action)
    assert (a[GUARDRAIL["target_type"]], a[GUARDRAIL["target_subtype"]], a[GUARDRAIL["target_id"]]) == (
        "output", "tool_call", "tr-1")
    assert a["unsee.detector.screening"] == screening and a["gen_ai.tool.call.id"] == "call-1"
    assert [e[0] for e in spec.events] == [FINDING] * len(findings)
    if findings:  # the span is about the highest-scoring finding; each is an event
        assert (a[GUARDRAIL["rule_id"]], a[GUARDRAIL["risk_score"]]) == ("rules", 0.9)
        assert a[GUARDRAIL["input_hash"]] == fake_hash("SENDIT") and a[GUARDRAIL["risk_category"]] == "prompt_injection"
        assert [e[1][GUARDRAIL["input_hash"]] for e in spec.events] == [fake_hash("IGNORE"), fake_hash("SENDIT")]
    else:
        assert GUARDRAIL["risk_category"] not in a
    assert "IGNORE" not in json.dumps([a, spec.events]) and "SENDIT" not in json.dumps([a, spec.events])


def test_a_screening_and_a_late_verdict_share_one_layout():
    f = FOUND[1]
    late = verdict_span("s", "tr-1", f, policy="auto", hash_text=fake_hash, start_ns=1, end_ns=2).attributes
    now = screening_span("s", "tr-1", (f,), screening="sync", policy="auto", hash_text=fake_hash, start_ns=1,
                         end_ns=2).attributes
    shared = set(late) & set(now)
    assert set(late) - shared == set() and set(now) - shared == {"unsee.detector.screening"}
    assert {k: late[k] for k in shared if k != GUARDRAIL["action"]} == {k: now[k] for k in shared
                                                                         if k != GUARDRAIL["action"]}


# -- real agents ----------------------------------------------------------------------

def agent(tmp_path, inbox: str, *, policy: str, endorse: bool = False):
    """The IFC tests' scenario (an agent that pays the first IBAN it read) with an inbox of our own
    and a sync detector, also the IFC's endorser when ``endorse``."""
    exporter = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    u = Unsee(home=tmp_path / "h", tracer_provider=tp)
    sent: list[str] = []

    @u.tool(effect="read")
    def read_inbox() -> str:
        """Read the inbox."""
        return inbox

    @u.tool(effect="external")
    def send_money(recipient: str, amount: float) -> str:
        """Send money."""
        sent.append(recipient)
        return f"sent {amount}"

    det = u.detect(timing="sync", policy=policy)
    u.ifc(["send_money.recipient"], endorse=det if endorse else None)
    a = create_agent(ScriptedChatModel(policy=follow), [read_inbox, send_money], system_prompt="bank",
                     middleware=[u.middleware()], checkpointer=InMemorySaver())
    return u, a, sent, exporter


def guards(exporter, component="unsee.detector"):
    return [s for s in exporter.get_finished_spans() if s.name == f"run_guardrail {component}"]


def tool_span(exporter, name):
    return next(s for s in exporter.get_finished_spans() if s.name == f"execute_tool {name}")


def no_text(spans, *secrets):
    dump = json.dumps([[dict(s.attributes), [[e.name, dict(e.attributes)] for e in s.events]] for s in spans],
                      default=str)
    for secret in secrets:
        assert secret not in dump


INBOX = f"From bank: your statement is ready. {INJECTION}"


@pytest.mark.parametrize(("policy", "action"), [("auto", "modify"), ("alert", "audit")])
def test_a_sync_screening_that_flags_is_a_deny_span_under_its_tool_call(tmp_path, policy, action):
    u, a, sent, exporter = agent(tmp_path, INBOX, policy=policy)
    say(a, "check my inbox")
    u.flush()
    read = tool_span(exporter, "read_inbox")
    (g,) = [s for s in guards(exporter) if s.parent.span_id == read.context.span_id]
    at = g.attributes
    assert (at[GUARDRAIL["verdict"]], at[GUARDRAIL["action"]]) == ("deny", action) and DENY <= set(at)
    assert at["unsee.detector.screening"] == "sync"
    assert at["gen_ai.tool.call.id"] == read.attributes["gen_ai.tool.call.id"]
    assert at[GUARDRAIL["target_id"]] == u.graph("s").of_type(ArtifactType.TOOL_RETURN)[0].id
    assert g.context.trace_id == read.context.trace_id
    assert g.events and all(e.name == FINDING for e in g.events)
    no_text(guards(exporter), INJECTION, "Ignore previous instructions", ATTACKER, INBOX)
    u.close()


def test_a_clean_tool_return_screened_in_sync_is_an_allow_span(tmp_path):
    u, a, sent, exporter = agent(tmp_path, INBOX, policy="auto")
    say(a, f"pay {FRIEND}")
    u.flush()
    assert sent == [FRIEND]
    pay = tool_span(exporter, "send_money")
    (g,) = guards(exporter)
    assert g.parent.span_id == pay.context.span_id
    at = g.attributes
    assert (at[GUARDRAIL["verdict"]], at[GUARDRAIL["action"]]) == ("allow", "allow") and BASE <= set(at)
    assert GUARDRAIL["risk_category"] not in at and not g.events
    no_text(guards(exporter), FRIEND, "sent 5")
    u.close()


def test_endorsement_verdicts_are_spans_under_the_sink_call(tmp_path):
    # a clean bill: the IFC flags the IBAN read from it, asks the detector, which vets it (allow)
    u, a, sent, exporter = agent(tmp_path, f"Your bill: please pay {ATTACKER} by Friday.", policy="alert",
                                 endorse=True)
    say(a, "check my inbox")
    u.flush()
    assert len(sent) == 1
    pay = tool_span(exporter, "send_money")
    (g,) = [s for s in guards(exporter) if s.attributes["unsee.detector.screening"] == "endorsement"]
    assert g.parent.span_id == pay.context.span_id
    assert (g.attributes[GUARDRAIL["verdict"]], g.attributes[GUARDRAIL["action"]]) == ("allow", "allow")
    (ifc,) = guards(exporter, "unsee.ifc")
    assert ifc.attributes[GUARDRAIL["rule_id"]] == "endorsed@send_money.recipient"
    assert g.attributes[GUARDRAIL["target_id"]] in ifc.attributes["unsee.ifc.endorsed"]
    no_text(guards(exporter) + [ifc], ATTACKER, ATTACKER.replace(" ", ""), "Your bill")
    u.close()


def test_a_refused_endorsement_is_a_deny_span_without_an_action(tmp_path):
    # alert: the injection stays in the observation; at the sink the detector refuses to vouch for it
    u, a, sent, exporter = agent(tmp_path, INBOX, policy="alert", endorse=True)
    say(a, "check my inbox")
    u.flush()
    assert sent == []
    pay = tool_span(exporter, "send_money")
    (g,) = [s for s in guards(exporter) if s.attributes["unsee.detector.screening"] == "endorsement"]
    assert g.parent.span_id == pay.context.span_id and DENY <= set(g.attributes)
    assert g.attributes[GUARDRAIL["verdict"]] == "deny" and GUARDRAIL["action"] not in g.attributes
    (ifc,) = guards(exporter, "unsee.ifc")
    assert ifc.parent.span_id == pay.context.span_id and ifc.attributes[GUARDRAIL["action"]] == "block"
    no_text(guards(exporter) + [ifc], INJECTION, "Ignore previous instructions", ATTACKER, ATTACKER.replace(" ", ""))
    u.close()
