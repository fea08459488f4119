"""The reconciliation's pure parts and the ledger rows under it, without an agent: a plan built
from a report made here, its items' keys, approvals in LangChain's human-in-the-loop shape, the
outbox table of a compensation, ``Ledger.run_once``'s states on SQLite (a process that really
dies included), and the receipt's reconciliation section under its signature."""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
import textwrap
from datetime import datetime, timezone

import pytest

from unsee.plugins.erasure import ReconciledItem, ReconciliationFacts, amend_receipt
from unsee.plugins.erasure.receipt import (
    Receipt, RouteReceipt, SigningKey, read_receipt, sign_receipt, verify_signature, write_receipt,
)
from unsee.plugins.forget import ForgetReport
from unsee.plugins.forget.report import SideEffect
from unsee.plugins.reconcile import (
    InvalidDecision, ReconcilePlan, approval_request, build_plan, decisions, item_key,
)
from unsee.plugins.reconcile.plan import state_of
from unsee.plugins.tools import compensator
from unsee.sandbox.ledger import Ledger
from unsee.sandbox.ledger_states import CALL, COMPENSATION, KINDS, outbox_step

MARK = "[erased hmac-sha256:" + "ab" * 16 + "]"


def undo_payment(args, result):
    return f"reversed {result}"


def report(event_id="ev-1", **over) -> ForgetReport:
    """A committed forget's report: the original world paid the attacker and notified them (no
    compensator), the counterfactual wants the landlord paid, twice the same call."""
    fields = dict(
        session_id="s1", strategy="B7", event_id=event_id, target_hash="hmac-sha256:" + "cd" * 16, tau=3,
        closure_size=4, checkpoint_id=None, checkpoint_kind=None, committed=True,
        orphaned_side_effects=[
            SideEffect(tool="send_money", args={"to": "ATTACKER", "amount": 30, "memo": f"re: {MARK}"},
                       effect="external", call_artifact_id="call-aaa", result="sent as P1", status="orphaned"),
            SideEffect(tool="notify", args={"to": "ATTACKER"}, effect="external", call_artifact_id="call-bbb",
                       result="notified", status="orphaned"),
        ],
        deferred_side_effects=[
            SideEffect(tool="send_money", args={"to": "LANDLORD", "amount": 50}, effect="external",
                       status="deferred"),
            SideEffect(tool="send_money", args={"to": "LANDLORD", "amount": 50}, effect="external",
                       status="deferred"),
        ],
    )
    return ForgetReport(**{**fields, **over})


def plan_of(rep=None, idempotent_tools=("send_money",), comp_idempotent=True) -> ReconcilePlan:
    comps = {"send_money": compensator(undo_payment, idempotent=comp_idempotent)}
    return build_plan(rep or report(), comps, lambda name: name in idempotent_tools)


# -- the plan ------------------------------------------------------------------------------------

def test_a_plan_has_one_item_per_orphaned_and_deferred_call():
    plan = plan_of()
    assert (plan.event_id, plan.session_id, plan.target_hash) == ("ev-1", "s1", "hmac-sha256:" + "cd" * 16)
    assert [(i.action, i.tool, i.runs, i.state) for i in plan.items] == [
        ("compensate", "send_money", "undo_payment", "planned"),
        ("report", "notify", "notify", "left"),
        ("run", "send_money", "send_money", "planned"),
        ("run", "send_money", "send_money", "planned"),
    ]
    comp, left, run1, _ = plan.items
    # the compensation carries the orphaned call as the report shows it (the target masked)
    assert comp.args == {"to": "ATTACKER", "amount": 30, "memo": f"re: {MARK}"}
    assert (comp.result, comp.call_artifact_id, comp.compensator, comp.idempotent) == (
        "sent as P1", "call-aaa", "undo_payment", True)
    # a call whose tool declares no compensator is what a human must undo
    assert not left.actionable and "notify" in left.why and "compensate=" in left.why
    assert left.call_artifact_id == "call-bbb" and left.compensator is None
    # a deferred call: its tool runs, idempotent as the tool says
    assert (run1.args, run1.result, run1.call_artifact_id, run1.idempotent) == (
        {"to": "LANDLORD", "amount": 50}, None, None, True)
    assert [i.key for i in plan.pending] == [comp.key, run1.key, plan.items[3].key]
    assert plan.summary() == {"compensate.planned": 1, "report.left": 1, "run.planned": 2}
    assert plan.by_action("report") == [left]


def test_idempotency_comes_from_the_compensator_and_the_tool():
    plan = plan_of(idempotent_tools=(), comp_idempotent=False)
    assert [i.idempotent for i in plan.items] == [False, False, False, False]


def test_a_plan_round_trips_as_json_and_holds_no_more_than_the_report():
    plan = plan_of()
    again = ReconcilePlan.model_validate_json(plan.model_dump_json())
    assert again == plan
    assert "ATTACKER" in plan.model_dump_json() and MARK in plan.model_dump_json()


def test_item_keys_are_stable_and_name_the_event_and_the_call():
    a, b = plan_of(), plan_of()
    assert [i.key for i in a.items] == [i.key for i in b.items]  # (another created_at, same keys)
    assert all(re.fullmatch(r"rec-[0-9a-f]{32}", i.key) for i in a.items)
    assert len({i.key for i in a.items}) == 4  # the two identical deferred calls too
    other = plan_of(report("ev-2"))
    assert not {i.key for i in a.items} & {i.key for i in other.items}
    # the key of a compensation is the event's and the orphaned call's, whatever its arguments now
    moved = report(orphaned_side_effects=[SideEffect(tool="send_money", args={"to": "X"}, effect="external",
                                                     call_artifact_id="call-aaa", status="orphaned")])
    assert plan_of(moved).items[0].key == a.items[0].key == item_key("ev-1", "compensate", "call-aaa")
    # without an artifact id, the call is named by its tool and arguments
    bare = report(orphaned_side_effects=[SideEffect(tool="send_money", args={"to": "X"}, effect="external",
                                                    status="orphaned")], deferred_side_effects=[])
    assert plan_of(bare).items[0].key == item_key("ev-1", "compensate", ["send_money", {"to": "X"}])
    assert item_key("ev-1", "run", [0, "t", {"a": 1, "b": 2}]) == item_key("ev-1", "run", [0, "t", {"b": 2, "a": 1}])


def test_a_plan_reads_each_state_from_its_ledger_row():
    assert [state_of("compensate", s) for s in (None, "pending", "released", "compensating", "compensated",
                                                 "compensation_failed")] == [
        "planned", "planned", "planned", "started", "done", "failed"]
    assert [state_of("run", s) for s in ("fired", "done", "failed")] == ["started", "done", "failed"]
    assert state_of("report", "done") == "left"
    plan = plan_of()
    comp = plan.items[0]
    moved = plan.with_states({comp.key: ("failed", "ServiceDown: 503")})
    assert moved.items[0].state == "failed" and moved.items[0].outcome == "ServiceDown: 503"
    assert [i.key for i in moved.pending] == [i.key for i in plan.pending]  # (failed: a retry may take it)
    assert plan.items[0].state == "planned"  # (frozen: a copy)


# -- approval ------------------------------------------------------------------------------------

def test_the_approval_request_has_langchains_human_in_the_loop_shape():
    plan = plan_of()
    req = approval_request("ev-1", plan.pending)
    assert set(req) == {"action_requests", "review_configs", "reconcile"} and req["reconcile"] == "ev-1"
    assert [(a["name"], a["args"], a["id"]) for a in req["action_requests"]] == [
        (i.runs, i.args, i.key) for i in plan.pending]
    assert "compensate send_money with undo_payment" in req["action_requests"][0]["description"]
    assert req["action_requests"][1]["description"].startswith("run send_money")
    assert req["review_configs"] == [{"action_name": i.runs, "allowed_decisions": ["approve", "reject"]}
                                     for i in plan.pending]
    json.dumps(req)  # (an interrupt's value: JSON)


@pytest.mark.parametrize(("answer", "approved"), [
    (True, [True, True, True]),
    (False, [False, False, False]),
    (None, [False, False, False]),
    ([True, False, True], [True, False, True]),
    ({"decisions": [{"type": "approve"}, {"type": "reject", "message": "not now"}, {"type": "approve"}]},
     [True, False, True]),
    ([{"type": "reject"}, True, {"type": "approve"}], [False, True, True]),
])
def test_decisions_in_every_accepted_shape(answer, approved):
    items = plan_of().pending
    assert decisions(answer, items) == {i.key: a for i, a in zip(items, approved)}


@pytest.mark.parametrize("answer", [
    [True, True],                                         # too few
    [True, True, True, True],                             # too many
    {"decisions": [{"type": "approve"}] * 2},
    {"decisions": [{"type": "edit", "edited_action": {}}, {"type": "approve"}, {"type": "approve"}]},
    ["yes", True, True],
    [{"kind": "approve"}, True, True],
    {"answer": [True, True, True]},
    "approve",
    1,
])
def test_an_answer_that_is_not_a_decision_per_item_is_invalid(answer):
    with pytest.raises(InvalidDecision) as e:
        decisions(answer, plan_of().pending)
    assert isinstance(e.value, ValueError)


# -- the outbox table of a compensation ------------------------------------------------------------

@pytest.mark.parametrize(("status", "step"), [
    (None, "claim"), ("pending", "claim"), ("released", "claim"),
    ("compensating", "settle"), ("compensated", "replayed"), ("compensation_failed", "failed"),
])
def test_the_outbox_table_of_a_compensation(status, step):
    assert outbox_step(status, COMPENSATION) == step


def test_the_two_kinds_of_rows():
    assert KINDS == {"call": CALL, "compensation": COMPENSATION}
    assert (COMPENSATION.firing, COMPENSATION.done, COMPENSATION.failed) == (
        "compensating", "compensated", "compensation_failed")
    assert [outbox_step(s, CALL) for s in ("fired", "done", "failed")] == ["settle", "replayed", "failed"]


# -- Ledger.run_once on SQLite ------------------------------------------------------------------

class Effects:
    """A side effect counted in the test's own world: a file of lines."""

    def __init__(self, path):
        self.path = path

    def __call__(self, value="done"):
        def fn():
            with open(self.path, "a") as f:
                f.write(value + "\n")
            return value
        return fn

    @property
    def n(self) -> int:
        return len(self.path.read_text().splitlines()) if self.path.exists() else 0


def boom():
    raise ConnectionError("service down")


@pytest.fixture
def ledger(tmp_path):
    with Ledger(tmp_path / "ledger.sqlite") as led:
        yield led


@pytest.mark.parametrize(("kind", "states"), [
    ("compensation", ("compensated", "compensation_failed")), ("call", ("done", "failed"))])
def test_run_once_fires_once_then_replays(ledger, tmp_path, kind, states):
    fx = Effects(tmp_path / "world.txt")
    out = ledger.run_once("rec-1", "s1", "undo", {"args": {"to": "A"}, "of": "call-1"}, fx("reversed P1"), kind=kind)
    assert (out.disposition, out.value, fx.n) == ("fired", "reversed P1", 1)
    rec = ledger.get("rec-1")
    assert (rec.status, rec.result, rec.attempts, rec.session, rec.tool, rec.effect) == (
        states[0], "reversed P1", 1, "s1", "undo", "external")
    assert rec.args == {"args": {"to": "A"}, "of": "call-1"}
    for _ in range(2):
        again = ledger.run_once("rec-1", "s1", "undo", {"args": {"to": "A"}, "of": "call-1"}, fx("twice"), kind=kind)
        assert (again.disposition, again.value) == ("replayed", "reversed P1")
    assert fx.n == 1


def test_run_once_records_a_failure_and_runs_again_only_once_released(ledger, tmp_path):
    fx = Effects(tmp_path / "world.txt")
    with pytest.raises(ConnectionError):
        ledger.run_once("rec-1", "s1", "undo", {}, boom, kind="compensation")
    rec = ledger.get("rec-1")
    assert (rec.status, rec.error) == ("compensation_failed", "ConnectionError: service down")
    out = ledger.run_once("rec-1", "s1", "undo", {}, fx(), kind="compensation")
    assert out.disposition == "failed" and fx.n == 0  # never run again by itself
    ledger.resolve("rec-1", status="released")
    out = ledger.run_once("rec-1", "s1", "undo", {}, fx(), kind="compensation")
    assert out.disposition == "fired" and fx.n == 1 and ledger.get("rec-1").status == "compensated"
    assert ledger.get("rec-1").attempts == 2


def test_run_once_keys_are_not_derived_from_the_arguments(ledger, tmp_path):
    fx = Effects(tmp_path / "world.txt")
    ledger.run_once("rec-1", "s1", "undo", {"a": 1}, fx(), kind="compensation")
    out = ledger.run_once("rec-1", "s1", "undo", {"a": 2}, fx(), kind="compensation")
    assert out.disposition == "replayed" and fx.n == 1
    assert ledger.run_once("rec-2", "s1", "undo", {"a": 1}, fx(), kind="compensation").disposition == "fired"
    assert fx.n == 2


@pytest.mark.parametrize(("kwargs", "error"), [
    ({"kind": "refund"}, "kind must be one of"), ({"key": ""}, "key must be a non-empty string")])
def test_run_once_bad_arguments_change_nothing(ledger, tmp_path, kwargs, error):
    fx = Effects(tmp_path / "world.txt")
    args = {"key": "rec-1", **kwargs}
    with pytest.raises(ValueError, match=error):
        ledger.run_once(args.pop("key"), "s1", "undo", {}, fx(), **args)
    assert fx.n == 0 and ledger.calls() == []


DIES = textwrap.dedent("""
    import os, sys
    from unsee.sandbox.ledger import Ledger
    path, world, kind, where = sys.argv[1:5]
    led = Ledger(path)
    def fn():
        if where == "after":
            with open(world, "a") as f:
                f.write("done\\n")
        os._exit(137)  # dies holding the claim, before the outcome is recorded
    led.run_once("rec-1", "s1", "undo", {}, fn, kind=kind)
""")


def _dies(tmp_path, kind: str, where: str):
    script = tmp_path / "dies.py"
    script.write_text(DIES)
    proc = subprocess.run([sys.executable, str(script), str(tmp_path / "ledger.sqlite"), str(tmp_path / "world.txt"),
                           kind, where], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 137, proc.stderr


@pytest.mark.parametrize("kind", ["compensation", "call"])
def test_a_process_dying_in_run_once_leaves_it_in_doubt(tmp_path, kind):
    _dies(tmp_path, kind, "after")
    fx = Effects(tmp_path / "world.txt")
    assert fx.n == 1
    with Ledger(tmp_path / "ledger.sqlite") as led:
        assert led.get("rec-1").status == KINDS[kind].firing
        for _ in range(2):
            out = led.run_once("rec-1", "s1", "undo", {}, fx(), kind=kind)
            assert out.disposition == "in_doubt"
        assert fx.n == 1  # never run twice
        # an operator who checked the world settles it
        led.resolve("rec-1", status="compensated" if kind == "compensation" else "done", result="checked")
        assert led.run_once("rec-1", "s1", "undo", {}, fx(), kind=kind).disposition == "replayed"
    assert fx.n == 1


@pytest.mark.parametrize("where", ["before", "after"])
def test_an_idempotent_row_left_running_by_a_dead_process_rolls_forward_once(tmp_path, where):
    _dies(tmp_path, "compensation", where)
    fx = Effects(tmp_path / "world.txt")
    died_with = fx.n
    with Ledger(tmp_path / "ledger.sqlite") as led:
        out = led.run_once("rec-1", "s1", "undo", {}, fx("again"), kind="compensation", idempotent=True)
        assert out.disposition == "fired" and fx.n == died_with + 1
        rec = led.get("rec-1")
        assert (rec.status, rec.result, rec.attempts) == ("compensated", "again", 2)
        out = led.run_once("rec-1", "s1", "undo", {}, fx("third"), kind="compensation", idempotent=True)
        assert out.disposition == "replayed" and fx.n == died_with + 1


# -- the receipt's reconciliation section -----------------------------------------------------------

@pytest.fixture
def key(tmp_path):
    return SigningKey.load_or_create(tmp_path / "home")


def receipt(key, **over) -> Receipt:
    fields = dict(unsee_version="0.1.0", event_id="ev-1", target_hash="hmac-sha256:" + "cd" * 16, sessions=["s1"],
                  routes=[RouteReceipt(name="records", method="rewrite", copies_before=1, copies_after=0)],
                  unreachable=[], created_at=datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc),
                  public_key=key.public_pem())
    return Receipt(**{**fields, **over})


FACTS = ReconciliationFacts(as_of=datetime(2026, 1, 2, 4, 0, tzinfo=timezone.utc), items=[
    ReconciledItem(key="rec-1", action="compensate", tool="send_money", runs="undo", call_artifact_id="call-aaa",
                   state="done"),
    ReconciledItem(key="rec-2", action="report", tool="notify", call_artifact_id="call-bbb", state="left",
                   why="no compensator declared: undo it by hand"),
])


def test_a_receipt_with_a_reconciliation_section_verifies_and_the_section_is_signed(key):
    signed = sign_receipt(receipt(key, reconciliation=FACTS), key)
    assert verify_signature(signed, trusted_public_pem=key.public_pem())
    for tamper in ({"state": "failed"}, {"runs": "other"}, {"why": "edited"}):
        items = [signed.reconciliation.items[0].model_copy(update=tamper), signed.reconciliation.items[1]]
        forged = signed.model_copy(update={"reconciliation": signed.reconciliation.model_copy(update={"items": items})})
        assert not verify_signature(forged)
    assert not verify_signature(signed.model_copy(update={"reconciliation": None}))


def test_an_old_receipt_without_the_section_still_verifies(key, tmp_path):
    """A receipt written before reconciliations existed: no ``reconciliation`` key at all, signed
    over its own canonical JSON (computed here, not by unsee)."""
    old = receipt(key).model_dump(mode="json")
    for optional in ("other_sessions", "subject", "forget_event", "incomplete", "reconciliation"):
        old.pop(optional)
    for route in old["routes"]:
        route.pop("other_sessions")  # (a field later than the receipt too)
    # the signed bytes: the receipt with ``signature: null``, keys sorted, no spaces
    signed_bytes = json.dumps({**old, "signature": None}, sort_keys=True, separators=(",", ":")).encode()
    old["signature"] = base64.b64encode(key._key.sign(signed_bytes)).decode()
    path = tmp_path / "home" / "receipts" / "ev-1.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(old, indent=2))
    read = read_receipt(path)
    assert read.reconciliation is None and verify_signature(read, trusted_public_pem=key.public_pem())
    # amended with the section: signed again, verifies, and the rest is as it was
    amended = amend_receipt(tmp_path / "home", None, "ev-1", reconciliation=FACTS)
    again = read_receipt(path)
    assert again == amended and again.reconciliation == FACTS
    assert verify_signature(again, trusted_public_pem=key.public_pem())
    assert again.model_dump(exclude={"reconciliation", "signature"}) == read.model_dump(
        exclude={"reconciliation", "signature"})
    assert amend_receipt(tmp_path / "home", None, "ev-none", reconciliation=FACTS) is None
    assert not (tmp_path / "home" / "receipts" / "ev-none.json").exists()


def test_a_written_receipt_with_the_section_reads_back_and_verifies(key, tmp_path):
    path = tmp_path / "r.json"
    write_receipt(sign_receipt(receipt(key, reconciliation=FACTS), key), path)
    back = read_receipt(path)
    assert back.reconciliation == FACTS and verify_signature(back, trusted_public_pem=key.public_pem())
