"""A second forget on a session whose first forget was reconciled: the world must still end as the
reference (the agent never saw either target), and the second erasure must reach what the first
reconciliation kept.

The first forget removes the injection; its reconciliation pays the landlord and e-mails them a
confirmation quoting the inbox ("Rent is 50 to LANDLORD."). The second forget removes that inbox
line too. The reference: a fresh agent on a fresh world whose inbox holds neither."""

from __future__ import annotations

import pytest

from tests.support.reconcile_worlds import (
    INBOX, PaymentService, build_agent, effects, forgotten, net, plain_tools, run_agent, target_copies,
)
from unsee import Unsee
from unsee.plugins.forget import RevocationEvent

SECOND = "Rent is 50 to LANDLORD."


def reference_without_both(tmp_path) -> dict:
    s = PaymentService(with_target=False)
    s._state["inbox"] = INBOX.format(target="").replace(SECOND, "")
    s.start()
    try:
        run_agent(build_agent(plain_tools(s.spec)), "reference")
        return net(s.state())
    finally:
        s.stop()


@pytest.fixture
def twice(tmp_path, service):
    """Both forgets, each reconciled ``all``: (the home, the second forget's report)."""
    u = Unsee(tmp_path / "home")
    _, first = forgotten(u, service.spec)
    u.reconcile(first.event_id, "all")
    assert effects(service.state())["pay"] == 2  # the attacker's (reversed) and the landlord's
    second = u.forget("t1", RevocationEvent(target=SECOND, reason="the customer asked"))
    assert second.committed
    if second.reconciliation is not None and any(i.actionable for i in second.reconciliation.items):
        u.reconcile(second.event_id, "all")
    yield u, second
    u.close()


def test_a_later_forget_does_not_run_again_what_a_reconciliation_ran(tmp_path, service, twice):
    u, second = twice
    assert net(service.state())["payments"] == reference_without_both(tmp_path)["payments"]
    assert effects(service.state())["pay"] == 2


def test_a_later_forget_erases_what_an_earlier_plan_holds(tmp_path, service, twice):
    u, second = twice
    u.flush()
    assert target_copies(u.home, SECOND) == {}
    assert second.erased_clean is True
