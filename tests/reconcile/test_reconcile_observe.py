"""What a reconciliation leaves to read afterwards: the forget's view record gains an artifact per
item (a compensation's parent is the orphaned call it undoes), the forget's trace an
``execute_tool`` span per compensator or tool that ran (a child of the forget's root span), the
receipt its signed reconciliation section; compensators see the orphaned call with the target
masked; and no file of the home holds the target's bytes."""

from __future__ import annotations

import json

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from tests.support.reconcile_worlds import (
    COMPENSATOR_SAW, TARGET, HttpWorld, build_agent, event, forgotten, run_agent, target_copies, unsee_tools,
    world_functions,
)
from unsee import Unsee
from unsee.plugins.erasure import read_receipt, verify_signature
from unsee.plugins.reconcile import CompensationFailed
from unsee.plugins.view import load_forget_record

FORGET_ROOT = "invoke_workflow unsee.forget"


@pytest.fixture
def traced(tmp_path):
    exporter = InMemorySpanExporter()
    made = []

    def make(**kw):
        u = Unsee(tmp_path / "home", span_processors=[SimpleSpanProcessor(exporter)], **kw)
        made.append(u)
        return u

    yield make, exporter
    for u in made:
        if not getattr(u.store, "_closed", True):  # (the suite closes what a body left open)
            u.close()


def tool_spans(exporter):
    """The reconciliation's spans, in the order they started."""
    return sorted((s for s in exporter.get_finished_spans() if s.name.startswith("execute_tool ")
                   and s.attributes.get("unsee.reconcile.action")), key=lambda s: s.start_time)


def failed(span) -> bool:
    return span.status.status_code == StatusCode.ERROR


def the_root(exporter):
    (root,) = [s for s in exporter.get_finished_spans() if s.name == FORGET_ROOT]
    return root


def test_the_view_record_has_the_compensations_under_the_orphaned_calls(tmp_path, service):
    u = Unsee(tmp_path / "home")
    _, rep = forgotten(u, service.spec)
    orphans = [e.call_artifact_id for e in rep.orphaned_side_effects]
    assert all(orphans) and len(orphans) == 2
    record = load_forget_record(u.home, rep.event_id)
    before_ids = {a["id"] for a in record.before_artifacts}
    assert set(orphans) <= before_ids  # artifacts of the world the forget replaced
    # planned already (the default keeps the plan and says what is owed)
    sketches = record.reconciliation
    assert [(s["type"], s["state"]) for s in sketches] == [("compensation", "planned")] * 2 + [
        ("deferred_run", "planned")] * 2

    out = u.reconcile(rep.event_id, "all")
    sketches = load_forget_record(u.home, rep.event_id).reconciliation
    assert [s["id"] for s in sketches] == [i.key for i in out.plan.items]
    comp = [s for s in sketches if s["type"] == "compensation"]
    assert [s["parents"] for s in comp] == [[o] for o in orphans]
    assert [(s["action"], s["tool"], s["runs"], s["state"]) for s in comp] == [
        ("compensate", "send_money", "undo_transfer", "done"), ("compensate", "send_email", "recall_email", "done")]
    runs = [s for s in sketches if s["type"] == "deferred_run"]
    assert [(s["parents"], s["runs"], s["state"]) for s in runs] == [([], "send_money", "done"),
                                                                     ([], "send_email", "done")]
    assert TARGET not in json.dumps(sketches)


def test_each_compensation_is_a_span_under_the_forgets_root(traced, service):
    make, exporter = traced
    u = make()
    _, rep = forgotten(u, service.spec)
    u.flush()
    root = the_root(exporter)
    assert root.parent is None and tool_spans(exporter) == []

    out = u.reconcile(rep.event_id, "all")
    u.flush()
    spans = tool_spans(exporter)
    assert [s.name for s in spans] == ["execute_tool undo_transfer", "execute_tool recall_email",
                                       "execute_tool send_money", "execute_tool send_email"]
    for span, item in zip(spans, out.plan.items):
        a = span.attributes
        assert a["gen_ai.operation.name"] == "execute_tool" and a["gen_ai.tool.name"] == item.runs
        assert a["gen_ai.tool.call.id"] == item.key and a["gen_ai.tool.type"] == "function"
        assert a["gen_ai.conversation.id"] == "t1" and a["unsee.revocation.event_id"] == rep.event_id
        assert (a["unsee.reconcile.action"], a["unsee.reconcile.of_tool"], a["unsee.reconcile.state"],
                a["unsee.reconcile.disposition"]) == (item.action, item.tool, "done", "fired")
        assert a.get("unsee.reconcile.of_call") == item.call_artifact_id
        assert span.parent is not None and span.parent.span_id == root.context.span_id
        assert span.context.trace_id == root.context.trace_id
        assert not failed(span)
    # no argument and no result in a span: nothing that could carry the target
    everything = json.dumps([dict(s.attributes) for s in exporter.get_finished_spans()])
    assert TARGET not in everything and "re: Rent" not in everything


def test_compensations_run_at_forget_time_are_in_the_forgets_trace_too(traced, service):
    make, exporter = traced
    u = make(reconcile="compensate")
    forgotten(u, service.spec)
    u.flush()
    root = the_root(exporter)
    spans = tool_spans(exporter)
    assert [s.name for s in spans] == ["execute_tool undo_transfer", "execute_tool recall_email"]
    assert all(s.parent.span_id == root.context.span_id for s in spans)


def test_a_failed_compensation_is_an_error_span(traced, service):
    make, exporter = traced
    u = make()
    _, rep = forgotten(u, service.spec)
    service.down.add("recall")
    with pytest.raises(CompensationFailed):
        u.reconcile(rep.event_id, "compensate")
    u.flush()
    ok, bad = tool_spans(exporter)
    assert (ok.name, bad.name) == ("execute_tool undo_transfer", "execute_tool recall_email")
    assert not failed(ok) and failed(bad)
    assert bad.attributes["unsee.reconcile.state"] == "failed"
    assert bad.attributes["unsee.reconcile.disposition"] == "failed"


def test_the_receipt_verifies_with_its_reconciliation_section(tmp_path, service):
    u = Unsee(tmp_path / "home")
    _, rep = forgotten(u, service.spec)
    first = read_receipt(rep.receipt)
    pub = (u.home / "receipt.pub").read_text()
    assert verify_signature(first, trusted_public_pem=pub)
    assert [i.state for i in first.reconciliation.items] == ["planned"] * 4  # owed

    out = u.reconcile(rep.event_id, "all")
    assert out.receipt == rep.receipt
    r = read_receipt(out.receipt)
    assert verify_signature(r, trusted_public_pem=pub)
    assert [(i.key, i.action, i.tool, i.runs, i.call_artifact_id, i.state) for i in r.reconciliation.items] == [
        (i.key, i.action, i.tool, i.runs, i.call_artifact_id, "done") for i in out.plan.items]
    assert r.reconciliation.as_of >= first.reconciliation.as_of
    # the rest of the receipt is the erasure's, unchanged
    assert r.model_dump(exclude={"reconciliation", "signature"}) == first.model_dump(
        exclude={"reconciliation", "signature"})
    text = (u.home / "receipts" / f"{rep.event_id}.json").read_text()
    assert TARGET not in text and "ATTACKER" not in text  # (names and ids only: no arguments)


def test_compensators_see_the_call_with_the_target_masked(tmp_path, service):
    u = Unsee(tmp_path / "home")
    _, rep = forgotten(u, service.spec)
    u.reconcile(rep.event_id, "compensate")
    (money, mail) = COMPENSATOR_SAW
    assert money == ("undo_transfer", {"to": "ATTACKER-IBAN", "amount": 30}, "sent 30 to ATTACKER-IBAN as T1")
    name, args, result = mail
    assert name == "recall_email" and result == "e-mail M1 sent to ATTACKER-IBAN"
    # the e-mail quoted the inbox, target and all; its compensator is given the keyed hash mark
    assert TARGET in service.state()["emails"][0]["body"]
    assert TARGET not in args["body"]
    assert args == {"to": "ATTACKER-IBAN", "body": f"paid; re: Rent is 50 to LANDLORD. [erased {rep.target_hash}]"}


def test_no_file_of_the_home_holds_the_target_at_any_step(tmp_path, service):
    u = Unsee(tmp_path / "home", reconcile="compensate")
    _, rep = forgotten(u, service.spec)
    assert target_copies(u.home) == {}
    u.reconcile(rep.event_id, "all", approve=lambda r: [False, True])
    assert target_copies(u.home) == {}
    u.reconcile(rep.event_id, "all")
    assert target_copies(u.home) == {}
    u.close()
    assert target_copies(tmp_path / "home") == {}
    # (and the needle is found where it is: the world's own copy, outside the home)
    assert TARGET in json.dumps(service.state())


def test_a_forget_without_erasure_has_no_receipt_to_amend(tmp_path, service):
    u = Unsee(tmp_path / "home")
    run_agent(build_agent(unsee_tools(u, service.spec), u))
    rep = u.forget("t1", event(), erase=False)
    assert rep.committed and rep.receipt is None
    out = u.reconcile(rep.event_id, "all")
    assert len(out.ran) == 4 and out.receipt is None and out.errors == []
    assert not (u.home / "receipts" / f"{rep.event_id}.json").exists()
    assert [s["state"] for s in load_forget_record(u.home, rep.event_id).reconciliation] == ["done"] * 4


def test_what_a_compensator_returns_does_not_bring_the_target_back(tmp_path, service):
    world = HttpWorld(service.spec)

    def recall_email(args, result):
        """Recall the e-mail, and say what was recalled (as a mail API's answer would)."""
        mid = result.split()[1]
        body = next(m["body"] for m in world.state()["emails"] if m["id"] == mid)
        world.recall(mid)
        return f"recalled {mid}: {body}"

    u = Unsee(tmp_path / "home")
    fns = world_functions(service.spec)
    tools = [u.tool(fns["read_inbox"], effect="read"),
             u.tool(fns["send_money"], effect="external", compensate=fns["undo_transfer"]),
             u.tool(fns["send_email"], effect="external", compensate=recall_email)]
    run_agent(build_agent(tools, u))
    rep = u.forget("t1", event())
    assert target_copies(u.home) == {}
    out = u.reconcile(rep.event_id, "compensate")
    assert len(out.ran) == 2
    u.close()
    assert target_copies(tmp_path / "home") == {}


def test_a_later_process_reconciling_joins_the_forgets_trace(traced, service):
    """The plan keeps the forget's root span: a reconcile by another ``Unsee`` (a later process)
    puts its spans under it too."""
    make, exporter = traced
    u = make()
    _, rep = forgotten(u, service.spec)
    u.flush()
    root = the_root(exporter)
    u.close()  # (its provider shut down, the exporter with it: the later one has its own)

    later_exporter = InMemorySpanExporter()
    later = Unsee(u.home, span_processors=[SimpleSpanProcessor(later_exporter)])
    unsee_tools(later, service.spec)
    later.reconcile(rep.event_id, "compensate")
    later.flush()
    spans = tool_spans(later_exporter)
    assert [s.name for s in spans] == ["execute_tool undo_transfer", "execute_tool recall_email"]
    assert all(s.parent.span_id == root.context.span_id and s.context.trace_id == root.context.trace_id
               for s in spans)
