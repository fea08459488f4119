"""A real ``create_agent`` agent (a scripted model: a reply is a function of the messages it sees)
reads an inbox holding an injection, pays the attacker and e-mails them; the forget of the
injection, then its reconciliation, must leave the world as it would be had the agent never seen
it. Each test runs on two worlds: JSON files, and a local HTTP service (tests/support/
reconcile_worlds.py). Side effects are counted in the world itself; the reference world is a
fresh agent's, run without unsee on a fresh world whose inbox never held the target."""

from __future__ import annotations

from collections import Counter
from typing import TypedDict

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.types import Command

from tests.support.reconcile_worlds import TARGET, effects, forgotten, net, target_copies
from unsee import Unsee
from unsee.plugins.reconcile import PlanAlreadyRun, UnknownReconciliation, interrupt_approval

#: the effects of the original run: the attacker paid and e-mailed
ORIGINAL = Counter({"pay": 1, "email": 1})
#: and after a whole reconciliation: both undone, the landlord paid and e-mailed, each once
RECONCILED = Counter({"pay": 2, "email": 2, "reverse": 1, "recall": 1})


def files_of(home) -> dict[str, bytes]:
    """The bytes of the home's receipts and forget records, and the ledger's rows."""
    from unsee.sandbox.ledger import Ledger

    out = {str(p.relative_to(home)): p.read_bytes() for d in ("receipts", "forgets") for p in (home / d).glob("*")}
    with Ledger(home / "ledger.sqlite") as led:
        out["ledger rows"] = repr([r for r in led.calls()]).encode()
        out["ledger plans"] = repr(led.plans()).encode()
    return out


def states(plan) -> list[tuple[str, str, str]]:
    return [(i.action, i.runs, i.state) for i in plan.items]


PLANNED = [("compensate", "undo_transfer", "planned"), ("compensate", "recall_email", "planned"),
           ("run", "send_money", "planned"), ("run", "send_email", "planned")]
DONE = [(a, r, "done") for a, r, _ in PLANNED]


def test_forget_then_reconcile_all_leaves_the_reference_world(tmp_path, world, reference):
    u = Unsee(tmp_path / "home")
    _, rep = forgotten(u, world.spec)
    before = world.state()
    assert effects(before) == ORIGINAL and TARGET in before["inbox"]
    # the default plans and runs nothing: the world is as the original run left it
    assert states(rep.reconciliation) == PLANNED
    assert world.state() == before and target_copies(u.home) == {}
    # the plan reads the same, and changes nothing: not the world, not a file of the home
    home_bytes = files_of(u.home)
    out = u.reconcile(rep.event_id, "plan")
    assert states(out.plan) == PLANNED and out.ran == [] and out.receipt is None
    assert world.state() == before and files_of(u.home) == home_bytes

    out = u.reconcile(rep.event_id, "all")
    assert states(out.plan) == DONE
    assert out.ran == [i.key for i in rep.reconciliation.items]
    assert (out.already, out.in_doubt, out.failed, out.declined, out.errors) == ([], [], [], [], [])
    after = world.state()
    assert net(after) == reference(world.kind)
    assert effects(after) == RECONCILED  # each fired once in total
    assert target_copies(u.home) == {}

    # a second reconcile, any run: nothing is run again
    for run in ("all", "compensate"):
        with pytest.raises(PlanAlreadyRun) as e:
            u.reconcile(rep.event_id, run)
        assert e.value.failed == 0
    assert world.state() == after and target_copies(u.home) == {}
    # (and a new process reading the plan agrees)
    u.close()
    u2 = Unsee(tmp_path / "home")
    assert states(u2.reconcile(rep.event_id, "plan").plan) == DONE
    with pytest.raises(PlanAlreadyRun):
        u2.reconcile(rep.event_id, "all")
    assert world.state() == after


def test_the_http_service_sees_each_request_once(tmp_path, service, reference):
    u = Unsee(tmp_path / "home")
    _, rep = forgotten(u, service.spec)
    assert service.requests == Counter({"/inbox": 1, "/pay": 1, "/email": 1})  # the replay called nothing
    u.reconcile(rep.event_id, "all")
    with pytest.raises(PlanAlreadyRun):
        u.reconcile(rep.event_id, "all")
    assert service.requests == Counter({"/inbox": 1, "/pay": 2, "/email": 2, "/reverse": 1, "/recall": 1})
    assert net(service.state()) == reference("http")


def test_reconcile_compensate_by_default_undoes_at_forget_time(tmp_path, world, reference):
    u = Unsee(tmp_path / "home", reconcile="compensate")
    _, rep = forgotten(u, world.spec)
    # the compensations ran with the forget; the deferred calls wait for a decision
    assert states(rep.reconciliation) == DONE[:2] + PLANNED[2:]
    assert effects(world.state()) == ORIGINAL + Counter({"reverse": 1, "recall": 1})
    assert net(world.state())["payments"] == [] and target_copies(u.home) == {}
    with pytest.raises(PlanAlreadyRun):
        u.reconcile(rep.event_id, "compensate")
    out = u.reconcile(rep.event_id, "all")
    assert out.ran == [i.key for i in rep.reconciliation.items[2:]]
    assert net(world.state()) == reference(world.kind)
    assert effects(world.state()) == RECONCILED and target_copies(u.home) == {}


def test_reconcile_never_plans_nothing(tmp_path, service):
    u = Unsee(tmp_path / "home", reconcile="never")
    _, rep = forgotten(u, service.spec)
    assert rep.reconciliation is None
    with pytest.raises(UnknownReconciliation):
        u.reconcile(rep.event_id, "all")
    assert effects(service.state()) == ORIGINAL


def test_run_compensate_leaves_the_deferred_calls(tmp_path, world):
    u = Unsee(tmp_path / "home")
    _, rep = forgotten(u, world.spec)
    out = u.reconcile(rep.event_id, "compensate")
    assert states(out.plan) == DONE[:2] + PLANNED[2:]
    assert effects(world.state()) == ORIGINAL + Counter({"reverse": 1, "recall": 1})


def test_an_approval_that_rejects_one_item_runs_the_others(tmp_path, world, reference):
    u = Unsee(tmp_path / "home")
    _, rep = forgotten(u, world.spec)
    keys = [i.key for i in rep.reconciliation.items]
    asked = []

    def approve(request):
        asked.append(request)
        return {"decisions": [{"type": "reject", "message": "ask the customer first"} if a["name"] == "recall_email"
                              else {"type": "approve"} for a in request["action_requests"]]}

    out = u.reconcile(rep.event_id, "all", approve=approve)
    assert len(asked) == 1
    assert [a["name"] for a in asked[0]["action_requests"]] == ["undo_transfer", "recall_email", "send_money",
                                                               "send_email"]
    assert [a["id"] for a in asked[0]["action_requests"]] == keys
    assert out.declined == [keys[1]] and out.ran == [keys[0], keys[2], keys[3]]
    assert states(out.plan) == [DONE[0], PLANNED[1], DONE[2], DONE[3]]
    assert effects(world.state()) == RECONCILED - Counter({"recall": 1})
    assert ("ATTACKER-IBAN" in str(net(world.state())["emails"]))  # not recalled: declined

    # declined is not done: a later decision runs it, and only it
    out = u.reconcile(rep.event_id, "all", approve=lambda request: [True] * len(request["action_requests"]))
    assert out.ran == [keys[1]] and states(out.plan) == DONE
    assert net(world.state()) == reference(world.kind) and effects(world.state()) == RECONCILED
    # a decision that rejects everything runs nothing and is no error
    u2 = Unsee(tmp_path / "home2")
    _, rep2 = forgotten(u2, world.spec)
    out = u2.reconcile(rep2.event_id, "all", approve=lambda request: False)
    assert out.ran == [] and len(out.declined) == 4 and states(out.plan) == PLANNED


class ReconcileState(TypedDict, total=False):
    event_id: str
    ran: list[str]
    declined: list[str]


def test_a_langgraph_node_asks_a_human_through_interrupt(tmp_path, world, reference):
    u = Unsee(tmp_path / "home")
    _, rep = forgotten(u, world.spec)
    keys = [i.key for i in rep.reconciliation.items]
    before = world.state()
    calls = []

    def reconcile_node(state: ReconcileState) -> ReconcileState:
        calls.append(1)
        out = u.reconcile(state["event_id"], "all", approve=interrupt_approval)
        return {"ran": out.ran, "declined": out.declined}

    graph = StateGraph(ReconcileState)
    graph.add_node("reconcile", reconcile_node)
    graph.add_edge(START, "reconcile")
    app = graph.compile(checkpointer=InMemorySaver())
    cfg = {"configurable": {"thread_id": "reconcile-1"}}

    paused = app.invoke({"event_id": rep.event_id}, cfg)
    (interrupt,) = paused["__interrupt__"]
    request = interrupt.value
    assert [a["name"] for a in request["action_requests"]] == ["undo_transfer", "recall_email", "send_money",
                                                              "send_email"]
    assert all(r["allowed_decisions"] == ["approve", "reject"] for r in request["review_configs"])
    assert request["reconcile"] == rep.event_id
    assert world.state() == before  # nothing ran while the graph waits
    assert states(u.reconcile(rep.event_id, "plan").plan) == PLANNED

    done = app.invoke(Command(resume={"decisions": [{"type": "approve"}, {"type": "approve"},
                                                     {"type": "reject", "message": "not yet"},
                                                     {"type": "approve"}]}), cfg)
    assert done["ran"] == [keys[0], keys[1], keys[3]] and done["declined"] == [keys[2]]
    assert len(calls) == 2  # the node ran again with the human's decisions
    assert effects(world.state()) == RECONCILED - Counter({"pay": 1})
    # the rejected item waits for the next decision
    out = u.reconcile(rep.event_id, "all")
    assert out.ran == [keys[2]]
    assert net(world.state()) == reference(world.kind) and effects(world.state()) == RECONCILED
    assert target_copies(u.home) == {}
