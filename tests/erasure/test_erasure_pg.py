"""Record, forget and erasure with LangGraph's PostgresSaver and PostgresStore and unsee's
records in PostgreSQL: the same outcome as on SQLite, audited at the value level in SQL
(decompressed: pglz hides copies from a byte scan), tables rewritten, the WAL named as out of reach."""

import json

import pytest
from langchain_core.messages import HumanMessage

from tests.support.erasure_agents import SECRET, build, live, run
from tests.support.erasure_checks import CFG, history_holding, sql_copies, world
from unsee import RevocationEvent
from unsee.plugins.erasure import read_receipt, verify_signature

pytestmark = pytest.mark.postgres

@pytest.fixture
def recorded_pg(tmp_path, pg_url):
    home = tmp_path / "home"
    home.mkdir()
    u, agent, close = build(home, pg_url=pg_url)
    run(agent, "t1")
    yield home, u, agent, close
    close()


def test_forget_erases_postgres_routes_and_names_the_wal(recorded_pg, pg_url):
    home, u, agent, close = recorded_pg
    before = sql_copies(pg_url)
    assert before.get("public.checkpoint_blobs.blob", 0) + before.get("public.checkpoint_writes.blob", 0) > 0
    assert before.get("unsee.content.content")
    report = u.forget("t1", RevocationEvent(target=SECRET))
    assert report.committed and report.erased_clean and report.receipt
    assert history_holding(agent)[1] == 0
    assert sql_copies(pg_url) == {}  # no row of LangGraph's or unsee's tables holds it
    receipt = read_receipt(report.receipt)
    assert verify_signature(receipt, trusted_public_pem=(home / "receipt.pub").read_text())
    routes = {r.name: r for r in receipt.routes}
    assert {"langgraph.checkpoints", "langgraph.store", "unsee.records", "unsee.ledger", "sandbox"} <= set(routes)
    assert all(r.copies_after == 0 for r in receipt.routes)
    notes = json.dumps(receipt.model_dump(mode="json"))
    assert "VACUUM FULL" in notes and "PostgreSQL WAL" in notes
    assert SECRET not in notes
    assert u.audit("t1", SECRET).clean
    out = agent.invoke({"messages": [HumanMessage("What card do you have?")]}, CFG)
    assert SECRET not in repr(out["messages"])


def test_same_outcome_as_sqlite(tmp_path, pg_url):
    """One scenario on both engines: the same live state, store items, sandbox files and
    ledger facts after forget + erasure."""
    results = {}
    for engine, url in (("sqlite", None), ("postgres", pg_url)):
        home = tmp_path / engine
        home.mkdir()
        u, agent, close = build(home, pg_url=url)
        run(agent, "t1")
        report = u.forget("t1", RevocationEvent(target=SECRET))
        assert report.committed and report.erased_clean
        state = world(home, u, agent)
        results[engine] = (state[0], state[1], state[2], [(tool, status) for _, tool, status in state[3]])
        close()
    assert results["sqlite"] == results["postgres"]
    assert SECRET not in repr(results["postgres"])


def test_encrypted_postgres_history(tmp_path, pg_url):
    home = tmp_path / "enc"
    home.mkdir()
    u, agent, close = build(home, pg_url=pg_url, encrypted=True)
    run(agent, "t1")
    copies = sql_copies(pg_url)
    assert not any(k.startswith("public.checkpoint") for k in copies)  # ciphertext only in LangGraph's tables
    old = u.keystore.kids_of("t1")
    report = u.forget("t1", RevocationEvent(target=SECRET))
    assert report.erased_clean
    assert not set(old) & set(u.keystore.kids_of("t1"))  # the WAL's copies are under destroyed keys
    assert history_holding(agent)[1] == 0 and live(agent)
    assert sql_copies(pg_url) == {}
    close()
