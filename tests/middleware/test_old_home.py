"""A home recorded by an earlier unsee still opens and works with this one.

``tests/data/old_home/home`` was recorded by an earlier version (``MADE_BY`` says which commit;
``scripts/make-old-home.py`` made it, running ``tests/support/old_home_agent.py``'s session: seven turns, the
secret entering through a tool result in turn 3 among parallel lookups, an external refund in
turn 4, two summarization compactions). Its records hold every context manifest whole (a
model turn's ``parents`` and a checkpoint's ``prompt_manifest`` as JSON lists). On a copy of
it, today's code lists its session, finds the secret, forgets it with the agent rebuilt on the
copied checkpoint file, and the result is the counterfactual computed from scratch (B5), with
no side effect fired again and no byte of the secret left in any file of the home.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from tests.support.old_home_agent import CHECKPOINTS, SECRET, THREAD, TURNS, live, make_agent, open_home, run
from unsee import ArtifactType, RevocationEvent, TargetNotFound
from unsee.testing import file_copies

FIXTURE = Path(__file__).resolve().parent.parent / "data" / "old_home"
MADE_BY = "eb0fbe2"  # the commit that recorded the fixture (before manifests were stored as deltas)
FOLLOW_UP = "One more question about T2."


def _copies(home: Path) -> dict[str, int]:
    """Raw byte copies of the secret per file under ``home`` (a plain grep, not unsee's scanner)."""
    return file_copies([home], SECRET)


def _reference(turns=TURNS):
    """B5, independently of unsee: the same agent, without unsee, run from scratch on a fresh
    thread of a fresh checkpointer, in a world whose lookup never returns the secret."""
    fired: list = []
    agent = make_agent(InMemorySaver(), secret="", fired=fired)
    run(agent, "reference", turns)
    return live(agent, "reference"), fired


@pytest.fixture
def old_home(tmp_path) -> Path:
    home = tmp_path / "home"
    shutil.copytree(FIXTURE / "home", home)
    return home


def test_fixture_is_the_old_format():
    """The fixture is what the earlier version wrote: every model turn's context manifest and every
    checkpoint's prompt manifest stored whole, as a JSON list (a delta would be a JSON object)."""
    made_by = json.loads((FIXTURE / "MADE_BY").read_text())
    assert made_by["commit"] == MADE_BY and made_by["thread"] == THREAD and made_by["turns"] == len(TURNS)
    stray = [p.name for p in (FIXTURE / "home").iterdir() if p.name.endswith(("-wal", "-shm", "-journal"))]
    assert not stray, (f"{stray}: the fixture was opened in place (even a read-only sqlite3 connection to a "
                       "WAL database leaves these); delete them, or regenerate it (scripts/make-old-home.py)")
    db = FIXTURE / "home" / "provenance.sqlite"
    conn = sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True)  # (reads the fixture, never changes it)
    try:
        parents = [r[0] for r in conn.execute("SELECT parents FROM artifacts WHERE type = ? ORDER BY seq",
                                              (ArtifactType.MODEL_TURN.value,))]
        manifests = [r[0] for r in conn.execute("SELECT prompt_manifest FROM checkpoints ORDER BY seq")]
        span_parents = [json.loads(r[0]).get("unsee.artifact.parents") for r in
                        conn.execute("SELECT attributes FROM spans WHERE name LIKE 'chat %' ORDER BY start_ns")]
    finally:
        conn.close()
    assert sorted(p.name for p in (FIXTURE / "home").iterdir()) == sorted(made_by["files"])
    assert len(parents) == 10 and len(manifests) == 10 and len(span_parents) == 10
    for text in parents + manifests:
        assert text.startswith("[") and isinstance(json.loads(text), list), text[:80]
    # whole manifests: a later turn's holds the earlier turn's ids (they grew until a compaction)
    assert set(json.loads(parents[0])) < set(json.loads(parents[1])) < set(json.loads(parents[2]))
    assert all(isinstance(p, list) and p for p in span_parents)  # the chat spans' parents: whole lists too
    assert set(span_parents[0]) < set(span_parents[1]) < set(span_parents[2])
    assert sum(_copies(FIXTURE / "home").values()) > 0  # (it does hold the secret: there is something to forget)


@pytest.mark.skipif(os.environ.get("UNSEE_TEST_STORE") == "postgres",
                    reason="the old home's records are its SQLite files (the second pass keeps new stores on "
                           "PostgreSQL)")
def test_old_home_opens_audits_and_forgets(old_home):
    fired: list = []  # the refund's real firings in this process (the recording fired it once)
    u, agent, close = open_home(old_home, fired=fired)
    closed = False
    try:
        # opens and lists what the earlier version recorded
        sessions = u.sessions()
        assert [s.session_id for s in sessions] == [THREAD]
        info = sessions[0]
        assert info.turns == len(TURNS) and not info.incomplete and not info.run_died and info.failures == 0
        recorded = live(agent)
        assert SECRET in json.dumps(recorded)
        assert [c for kind, c, _ in recorded if kind == "HumanMessage"][-3:] == TURNS[-3:]
        hit = u.graph(THREAD).locate(SECRET)
        assert hit.artifact_type == ArtifactType.TOOL_RETURN
        before = u.audit(THREAD, SECRET, agent=agent)
        assert before.complete and before.copies > 0 and not before.clean

        # forgets with the agent rebuilt on the copied checkpoint file
        report = u.forget(THREAD, RevocationEvent(target=SECRET), agent=agent)
        assert report.committed and not report.errors, (report.errors, report.notes)
        assert report.erased_clean is True, report.notes
        assert fired == []  # the refund did not fire again
        assert not report.deferred_side_effects and not report.orphaned_side_effects

        # the live state is B5, computed independently
        reference, ref_fired = _reference()
        assert ref_fired == [("5521", "broken blender")]  # (the counterfactual makes the same refund)
        now = live(agent)
        assert now == reference
        assert SECRET not in json.dumps(now)
        assert any("ticket T1: card  on file" in c for _, c, _ in now)  # the lookup's result, without the secret
        assert any(k == "HumanMessage" and c.startswith("Here is a summary") for k, c, _ in now)  # compacted

        # the records no longer hold it; the audit finds nothing
        with pytest.raises(TargetNotFound):
            u.graph(THREAD).locate(SECRET)
        after = u.audit(THREAD, SECRET, agent=agent)
        assert after.complete and after.copies == 0 and after.clean, after
        assert _copies(old_home) == {}  # (every file, -wal files included, while the home is still open)

        # the session goes on, from the counterfactual, as the reference does
        agent.invoke({"messages": [HumanMessage(FOLLOW_UP)]}, {"configurable": {"thread_id": THREAD}})
        continued = _reference([*TURNS, FOLLOW_UP])[0]
        assert live(agent) == continued
        assert fired == []
        close()
        closed = True
    finally:
        if not closed:
            close()

    # no file of the home holds a byte of it (the checkpoint file included)
    assert (old_home / CHECKPOINTS).exists()
    assert _copies(old_home) == {}

    # the home, old records and the forget's new ones together, opens again (a fresh Unsee on it)
    u2, agent2, close2 = open_home(old_home)
    try:
        assert [s.session_id for s in u2.sessions()] == [THREAD]
        assert live(agent2) == continued
        assert u2.audit(THREAD, SECRET, agent=agent2).clean
        with pytest.raises(TargetNotFound):
            u2.graph(THREAD).locate(SECRET)
    finally:
        close2()
    assert _copies(old_home) == {}
