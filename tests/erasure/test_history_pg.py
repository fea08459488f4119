"""A plain ``PostgresSaver`` thread's history rewritten in place with SQL (issue 29, part 2;
plugins/erasure/history_pg.py), on real ``create_agent`` agents over a private PostgreSQL.

Forget + erase on a full-state and on a ``DeltaChannel`` thread takes the SQL path
(the erasure's note says so) and leaves the prefix's rows as they were (same
``xmin``, same JSONB: never rewritten); the result is clean, ``get_state_history``
holds the target in 0 snapshots, every remaining checkpoint rebuilds to its own
world's state, no blob of the thread is unreferenced, and no row of LangGraph's
tables holds the target. A crash at each fault point inside the transaction leaves
the old thread's rows whole and a rerun finishes; another saver is refused with
nothing written. A turn taken after the forget's commit is kept, its
first checkpoint re-parented (on a delta graph: the one checkpoint encoded again).
"""

from __future__ import annotations

import re

import psycopg
import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.postgres import PostgresSaver
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

from tests.support.erasure_agents import SECRET, build, run
from tests.support.erasure_checks import check_clean, sql_copies, states
from unsee import RevocationEvent
from unsee.middleware.errors import InjectedCrash
from unsee.middleware.faults import crash_at
from unsee.plugins.erasure.history import HistoryNotRewritable, config_of, value_text
from unsee.plugins.erasure.history_pg import postgres_saver, rewrite_postgres

pytestmark = pytest.mark.postgres

_REFERENCED = ("EXISTS (SELECT 1 FROM checkpoints c CROSS JOIN LATERAL jsonb_each_text(c.checkpoint -> "
               "'channel_versions') v WHERE c.thread_id = b.thread_id AND c.checkpoint_ns = b.checkpoint_ns "
               "AND v.key = b.channel AND v.value = b.version)")


T = "t1"


def _rows(url: str, thread: str = T) -> dict[str, dict]:
    """The thread's rows per table, keyed, with their xmin (a row written again gets a new one)."""
    with psycopg.connect(url) as conn:
        return {
            "checkpoints": {r[0]: r[1:] for r in conn.execute(
                "SELECT checkpoint_id, xmin::text, checkpoint::text, metadata::text, parent_checkpoint_id "
                "FROM checkpoints WHERE thread_id = %s", (thread,))},
            "blobs": {(r[0], r[1]): r[2:] for r in conn.execute(
                "SELECT channel, version, xmin::text, md5(coalesce(blob, ''::bytea)) FROM checkpoint_blobs "
                "WHERE thread_id = %s", (thread,))},
            "writes": {r[:3]: r[3:] for r in conn.execute(
                "SELECT checkpoint_id, task_id, idx, xmin::text, md5(blob) FROM checkpoint_writes "
                "WHERE thread_id = %s", (thread,))},
        }


def _unreferenced_blobs(url: str, thread: str = T) -> int:
    with psycopg.connect(url) as conn:
        return conn.execute(f"SELECT count(*) FROM checkpoint_blobs b WHERE thread_id = %s AND NOT {_REFERENCED}",
                            (thread,)).fetchone()[0]


def _reencoded(note: str) -> int:
    return int(re.search(r"\((\d+) values re-encoded\)", note).group(1))


def _pool_saver(url: str) -> PostgresSaver:
    pool = ConnectionPool(url, min_size=1, max_size=2, open=True,
                          kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row})
    saver = PostgresSaver(pool)
    saver.setup()
    return saver


@pytest.mark.parametrize("delta,went_on,pool", [(None, False, False), (4, False, False), (4, True, False),
                                                (4, True, True)],
                         ids=["full-state", "delta-4", "delta-4-went-on", "delta-4-went-on-pool"])
def test_forget_and_erase_rewrite_the_suffix_only(tmp_path, pg_url, delta, went_on, pool):
    """``went_on``: a turn taken after the forget's commit and before the erasure: kept, its
    first checkpoint re-parented onto the suffix's head (and, on a delta graph, its rebuilt
    messages stored: the one checkpoint encoded again). ``pool``: the saver holds a
    ``ConnectionPool``, not a connection."""
    saver = _pool_saver(pg_url) if pool else None
    u, agent, close = build(tmp_path, pg_url=pg_url, delta=delta, saver=saver)
    try:
        assert postgres_saver(agent.checkpointer)
        run(agent, T)
        event = RevocationEvent(target=SECRET)
        report = u.forget(T, event, agent=agent, erase=False)
        if went_on:
            agent.invoke({"messages": [HumanMessage("Please look up T2.")]}, config_of(T))
        expected = {**states(agent, T), **states(agent, report.scratch_thread)}
        before = _rows(pg_url)
        assert any(SECRET.encode() in b for b in _blob_bytes(pg_url))  # the target is in blobs now

        result = u.erase(T, event, agent=agent)
        assert result.clean, result.after
        (note,) = [n for n in result.notes["langgraph.checkpoints"] if "history" in n]
        assert note.startswith("history rewritten in place: ") and "row-copied" in note, note
        after = _rows(pg_url)

        kept = sorted(set(before["checkpoints"]) & set(after["checkpoints"]))
        assert f"{len(kept)} checkpoints kept untouched" in note
        changed = [cid for cid in kept if after["checkpoints"][cid] != before["checkpoints"][cid]]
        # the prefix is never rewritten (the same row version, the same document); the first turn
        # kept after the commit only gets its new parent (and rebuilt values)
        assert len(changed) == went_on, changed
        for cid in changed:
            assert after["checkpoints"][cid][3] != before["checkpoints"][cid][3]  # its parent
        for key, row in after["blobs"].items():  # a blob of the old thread stays the row it was
            if key in before["blobs"]:
                assert row == before["blobs"][key], key
        for key, row in after["writes"].items():
            if key[0] in kept:
                assert row == before["writes"][key], key
        # only re-parented delta checkpoints whose messages no blob holds are encoded again
        # (on PostgreSQL the first counterfactual one shares its seed's snapshot blob)
        assert _reencoded(note) == (1 if went_on else 0), note

        check_clean(agent, tmp_path, expected)
        assert _unreferenced_blobs(pg_url) == 0
        assert sql_copies(pg_url) == {}
        with psycopg.connect(pg_url) as conn:  # the scratch thread is gone with its blobs
            assert conn.execute("SELECT count(*) FROM checkpoint_blobs WHERE thread_id <> %s", (T,)).fetchone()[0] == 0
        # the session goes on from the rewritten head
        out = agent.invoke({"messages": [HumanMessage("What is the status?")]}, config_of(T))
        assert SECRET not in value_text(out)
    finally:
        close()
        if saver is not None:
            saver.conn.close()


def _blob_bytes(url: str) -> list[bytes]:
    with psycopg.connect(url) as conn:
        return [bytes(r[0]) for r in conn.execute("SELECT blob FROM checkpoint_blobs WHERE blob IS NOT NULL")]


@pytest.mark.parametrize("point", ["erase:history:staged", "erase:history:swapping"])
def test_a_crash_inside_the_transaction_leaves_the_old_thread_whole(tmp_path, pg_url, point):
    u, agent, close = build(tmp_path, pg_url=pg_url, delta=2)
    try:
        run(agent, T)
        event = RevocationEvent(target=SECRET)
        report = u.forget(T, event, agent=agent, erase=False)
        expected = {**states(agent, T), **states(agent, report.scratch_thread)}
        before, scratch = _rows(pg_url), _rows(pg_url, report.scratch_thread)
        with crash_at(point), pytest.raises(InjectedCrash):
            u.erase(T, event, agent=agent)
        assert _rows(pg_url) == before  # rolled back: every row of the old thread, as it was
        assert _rows(pg_url, report.scratch_thread) == scratch
        result = u.erase(T, event, agent=agent)
        assert result.clean, result.after
        assert any(n.startswith("history rewritten in place") for n in result.notes["langgraph.checkpoints"])
        check_clean(agent, tmp_path, expected)
        assert _unreferenced_blobs(pg_url) == 0
    finally:
        close()


def test_another_saver_is_refused_with_nothing_written(tmp_path, pg_url):
    # (a thread's nested runs' rows are no refusal: the rewrite deletes them, history.NESTED;
    # tests/forget/test_nested_runs.py)
    u, agent, close = build(tmp_path, pg_url=pg_url)
    try:
        run(agent, T, ["Please look up T1."])
        kw = dict(fork_checkpoint_id=None, suffix_thread=T + "~cf-none", holds_target=lambda v: False, marker={},
                  continue_after=None, specs=None)
        assert not postgres_saver(InMemorySaver())
        with pytest.raises(HistoryNotRewritable, match="not a plain PostgresSaver"):
            rewrite_postgres(InMemorySaver(), T, **kw)
    finally:
        close()
