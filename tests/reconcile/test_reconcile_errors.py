"""A reconciliation that cannot be done as asked raises a typed error and changes nothing: not the
world (counted in the world), not the plan's states; a compensator that raises fails its item
only, which runs again (once) only when asked with ``retry=True``."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.support.reconcile_worlds import (
    build_agent, effects, event, forgotten, net, run_agent, target_copies, unsee_tools,
)
from unsee import Unsee
from unsee.plugins.erasure import read_receipt
from unsee.middleware.errors import InvalidArgument
from unsee.plugins.reconcile import (
    CompensationFailed, CompensatorUnavailable, InvalidDecision, PlanAlreadyRun, ReconcileError,
    UnknownReconciliation,
)

ORIGINAL = Counter({"pay": 1, "email": 1})


def planned(u, event_id) -> list[str]:
    return [i.state for i in u.reconcile(event_id, "plan").plan.items]


def test_an_unknown_event(tmp_path, service):
    u = Unsee(tmp_path / "home")
    forgotten(u, service.spec)
    for event_id in ("no-such-event", "", None, 42):
        for run in ("plan", "all"):
            with pytest.raises(UnknownReconciliation) as e:
                u.reconcile(event_id, run)
            assert isinstance(e.value, LookupError) and isinstance(e.value, ReconcileError)
    assert effects(service.state()) == ORIGINAL


def test_a_bad_run_value(tmp_path, service):
    u = Unsee(tmp_path / "home")
    _, rep = forgotten(u, service.spec)
    for run in ("everything", "ALL", "", None, "compensate,run"):
        with pytest.raises(InvalidArgument, match="run must be one of plan, compensate, all"):
            u.reconcile(rep.event_id, run)
    assert effects(service.state()) == ORIGINAL and planned(u, rep.event_id) == ["planned"] * 4


def test_plan_already_run(tmp_path, service):
    u = Unsee(tmp_path / "home")
    _, rep = forgotten(u, service.spec)
    u.reconcile(rep.event_id, "all")
    after = service.state()
    with pytest.raises(PlanAlreadyRun) as e:
        u.reconcile(rep.event_id, "all", retry=True)
    assert isinstance(e.value, ValueError) and e.value.event_id == rep.event_id and e.value.failed == 0
    assert service.state() == after


def test_a_raising_compensator_fails_its_item_only_until_retried(tmp_path, service, reference):
    """The service refuses reversals (503): that compensation fails, the others run; fixed, a
    retry runs it once."""
    u = Unsee(tmp_path / "home")
    _, rep = forgotten(u, service.spec)
    keys = [i.key for i in rep.reconciliation.items]
    service.down.add("reverse")
    with pytest.raises(CompensationFailed) as e:
        u.reconcile(rep.event_id, "all")
    assert isinstance(e.value, RuntimeError) and e.value.failed == [keys[0]]
    out = e.value.outcome
    assert out.failed == [keys[0]] and out.ran == keys[1:]
    assert [i.state for i in out.plan.items] == ["failed", "done", "done", "done"]
    assert out.plan.items[0].outcome.startswith("ServiceDown")
    assert effects(service.state()) == Counter({"pay": 2, "email": 2, "recall": 1})  # no reversal
    assert service.requests["/reverse"] == 1
    # its receipt says so (the error's type, not its message)
    facts = read_receipt(out.receipt).reconciliation
    assert [(i.state, i.why) for i in facts.items][0] == ("failed", "ServiceDown")

    # not run again without a decision, even once the service is back
    service.down.clear()
    with pytest.raises(PlanAlreadyRun) as again:
        u.reconcile(rep.event_id, "all")
    assert again.value.failed == 1 and "retry=True" in str(again.value)
    assert service.requests["/reverse"] == 1

    out = u.reconcile(rep.event_id, "all", retry=True)
    assert out.ran == [keys[0]] and [i.state for i in out.plan.items] == ["done"] * 4
    assert net(service.state()) == reference("http")
    assert effects(service.state()) == Counter({"pay": 2, "email": 2, "reverse": 1, "recall": 1})
    with pytest.raises(PlanAlreadyRun):
        u.reconcile(rep.event_id, "all", retry=True)
    assert service.requests["/reverse"] == 2  # one refused, one done
    assert target_copies(u.home) == {}


def test_a_compensator_unknown_to_this_process(tmp_path, service):
    u = Unsee(tmp_path / "home")
    _, rep = forgotten(u, service.spec)
    u.close()
    fresh = Unsee(tmp_path / "home")  # a new process: no agent given, no tool made here
    assert planned(fresh, rep.event_id) == ["planned"] * 4  # (reading the plan needs none)
    with pytest.raises(CompensatorUnavailable) as e:
        fresh.reconcile(rep.event_id, "all")
    assert isinstance(e.value, LookupError)
    assert sorted(e.value.names) == ["recall_email", "send_email", "send_money", "undo_transfer"]
    with pytest.raises(CompensatorUnavailable) as e:
        fresh.reconcile(rep.event_id, "compensate")
    assert sorted(e.value.names) == ["recall_email", "undo_transfer"]
    assert effects(service.state()) == ORIGINAL and planned(fresh, rep.event_id) == ["planned"] * 4


def test_a_different_compensator_of_the_same_name_is_not_the_planned_one(tmp_path, service):
    """A process whose ``send_money`` declares another compensator than the plan names runs
    nothing: the plan's compensator is unavailable there."""
    u = Unsee(tmp_path / "home")
    _, rep = forgotten(u, service.spec)
    u.close()
    fresh = Unsee(tmp_path / "home")

    def refund_back(args, result):
        raise AssertionError("never called")

    fresh.tool(lambda to, amount: "x", effect="external", name="send_money", description="Send money.",
               compensate=refund_back)
    with pytest.raises(CompensatorUnavailable) as e:
        fresh.reconcile(rep.event_id, "compensate")
    assert e.value.names == ["recall_email", "undo_transfer"]
    assert effects(service.state()) == ORIGINAL


def test_an_invalid_decision_runs_nothing(tmp_path, service):
    u = Unsee(tmp_path / "home")
    _, rep = forgotten(u, service.spec)
    for answer in ([True], {"decisions": [{"type": "edit"}] * 4}, "yes"):
        with pytest.raises(InvalidDecision):
            u.reconcile(rep.event_id, "all", approve=lambda request, a=answer: a)
    assert effects(service.state()) == ORIGINAL and planned(u, rep.event_id) == ["planned"] * 4


def test_an_approval_that_raises_runs_nothing(tmp_path, service):
    u = Unsee(tmp_path / "home")
    _, rep = forgotten(u, service.spec)

    def approve(request):
        raise TimeoutError("nobody answered")

    with pytest.raises(TimeoutError):
        u.reconcile(rep.event_id, "all", approve=approve)
    assert effects(service.state()) == ORIGINAL and planned(u, rep.event_id) == ["planned"] * 4


@pytest.mark.parametrize("value", ["bogus", "", "COMPENSATE", None])
def test_a_bad_reconcile_default_makes_no_file(tmp_path, value):
    home = tmp_path / "home"
    with pytest.raises(InvalidArgument, match="reconcile must be one of never, plan, compensate"):
        Unsee(home, reconcile=value)
    assert not home.exists()


def test_compensate_only_for_external_tools(tmp_path):
    u = Unsee(tmp_path / "home")
    with pytest.raises(ValueError, match="compensate= is for effect='external'"):
        u.tool(lambda: "x", effect="read", name="peek", description="Peek.", compensate=lambda a, r: None)
    with pytest.raises(TypeError, match="compensate= takes a callable"):
        u.tool(lambda: "x", effect="external", name="poke", description="Poke.", compensate=42)
    assert "peek" not in u.made_tools and "poke" not in u.made_tools


def test_a_tool_without_compensator_leaves_its_call_to_a_human(tmp_path, service):
    """No compensator declared: the plan reports the call (left), never runs anything for it, and
    the receipt says a human must undo it."""
    u = Unsee(tmp_path / "home")
    run_agent(build_agent(unsee_tools(u, service.spec, compensate=False), u))
    rep = u.forget("t1", event())
    assert [(i.action, i.state) for i in rep.reconciliation.items] == [
        ("report", "left"), ("report", "left"), ("run", "planned"), ("run", "planned")]
    assert "send_money" in rep.reconciliation.items[0].why
    out = u.reconcile(rep.event_id, "compensate")  # nothing to compensate: no error, nothing run
    assert out.ran == [] and effects(service.state()) == ORIGINAL
    out = u.reconcile(rep.event_id, "all")
    assert len(out.ran) == 2 and [i.state for i in out.plan.items] == ["left", "left", "done", "done"]
    facts = read_receipt(out.receipt).reconciliation
    assert [(i.action, i.state, i.why) for i in facts.items][:2] == [
        ("report", "left", "no compensator declared: undo it by hand")] * 2
    assert effects(service.state()) == Counter({"pay": 2, "email": 2})


def test_a_compensation_failing_at_forget_time_is_a_note_not_an_error(tmp_path, service, reference):
    """``reconcile="compensate"``: a compensator that raises during the forget fails its item; the
    forget is committed all the same and says so in its notes; a retry runs it once."""
    u = Unsee(tmp_path / "home", reconcile="compensate")
    service.down.add("recall")
    _, rep = forgotten(u, service.spec)
    assert rep.committed and rep.errors == []
    assert [i.state for i in rep.reconciliation.items] == ["done", "failed", "planned", "planned"]
    assert [n for n in rep.notes if n.startswith("reconcile: ") and "retry=True" in n]
    assert effects(service.state()) == ORIGINAL + Counter({"reverse": 1})
    service.down.clear()
    out = u.reconcile(rep.event_id, "all", retry=True)
    assert len(out.ran) == 3 and [i.state for i in out.plan.items] == ["done"] * 4
    assert net(service.state()) == reference("http")
    assert service.requests["/recall"] == 2 and effects(service.state())["recall"] == 1
