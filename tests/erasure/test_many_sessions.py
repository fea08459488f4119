"""Many sessions in one home (issue 29): three sessions hold the target, one does not, all on
one home, one checkpointer, one memory namespace (a ``u.recorded_store`` store the agent shares
across threads). Forgetting and erasing each in turn: every erasure is clean on its own scope,
lists the sessions not forgotten yet as holding copies ("also held by"), never counts them; the
last one leaves no copy anywhere. On SQLite files and on PostgreSQL."""

import pytest
from langchain_core.messages import HumanMessage

from tests.support.erasure_agents import SECRET, TURNS, build, raw_copies, run
from unsee import RevocationEvent
from unsee.plugins.erasure import read_receipt, verify_signature

HOLDERS = ["s1", "s2", "s3"]
CLEAN = "s4"  # never sees the target
CLEAN_TURNS = [t for t in TURNS if "T1" not in t and "File it" not in t]


def _last_reply(agent, thread):
    return agent.get_state({"configurable": {"thread_id": thread}}).values["messages"][-1].content


def _forget_each_in_turn(home, u, agent):
    for t in HOLDERS:
        run(agent, t)
    run(agent, CLEAN, CLEAN_TURNS)
    clean_reply = _last_reply(agent, CLEAN)
    before = u.audit("s2", SECRET, agent=agent)
    assert before.copies > 0 and set(before.other_sessions) == {"s1", "s3"}  # attributed, not counted as s2's
    pub = (home / "receipt.pub")
    for i, s in enumerate(HOLDERS):
        report = u.forget(s, RevocationEvent(target=SECRET))
        assert report.committed and report.receipt
        assert report.erased_clean, report.notes  # judged on s's scope only
        remaining = set(HOLDERS[i + 1:])
        assert set(report.also_held_by) == remaining  # the others' copies are listed, never dropped
        assert all(n > 0 for n in report.also_held_by.values())
        receipt = read_receipt(report.receipt)
        assert verify_signature(receipt, trusted_public_pem=pub.read_text())
        assert all(r.copies_after == 0 for r in receipt.routes)
        assert set(receipt.other_sessions or {}) == remaining
        audit = u.audit(s, SECRET, agent=agent)
        assert audit.clean and set(audit.other_sessions) == remaining
        for done in HOLDERS[:i]:  # an erased session stays clean while the others are erased
            assert u.audit(done, SECRET, agent=agent).clean
    for s in [*HOLDERS, CLEAN]:
        a = u.audit(s, SECRET, agent=agent)
        assert a.copies == 0 and a.other_sessions == {}
    assert _last_reply(agent, CLEAN) == clean_reply  # the session without the target is untouched
    agent.invoke({"messages": [HumanMessage("What is the status?")]}, {"configurable": {"thread_id": "s2"}})
    assert SECRET not in str(agent.get_state({"configurable": {"thread_id": "s2"}}).values["messages"])


def test_three_sessions_one_home_sqlite(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    u, agent, close = build(home)
    try:
        _forget_each_in_turn(home, u, agent)
    finally:
        close()
    assert raw_copies(home) == {}  # the whole home, by a plain grep


@pytest.mark.postgres
def test_three_sessions_one_home_postgres(tmp_path, pg_url):
    from tests.support.erasure_checks import sql_copies

    home = tmp_path / "home"
    home.mkdir()
    u, agent, close = build(home, pg_url=pg_url)
    try:
        _forget_each_in_turn(home, u, agent)
    finally:
        close()
    assert raw_copies(home) == {}
    assert sql_copies(pg_url) == {}  # no row of LangGraph's or unsee's tables holds it


def test_a_copy_no_session_owns_still_counts(tmp_path):
    """A home file no route and no session claims stays in home.other-files and makes the audit
    unclean: the alarm for a writer without a route is not silenced by the attribution."""
    home = tmp_path / "home"
    home.mkdir()
    u, agent, close = build(home)
    try:
        run(agent, "s1")
        run(agent, "s2")
        assert u.forget("s1", RevocationEvent(target=SECRET)).erased_clean
        (home / "stray.txt").write_text(f"a writer without a route kept {SECRET}")
        audit = u.audit("s1", SECRET, agent=agent)
        other = {r.route: r for r in audit.routes}["home.other-files"]
        assert other.copies == 1 and not audit.clean
        assert set(audit.other_sessions) == {"s2"}
    finally:
        close()


def test_a_receipt_without_other_sessions_signs_as_before():
    """The new field is left out of the signed bytes when empty: receipts written before it
    existed still verify."""
    from unsee.plugins.erasure.receipt import Receipt, RouteReceipt, canonical_bytes

    r = Receipt(unsee_version="0", event_id="e", target_hash="h", sessions=["s1"], unreachable=[], public_key="k",
                routes=[RouteReceipt(name="sandbox", method="m", copies_before=1, copies_after=0)])
    assert b"other_sessions" not in canonical_bytes(r)
    with_others = r.model_copy(update={"other_sessions": {"s2": 3}})
    assert b'"other_sessions":{"s2":3}' in canonical_bytes(with_others)
