"""Erasure of the call ledger on PostgreSQL: the scenario of issue 12 with unsee's store (and
so its ledger) in PostgreSQL. The ledger's rows holding the target are redacted (facts
kept), the table rewritten (``VACUUM FULL``), no ``ledger.sqlite`` is made, and a worker
with another home on the same store finds the same ledger: the refund is never fired again."""

import json

import psycopg
import pytest

from tests.support.erasure_agents import SECRET, build, run
from unsee import RevocationEvent, Unsee
from unsee.plugins.erasure import read_receipt
from unsee.wiring import erasure_context

pytestmark = pytest.mark.postgres

REFUND = {"order": "5521", "reason": "broken blender"}


def ledger_rows(url: str) -> list[tuple]:
    with psycopg.connect(url) as conn:
        return conn.execute("SELECT call_id, session, tool, status, args_json, coalesce(result_json, ''), "
                            "coalesce(error, '') FROM unsee.calls ORDER BY seq").fetchall()


def filenode(url: str) -> int:
    with psycopg.connect(url) as conn:
        return conn.execute("SELECT pg_relation_filenode('unsee.calls')").fetchone()[0]


def test_forget_redacts_ledger_rows_on_postgres(tmp_path, pg_url):
    home = tmp_path / "a"
    home.mkdir()
    u, agent, close = build(home, pg_url=pg_url)
    try:
        run(agent, "t1")
        before = ledger_rows(pg_url)
        assert any(SECRET in "".join(r[4:]) for r in before)  # the lookup's result, the saved note
        assert not (home / "ledger.sqlite").exists()  # the ledger lives in the shared store
        node = filenode(pg_url)
        report = u.forget("t1", RevocationEvent(target=SECRET))
        assert report.committed and report.erased_clean
        after = ledger_rows(pg_url)
        assert not any(SECRET in "".join(r[4:]) for r in after)
        # every fact stays (id, session, tool, status): a real side effect is never fired twice
        assert {r[:4] for r in before} <= {r[:4] for r in after}
        assert filenode(pg_url) != node  # the table was rewritten: old row versions left the heap
        receipt = read_receipt(report.receipt)
        (route,) = [r for r in receipt.routes if r.name == "unsee.ledger"]
        assert route.copies_after == 0
        notes = json.dumps(receipt.model_dump(mode="json"))
        assert "unsee.calls: rows rewritten, VACUUM FULL" in notes
        assert "ledger.sqlite" not in notes and SECRET not in notes
        assert any("unsee.calls" in line for line in receipt.unreachable)  # the server's WAL, named
        assert u.audit("t1", SECRET).clean
        assert not (home / "ledger.sqlite").exists()
        payments = (home / "payments.log").read_text()
        assert payments.count("refund 5521") == 1
    finally:
        close()

    # another worker (its own home, the same store) reaches that ledger, made or not in its process
    other = Unsee(home=tmp_path / "b", store=pg_url)
    try:
        found = erasure_context(other).ledger()
        assert found is not None and found.path is None
        refired = []
        out = other.ledger.run("t1", "refund", REFUND, lambda: refired.append(1), occurrence=0)
        assert out.disposition == "replayed" and refired == []
        assert out.value == "refund of 5521 issued"
        assert not (tmp_path / "b" / "ledger.sqlite").exists()
    finally:
        other.close()


def test_no_ledger_table_no_route_made(tmp_path, pg_url):
    """A worker that never ran a tool on a store nobody did: no table is made just to be erased."""
    u = Unsee(home=tmp_path / "c", store=pg_url)
    try:
        assert erasure_context(u).ledger() is None
        with psycopg.connect(pg_url) as conn:
            assert conn.execute("SELECT to_regclass('unsee.calls')").fetchone()[0] is None
    finally:
        u.close()
