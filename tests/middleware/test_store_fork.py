"""Copy-on-write forks of a session and the suffix-only replacement a forget commits.

A replay's scratch session is a fork: it reads its source's records below the
fork seq as its own and writes only its suffix; committing it replaces the
session's records from the fork seq on, and only those. A crash between the
vault and the provenance file is finished by calling the replacement again.
"""

from __future__ import annotations

import pytest

from unsee.middleware.records import Artifact, ArtifactType, Checkpoint, CheckpointKind
from unsee.middleware.store import ProvenanceStore
from unsee.middleware.store_writer import Batch


def _art(session: str, aid: str, seq: int) -> Artifact:
    return Artifact(id=aid, session_id=session, type=ArtifactType.USER_INPUT, seq=seq, step=seq,
                    content_hash=f"h-{aid}")


def _record(store: ProvenanceStore, session: str, rows: list[tuple[str, int, str]],
            checkpoints: list[int] = ()) -> None:
    store.submit(Batch(session_id=session, artifacts=[_art(session, a, s) for a, s, _ in rows],
                       checkpoints=[Checkpoint(id=f"cp{s}", session_id=session, seq=s, kind=CheckpointKind.TURN, turn=s, token_offset=0,
                                               step=s) for s in checkpoints],
                       content={a: text for a, _, text in rows}))
    store.flush()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request, tmp_path):
    url = request.getfixturevalue("pg_url") if request.param == "postgres" else None
    s = ProvenanceStore(tmp_path / "home", url=url)
    # the session: a clean prefix (seq 1-3) and a suffix holding the target (seq 4-5)
    _record(s, "s", [("a1", 1, "hello"), ("a2", 2, "look up T-1"), ("a3", 3, "T-1 ok"),
                     ("a4", 4, "my card is 4417"), ("a5", 5, "noted 4417")], checkpoints=[3, 5])
    yield s
    s.close()


def _ids(store, session):
    return [a.id for a in store.artifacts(session)]


def test_a_fork_reads_its_source_prefix_and_copies_nothing(store):
    store.rewrites.clone_prefix("s", "s~f", 4)
    assert store.rewrites.fork_of("s~f") == ("s", 4)
    assert store.rewrites.fork_of("s") is None
    assert _ids(store, "s~f") == ["a1", "a2", "a3"]
    assert all(a.session_id == "s~f" for a in store.artifacts("s~f"))
    assert [c.seq for c in store.checkpoints("s~f")] == [3]
    assert store.contents("s~f") == {"a1": "hello", "a2": "look up T-1", "a3": "T-1 ok"}
    assert store.content("s~f", "a2") == "look up T-1"
    assert store.content("s~f", "a4") is None  # above the fork: not the fork's
    own = store._db.execute("SELECT COUNT(*) FROM artifacts WHERE session_id='s~f'").fetchone()[0]
    assert own == 0  # copy-on-write
    _record(store, "s~f", [("a4b", 6, "my card is [gone]"), ("a5b", 7, "noted")], checkpoints=[7])
    assert _ids(store, "s~f") == ["a1", "a2", "a3", "a4b", "a5b"]
    assert store.content("s~f", "a4b") == "my card is [gone]"
    assert _ids(store, "s") == ["a1", "a2", "a3", "a4", "a5"]  # the source is untouched


def _commit(store, event="e1"):
    store.commits.begin(event, "s", "s~f", 0)
    store.rewrites.replace_session("s", "s~f", event, 0)


def test_replacing_keeps_the_prefix_and_swaps_the_suffix(store):
    store.rewrites.clone_prefix("s", "s~f", 4)
    # the replay re-materialises a5 (same id, new text) and records a new a6
    _record(store, "s~f", [("a4b", 6, "my card is [gone]"), ("a5", 7, "noted [gone]"), ("a6", 8, "done")],
            checkpoints=[8])
    _commit(store)
    assert _ids(store, "s") == ["a1", "a2", "a3", "a4b", "a5", "a6"]
    assert [c.seq for c in store.checkpoints("s")] == [3, 8]
    texts = store.contents("s")
    assert texts == {"a1": "hello", "a2": "look up T-1", "a3": "T-1 ok", "a4b": "my card is [gone]",
                     "a5": "noted [gone]", "a6": "done"}
    assert not store.has_session("s~f")
    assert store.commits.state("e1") == "done"
    assert not any("4417" in t for t in texts.values())


def test_a_crash_between_the_files_is_finished_by_a_retry(store, monkeypatch):
    store.rewrites.clone_prefix("s", "s~f", 4)
    _record(store, "s~f", [("a5", 6, "noted [gone]"), ("a6", 7, "done")])
    db = store._db
    real = db.transaction

    def broken():
        raise RuntimeError("power cut")

    monkeypatch.setattr(db, "transaction", broken)  # the vault step commits, the provenance step dies
    with pytest.raises(RuntimeError):
        _commit(store)
    monkeypatch.setattr(db, "transaction", real)
    assert store.commits.state("e1") == "started"
    store.rewrites.replace_session("s", "s~f", "e1", 0)  # the roll-forward
    store.rewrites.replace_session("s", "s~f", "e1", 0)  # and again: idempotent
    assert _ids(store, "s") == ["a1", "a2", "a3", "a5", "a6"]
    assert store.contents("s") == {"a1": "hello", "a2": "look up T-1", "a3": "T-1 ok", "a5": "noted [gone]",
                                   "a6": "done"}
    assert store.commits.state("e1") == "done"


def test_dropping_a_fork_leaves_its_source_whole(store):
    store.rewrites.clone_prefix("s", "s~f", 4)
    _record(store, "s~f", [("a4b", 6, "x")])
    store.rewrites.drop_session("s~f")
    assert not store.has_session("s~f")
    assert _ids(store, "s") == ["a1", "a2", "a3", "a4", "a5"]
    assert len(store.contents("s")) == 5


def test_counting_artifacts_by_type_counts_a_forks_prefix(store):
    store.rewrites.clone_prefix("s", "s~f", 4)
    _record(store, "s~f", [("a4b", 6, "my card is [gone]")])
    for session in ("s", "s~f", "no-such-session"):
        by_type = sum(1 for a in store.artifacts(session) if a.type.value == "user_input") \
            if session != "no-such-session" else 0
        assert store.count_artifacts(session, ["user_input", "memory_read"]) == by_type
        assert store.count_artifacts(session, ["memory_write"]) == 0
    assert store.count_artifacts("s~f", ["user_input"]) == 4  # a1-a3 read from the source, a4b its own
    assert store.count_artifacts("s", []) == 0
