"""Two worker processes reconciling one forget on the embedded store (SQLite files in one home),
the first held inside its first compensation (the HTTP service keeps its reversal request
waiting) while the second runs: on SQLite a compensation another live process is running reads
as in doubt, so the second never runs it too; every effect reaches the world once (counted by the
service). (PostgreSQL, where the second waits for the first: test_reconcile_pg.py.)"""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest

from tests.support.reconcile_worlds import effects, forgotten, held, net, target_copies
from unsee import Unsee
from unsee.plugins.erasure import read_receipt
from unsee.plugins.reconcile import PlanAlreadyRun

RECONCILED = Counter({"pay": 2, "email": 2, "reverse": 1, "recall": 1})


def test_a_compensation_in_flight_elsewhere_is_never_run_twice(tmp_path, service, workers, reference):
    u = Unsee(tmp_path / "home")
    _, rep = forgotten(u, service.spec)
    u.close()
    keys = [i.key for i in rep.reconciliation.items]
    started = time.monotonic()
    ra, rb, b_done = held(tmp_path / "home", workers, service, rep,
                          second_waits=lambda: time.monotonic() - started > 8)
    # B waited for A (a live firer holds the call's lock; only a dead one's call is in doubt)
    assert not b_done and rb["ok"]["in_doubt"] == [] and ra["ok"]["in_doubt"] == []
    assert keys[0] in ra["ok"]["ran"] and keys[0] in rb["ok"]["already"]
    assert sorted(ra["ok"]["ran"] + rb["ok"]["ran"]) == sorted(keys)  # each item run by one of them
    assert not set(ra["ok"]["ran"]) & set(rb["ok"]["ran"])
    assert service.requests["/reverse"] == 1 and effects(service.state()) == RECONCILED
    assert net(service.state()) == reference("http")
    # A recorded its outcome: the plan is done, and its receipt (signed last, by A) says so
    fresh = Unsee(tmp_path / "home")
    assert [i.state for i in fresh.reconcile(rep.event_id, "plan").plan.items] == ["done"] * 4
    assert [i.state for i in read_receipt(rep.receipt).reconciliation.items] == ["done"] * 4
    assert target_copies(tmp_path / "home") == {}


def test_an_idempotent_compensation_in_flight_elsewhere_is_not_run_again_at_once(tmp_path, service, workers):
    u = Unsee(tmp_path / "home")
    _, rep = forgotten(u, service.spec, idempotent=True)
    u.close()
    started = time.monotonic()
    ra, rb, b_done = held(tmp_path / "home", workers, service, rep, idempotent=True,
                          second_waits=lambda: time.monotonic() - started > 8)
    assert "ok" in ra and "ok" in rb and not b_done  # B waited for the live firer
    # the world changed once either way (the compensator is idempotent) ...
    assert effects(service.state())["reverse"] == 1
    # ... but it was run by one process only
    assert service.requests["/reverse"] == 1


def test_two_threads_of_one_process_reconciling_at_once(tmp_path, service, reference):
    """In one process the second waits for the call in flight (it is not in doubt there)."""
    u = Unsee(tmp_path / "home")
    _, rep = forgotten(u, service.spec)
    keys = [i.key for i in rep.reconciliation.items]
    service.slow = {"reverse": 0.5}
    start = threading.Barrier(2)
    results: list = [None, None]

    def reconcile(n):
        start.wait()
        try:
            results[n] = u.reconcile(rep.event_id, "all")
        except PlanAlreadyRun as e:
            results[n] = e

    threads = [threading.Thread(target=reconcile, args=(n,)) for n in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    outs = [r for r in results if not isinstance(r, PlanAlreadyRun)]
    assert outs and all(r is not None for r in results)
    ran = [k for o in outs for k in o.ran]
    assert sorted(ran) == sorted(keys) and all(o.in_doubt == [] and o.failed == [] for o in outs)
    assert service.requests["/reverse"] == 1 and effects(service.state()) == RECONCILED
    assert net(service.state()) == reference("http")
