"""A reconciliation interrupted at each of its new steps, then taken up by a fresh process.

- inside a compensator, with real process death (a worker that calls ``os._exit(137)`` in it,
  before or after the world changed: the ledger row claimed, its outcome never recorded): the
  next reconcile reports the item in doubt and runs nothing twice, unless the compensator is
  idempotent, when it is rolled forward (the world changed once in total);
- outside the compensators, in process (``crash_at``): after the plan was kept
  (``reconcile:planned``, during the forget) and after an item's outcome was recorded
  (``reconcile:recorded``): the next reconcile runs what is left and completes the bookkeeping
  (the receipt's section, the view record's compensations).

The world is the file bank (tests/support/reconcile_worlds.py), its effects counted in its own
log."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.support.reconcile_worlds import (
    FileWorld, build_agent, effects, event, forgotten, net, outcome_json, run_agent, target_copies, unsee_tools,
)
from unsee import Unsee
from unsee.middleware.errors import InjectedCrash
from unsee.middleware.faults import crash_at
from unsee.plugins.erasure import read_receipt, verify_signature
from unsee.plugins.reconcile import PlanAlreadyRun
from unsee.plugins.view import load_forget_record

ORIGINAL = Counter({"pay": 1, "email": 1})
RECONCILED = Counter({"pay": 2, "email": 2, "reverse": 1, "recall": 1})


@pytest.fixture
def bank(tmp_path):
    return FileWorld.create(tmp_path / "world")


def forget_and_close(home, world, **kw):
    u = Unsee(home, **kw)
    _, rep = forgotten(u, world.spec)
    u.close()
    return rep


def fresh_reconcile(home, world, event_id, **kw) -> dict:
    """A reconcile by a fresh ``Unsee`` on the home (nothing of the crashed one kept), its tools
    made anew: its outcome as a worker prints it, or its error."""
    u = Unsee(home)
    try:
        unsee_tools(u, world.spec, idempotent=kw.pop("idempotent", False))
        return {"ok": outcome_json(u.reconcile(event_id, **kw))}
    except Exception as e:
        return {"error": type(e).__name__}
    finally:
        u.close()


def receipt_states(path) -> list[str]:
    r = read_receipt(path)
    assert verify_signature(r)
    return [i.state for i in r.reconciliation.items]


def record_states(home, event_id) -> list[tuple[str, str]]:
    return [(s["type"], s["state"]) for s in load_forget_record(home, event_id).reconciliation]


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_process_dying_in_a_compensator_leaves_it_in_doubt(tmp_path, bank, workers, reference, when):
    home = tmp_path / "home"
    rep = forget_and_close(home, bank)
    keys = [i.key for i in rep.reconciliation.items]
    assert workers.run(home, bank.spec, rep.event_id, crash=when, rc=137) is None
    died = Counter({"reverse": 1}) if when == "after" else Counter()
    assert effects(bank.state()) == ORIGINAL + died

    # a fresh process: the item is in doubt (never run again), the others run
    out = workers.run(home, bank.spec, rep.event_id)["ok"]
    assert out["in_doubt"] == [keys[0]] and out["ran"] == keys[1:]
    assert list(out["states"].values()) == ["started", "done", "done", "done"]
    assert effects(bank.state()) == ORIGINAL + died + Counter({"pay": 1, "email": 1, "recall": 1})
    assert receipt_states(out["receipt"]) == ["started", "done", "done", "done"]
    assert record_states(home, rep.event_id) == [("compensation", "started"), ("compensation", "done"),
                                                 ("deferred_run", "done"), ("deferred_run", "done")]
    # and again: still in doubt, nothing runs
    u = Unsee(home)
    unsee_tools(u, bank.spec)
    again = u.reconcile(rep.event_id, "all")
    assert again.in_doubt == [keys[0]] and again.ran == []
    assert effects(bank.state()) == ORIGINAL + died + Counter({"pay": 1, "email": 1, "recall": 1})

    # an operator who looked at the world settles it: done (it happened) or released (it did not)
    if when == "after":
        u.ledger.resolve(keys[0], status="compensated", result="checked by hand")
        with pytest.raises(PlanAlreadyRun):
            u.reconcile(rep.event_id, "all")
    else:
        u.ledger.resolve(keys[0], status="released")
        assert u.reconcile(rep.event_id, "all").ran == [keys[0]]
    assert net(bank.state()) == reference("file") and effects(bank.state()) == RECONCILED
    assert target_copies(home) == {}


@pytest.mark.parametrize("when", ["before", "after"])
def test_an_idempotent_compensator_is_rolled_forward_after_a_death(tmp_path, bank, workers, reference, when):
    home = tmp_path / "home"
    u = Unsee(home)
    _, rep = forgotten(u, bank.spec, idempotent=True)  # (both compensators declared idempotent)
    u.close()
    keys = [i.key for i in rep.reconciliation.items]
    assert [i.idempotent for i in rep.reconciliation.items[:2]] == [True, True]
    workers.run(home, bank.spec, rep.event_id, crash=when, idempotent=True, rc=137)

    out = workers.run(home, bank.spec, rep.event_id, idempotent=True)["ok"]
    assert out["in_doubt"] == [] and out["ran"] == keys
    assert list(out["states"].values()) == ["done"] * 4
    # the reversal happened once in total (run again after "after": a no-op in the world)
    assert effects(bank.state()) == RECONCILED + (Counter({"reverse-noop": 1}) if when == "after" else Counter())
    assert net(bank.state()) == reference("file")
    assert receipt_states(out["receipt"]) == ["done"] * 4
    again = fresh_reconcile(home, bank, rep.event_id, run="all", idempotent=True)
    assert again["error"] == "PlanAlreadyRun"
    assert effects(bank.state())["reverse"] == 1


@pytest.mark.parametrize("tool_idempotent", [False, True])
def test_a_process_dying_in_a_deferred_call(tmp_path, bank, workers, reference, tool_idempotent):
    """The deferred payment's tool dies before it pays: in doubt (the landlord is not paid twice,
    nor at all until an operator releases it), or, the tool declared idempotent, rolled forward."""
    home = tmp_path / "home"
    u = Unsee(home)
    _, rep = forgotten(u, bank.spec, tool_idempotent=tool_idempotent)
    u.close()
    keys = [i.key for i in rep.reconciliation.items]
    assert rep.reconciliation.items[2].idempotent is tool_idempotent
    workers.run(home, bank.spec, rep.event_id, crash="run-before", rc=137)
    assert effects(bank.state()) == ORIGINAL + Counter({"reverse": 1, "recall": 1})
    out = workers.run(home, bank.spec, rep.event_id)["ok"]
    if tool_idempotent:
        assert out["ran"] == keys[2:] and out["in_doubt"] == []
    else:
        assert out["in_doubt"] == [keys[2]] and out["ran"] == [keys[3]]
        assert list(out["states"].values()) == ["done", "done", "started", "done"]
        assert effects(bank.state()) == RECONCILED - Counter({"pay": 1})
        u = Unsee(home)
        u.ledger.resolve(keys[2], status="released")  # (an operator saw no payment)
        u.close()
        assert fresh_reconcile(home, bank, rep.event_id, run="all")["ok"]["ran"] == [keys[2]]
    assert net(bank.state()) == reference("file") and effects(bank.state()) == RECONCILED


@pytest.mark.parametrize("mode", ["plan", "compensate"])
def test_a_crash_after_the_plan_was_kept(tmp_path, bank, reference, mode):
    """The forget committed and kept the plan, then died before the rest of what follows it
    (its compensations with ``compensate``, the receipt's section, the view record's items)."""
    home = tmp_path / "home"
    u = Unsee(home, reconcile=mode)
    run_agent(build_agent(unsee_tools(u, bank.spec), u))
    with crash_at("reconcile:planned"):
        rep = u.forget("t1", event())
    assert rep.committed and rep.reconciliation is None
    assert [(e.step, e.error) for e in rep.errors] == [("reconcile", "InjectedCrash")]
    assert effects(bank.state()) == ORIGINAL  # nothing compensated
    assert read_receipt(rep.receipt).reconciliation is None
    assert load_forget_record(home, rep.event_id).reconciliation == []
    u.close()

    out = fresh_reconcile(home, bank, rep.event_id, run="all")["ok"]
    assert len(out["ran"]) == 4 and list(out["states"].values()) == ["done"] * 4
    assert net(bank.state()) == reference("file") and effects(bank.state()) == RECONCILED
    assert receipt_states(out["receipt"]) == ["done"] * 4
    assert record_states(home, rep.event_id) == [("compensation", "done")] * 2 + [("deferred_run", "done")] * 2
    assert target_copies(home) == {}


def test_a_crash_after_an_item_was_recorded(tmp_path, bank, workers, reference):
    home = tmp_path / "home"
    u = Unsee(home)
    _, rep = forgotten(u, bank.spec)
    keys = [i.key for i in rep.reconciliation.items]
    with crash_at("reconcile:recorded"), pytest.raises(InjectedCrash):
        u.reconcile(rep.event_id, "all")
    assert effects(bank.state()) == ORIGINAL + Counter({"reverse": 1})
    assert [i.state for i in u.reconcile(rep.event_id, "plan").plan.items] == ["done", "planned", "planned",
                                                                                "planned"]
    u.close()

    out = workers.run(home, bank.spec, rep.event_id)["ok"]
    assert out["ran"] == keys[1:] and out["already"] == [] and out["in_doubt"] == []
    assert net(bank.state()) == reference("file") and effects(bank.state()) == RECONCILED
    assert receipt_states(out["receipt"]) == ["done"] * 4
    assert record_states(home, rep.event_id) == [("compensation", "done")] * 2 + [("deferred_run", "done")] * 2


def test_the_bookkeeping_of_the_last_item_completes_after_a_crash(tmp_path, bank):
    home = tmp_path / "home"
    u = Unsee(home)
    _, rep = forgotten(u, bank.spec)
    keys = [i.key for i in rep.reconciliation.items]
    out = u.reconcile(rep.event_id, "all", approve=lambda request: [True, True, True, False])
    assert out.declined == [keys[3]]
    with crash_at("reconcile:recorded"), pytest.raises(InjectedCrash):
        u.reconcile(rep.event_id, "all")  # runs the last item, dies before its bookkeeping
    assert effects(bank.state()) == RECONCILED
    u.close()
    after = fresh_reconcile(home, bank, rep.event_id, run="all")
    assert after["error"] == "PlanAlreadyRun"  # (everything ran: right)
    assert effects(bank.state()) == RECONCILED
    # what the receipt and the view record say of the last item
    assert receipt_states(rep.receipt) == ["done"] * 4
    assert record_states(home, rep.event_id)[3] == ("deferred_run", "done")
