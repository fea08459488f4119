"""The row-level audit (row_audit.py) reports what the full decode reports.

Real agents on real savers (file SqliteSaver, InMemorySaver, both under
``u.encrypted``), targets found raw, JSON-escaped, in non-ASCII text, only in
another letter case or without separators (decoded rows), only in checkpoint
metadata, only in a pending write, and not at all.
"""

import pytest
from langchain_core.messages import HumanMessage

from unsee.plugins.erasure import history, row_audit
from unsee.plugins.erasure.forms import holds_target, target_forms

from tests.support.erasure_agents import SECRET, build, run

THREAD = "t-rows"
QUOTED = 'say "Zoë Ünal" \\ at the desk'
TARGETS = [SECRET, "44172231", "CARD 4417-2231", '"Zoë Ünal"', "Zoë Ünal", "zoë ünal", "meta-only-token",
           "pending-only-7781", "nowhere-to-be-found", "Dana", "blender"]


def full_decode(saver, thread: str, target: str) -> tuple[int, int]:
    return history.history_holding(saver, thread, lambda v: holds_target(history.value_text(v), target))


def _session(tmp_path, **kw):
    u, agent, close = build(tmp_path, **kw)
    run(agent, THREAD, ["Hello, I'm Dana.", "Please look up T1.", QUOTED])
    # a string configurable key: LangGraph copies it into every checkpoint's metadata only
    agent.invoke({"messages": [HumanMessage("What is the status?")]},
                 {"configurable": {"thread_id": THREAD, "user_tag": "meta-only-token"}})
    # a pending write of the head checkpoint holds a target nothing else holds
    head = agent.checkpointer.get_tuple({"configurable": {"thread_id": THREAD}})
    agent.checkpointer.put_writes(head.config, [("messages", [HumanMessage("pending-only-7781")])], "task-x")
    return u, agent, close


@pytest.mark.parametrize("kind", ["sqlite", "sqlite-encrypted", "memory", "memory-encrypted"])
def test_rows_report_what_the_full_decode_reports(tmp_path, kind):
    kw = {"memory_saver": kind.startswith("memory"), "encrypted": kind.endswith("encrypted")}
    if kind == "memory-encrypted":
        from langgraph.checkpoint.memory import InMemorySaver

        from unsee import Unsee

        kw = {"saver": Unsee(home=tmp_path / "k").encrypted(InMemorySaver)}
    u, agent, close = _session(tmp_path, **kw)
    try:
        saver = agent.checkpointer
        held = {}
        for target in TARGETS:
            got = row_audit.history_rows_holding(saver, THREAD, target, target_forms(target))
            assert got is not None, "this saver's rows are read raw"
            assert got == full_decode(saver, THREAD, target), target
            held[target] = got[1]
        # the scenario reaches each case it is meant to
        assert held[SECRET] and held["meta-only-token"] and held["pending-only-7781"] == 1
        assert held['"Zoë Ünal"'] and held["zoë ünal"] and held["44172231"] and not held["nowhere-to-be-found"]
    finally:
        close()


def test_decodes_only_rows_whose_bytes_can_hide_the_target(tmp_path):
    u, agent, close = _session(tmp_path)
    try:
        inner = agent.checkpointer
        judge = row_audit.RowJudge(SECRET, target_forms(SECRET), inner.serde.loads_typed)
        row_audit._sqlite_history(inner, THREAD, judge)
        assert judge.rows > 0 and judge.decoded == 0  # plaintext msgpack + JSON: judged from the bytes
        judge = row_audit.RowJudge("44172231", target_forms("44172231"), inner.serde.loads_typed)
        row_audit._sqlite_history(inner, THREAD, judge)
        assert 0 < judge.decoded < judge.rows  # only the rows a lossy form matched
    finally:
        close()


def test_encrypted_rows_are_decoded(tmp_path):
    u, agent, close = _session(tmp_path, encrypted=True)
    try:
        inner = agent.checkpointer.inner
        judge = row_audit.RowJudge(SECRET, target_forms(SECRET), inner.serde.loads_typed)
        n, h = row_audit._sqlite_history(inner, THREAD, judge)
        assert h and judge.decoded >= n  # every checkpoint blob is ciphertext
    finally:
        close()


def test_store_rows_and_route_notes(tmp_path):
    u, agent, close = build(tmp_path)
    try:
        run(agent, THREAD, ["Hello, I'm Dana.", "remember that I prefer email"])
        inner = agent.store.inner if hasattr(agent.store, "inner") else agent.store
        for target in ["I prefer email", "I PREFER EMAIL", "prefer-email", "nothing here"]:
            items = list(inner.search((), limit=1000))
            want = len(items), sum(holds_target(history.value_text(i.value), target) for i in items)
            assert row_audit.store_rows_holding(inner, target, target_forms(target)) == want, target
        report = u.audit(THREAD, SECRET, agent=agent)
        route = next(r for r in report.routes if r.route == "langgraph.checkpoints")
        n, h = full_decode(agent.checkpointer, THREAD, SECRET)
        assert route.value_copies == h and route.notes[0] == f"{h} of {n} checkpoints hold the target"
    finally:
        close()


def test_unknown_savers_keep_the_full_decode():
    from langgraph.checkpoint.memory import InMemorySaver

    class Custom(InMemorySaver):  # a saver whose list() may not read what storage holds
        def list(self, config, **kw):
            return super().list(config, **kw)

    assert row_audit.history_rows_holding(Custom(), THREAD, SECRET, target_forms(SECRET)) is None
    assert row_audit.store_rows_holding(object(), SECRET, target_forms(SECRET)) is None


@pytest.mark.postgres
def test_postgres_route_counts_equal_the_full_decode(tmp_path, pg_url):
    for encrypted in (False, True):
        (tmp_path / str(encrypted)).mkdir()
        u, agent, close = _session(tmp_path / str(encrypted), pg_url=pg_url, encrypted=encrypted)
        try:
            for target in TARGETS:
                got = row_audit.history_rows_holding(agent.checkpointer, THREAD, target, target_forms(target))
                assert got is not None and got == full_decode(agent.checkpointer, THREAD, target), target
            report = u.audit(THREAD, SECRET, agent=agent)
            route = next(r for r in report.routes if r.route == "langgraph.checkpoints")
            n, h = full_decode(agent.checkpointer, THREAD, SECRET)
            assert h and route.value_copies == h and f"{h} of {n} checkpoints" in route.notes[0]
        finally:
            close()
