"""The reconciliation on a PostgreSQL store (``Unsee(home, store=<url>)``: plans and ledger rows in
the database): the same forget and reconcile as on SQLite, and worker processes, each with its own
``Unsee`` on the same store, reconciling the same forget at the same moment: each compensation
and each deferred call reaches the world exactly once (counted by the HTTP service itself), and a
worker that dies in a compensator leaves it in doubt for the others."""

from __future__ import annotations

import time
from collections import Counter

import pytest

from tests.support.reconcile_worlds import TARGET, effects, forgotten, held, net, target_copies
from unsee import Unsee
from unsee.plugins.reconcile import PlanAlreadyRun

pytestmark = pytest.mark.postgres

ORIGINAL = Counter({"pay": 1, "email": 1})
RECONCILED = Counter({"pay": 2, "email": 2, "reverse": 1, "recall": 1})


def rows_holding(url: str, needle: str) -> dict[str, int]:
    """Rows of every table of the database holding ``needle``, as PostgreSQL reads them (each row
    as text; a ``bytea`` column shows its bytes in hex)."""
    import psycopg

    out = {}
    with psycopg.connect(url) as conn:
        tables = conn.execute("SELECT table_schema, table_name FROM information_schema.tables "
                              "WHERE table_schema NOT IN ('pg_catalog', 'information_schema') "
                              "AND table_type = 'BASE TABLE'").fetchall()
        for schema, table in tables:
            n = conn.execute(f'SELECT count(*) FROM "{schema}"."{table}" t WHERE strpos(t::text, %s) > 0 '
                             "OR strpos(t::text, %s) > 0", (needle, needle.encode().hex())).fetchone()[0]
            if n:
                out[f"{schema}.{table}"] = n
    return out


def forget_on(pg_url, home, service, idempotent=False):
    u = Unsee(home, store=pg_url)
    _, rep = forgotten(u, service.spec, idempotent=idempotent)
    u.close()
    return rep


def test_forget_then_reconcile_on_postgres(tmp_path, pg_url, service, reference):
    u = Unsee(tmp_path / "home", store=pg_url)
    assert u.ledger.dialect == "postgresql"
    _, rep = forgotten(u, service.spec)
    assert [i.state for i in rep.reconciliation.items] == ["planned"] * 4
    assert effects(service.state()) == ORIGINAL
    out = u.reconcile(rep.event_id, "all")
    assert len(out.ran) == 4 and [i.state for i in out.plan.items] == ["done"] * 4
    assert net(service.state()) == reference("http") and effects(service.state()) == RECONCILED
    with pytest.raises(PlanAlreadyRun):
        u.reconcile(rep.event_id, "all")
    assert effects(service.state()) == RECONCILED
    statuses = sorted(r.status for r in u.ledger.calls() if r.call_id.startswith("rec-"))
    assert statuses == ["compensated", "compensated", "done", "done"]
    assert target_copies(u.home) == {} and rows_holding(pg_url, TARGET) == {}
    assert "unsee.calls" in rows_holding(pg_url, "ATTACKER-IBAN")  # (the scan finds what is there)
    u.close()
    # another machine on the store reads the same plan, already run
    other = Unsee(tmp_path / "other-home", store=pg_url)
    assert [i.state for i in other.reconcile(rep.event_id, "plan").plan.items] == ["done"] * 4


def test_compensate_by_default_on_postgres(tmp_path, pg_url, service, reference):
    u = Unsee(tmp_path / "home", store=pg_url, reconcile="compensate")
    _, rep = forgotten(u, service.spec)
    assert [i.state for i in rep.reconciliation.items] == ["done", "done", "planned", "planned"]
    u.reconcile(rep.event_id, "all")
    assert net(service.state()) == reference("http") and effects(service.state()) == RECONCILED


def _race(tmp_path, workers, pg_url, service, rep, n=2, **kw):
    """``n`` workers on the store, each ready (its Unsee and tools made), then all let go at once."""
    go = tmp_path / "go"
    procs = [workers.start(tmp_path / f"home-{i}", service.spec, rep.event_id, store=pg_url,
                           ready=tmp_path / f"ready-{i}", go=go, **kw) for i in range(n)]
    deadline = time.monotonic() + 90
    while not all((tmp_path / f"ready-{i}").exists() for i in range(n)):
        assert time.monotonic() < deadline, "workers never got ready"
        assert all(p.poll() is None for p in procs), [workers.finish(p) for p in procs if p.poll() is not None]
        time.sleep(0.02)
    go.write_text("go")
    return [workers.finish(p) for p in procs]


def test_two_workers_reconciling_at_once_reach_the_world_once(tmp_path, pg_url, service, workers, reference):
    rep = forget_on(pg_url, tmp_path / "home", service)
    keys = [i.key for i in rep.reconciliation.items]
    service.slow = {"reverse": 0.6, "recall": 0.3}  # (compensations in flight while the other arrives)
    results = _race(tmp_path, workers, pg_url, service, rep)
    ran, already = [], []
    for r in results:
        if "ok" in r:
            ran += r["ok"]["ran"]
            already += r["ok"]["already"]
            assert r["ok"]["in_doubt"] == [] and r["ok"]["failed"] == []
            assert sorted(r["ok"]["ran"] + r["ok"]["already"]) == sorted(keys)  # (the other's: waited for)
            assert list(r["ok"]["states"].values()) == ["done"] * 4
        else:  # (arrived after the other had run everything)
            assert r["error"] == "PlanAlreadyRun", r
    assert sorted(ran) == sorted(keys) and len(ran) == len(set(ran))  # each item ran in one worker
    assert set(already) <= set(keys)
    assert service.requests["/reverse"] == 1 and service.requests["/recall"] == 1
    assert service.requests["/pay"] == 2 and service.requests["/email"] == 2
    assert effects(service.state()) == RECONCILED  # (no reverse-noop: nobody ran it twice)
    assert net(service.state()) == reference("http")


def waiting_for_a_lock(url: str) -> bool:
    """Whether a session of the database waits for an advisory lock (a call's, held by its firer)."""
    import psycopg

    with psycopg.connect(url) as conn:
        # (pg_locks is the whole server's: other tests' databases wait for their own locks)
        return conn.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
                            "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
                            ).fetchone()[0] > 0


@pytest.mark.parametrize("idempotent", [False, True])
def test_a_worker_waits_for_a_compensation_in_flight_elsewhere(tmp_path, pg_url, service, workers, reference,
                                                               idempotent):
    """Worker A is held inside its reversal; worker B, on the same store, waits for it (the call's
    lock) instead of reporting it in doubt or running it again, then finds it done."""
    rep = forget_on(pg_url, tmp_path / "home", service, idempotent=idempotent)
    keys = [i.key for i in rep.reconciliation.items]
    ra, rb, b_done = held(tmp_path / "home-w", workers, service, rep, idempotent=idempotent, store=pg_url,
                          second_waits=lambda: waiting_for_a_lock(pg_url))
    assert not b_done  # it waited
    assert "ok" in ra and "ok" in rb, (ra, rb)
    assert ra["ok"]["ran"][0] == keys[0] and keys[0] in rb["ok"]["already"]
    assert rb["ok"]["in_doubt"] == [] and sorted(ra["ok"]["ran"] + rb["ok"]["ran"]) == sorted(keys)
    assert service.requests["/reverse"] == 1 and effects(service.state()) == RECONCILED
    assert net(service.state()) == reference("http")


@pytest.mark.parametrize("idempotent", [False, True])
def test_a_worker_dying_in_a_compensator_on_postgres(tmp_path, pg_url, service, workers, reference, idempotent):
    """Its connection closes with it, the server frees the call's lock: the next worker finds the
    compensation in doubt (not run again), or rolls an idempotent one forward."""
    rep = forget_on(pg_url, tmp_path / "home", service, idempotent=idempotent)
    keys = [i.key for i in rep.reconciliation.items]
    assert workers.run(tmp_path / "home-1", service.spec, rep.event_id, store=pg_url, crash="after",
                       idempotent=idempotent, rc=137) is None
    assert effects(service.state()) == ORIGINAL + Counter({"reverse": 1})
    out = workers.run(tmp_path / "home-2", service.spec, rep.event_id, store=pg_url, idempotent=idempotent)["ok"]
    if idempotent:
        assert out["ran"] == keys and out["in_doubt"] == []
        assert effects(service.state()) == RECONCILED + Counter({"reverse-noop": 1})
        assert net(service.state()) == reference("http")
    else:
        assert out["in_doubt"] == [keys[0]] and out["ran"] == keys[1:]
        assert effects(service.state()) == RECONCILED  # the reversal happened once, before the death
        assert list(out["states"].values()) == ["started", "done", "done", "done"]
