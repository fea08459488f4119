"""A forget's record stores a model turn's parents as what they add to an earlier turn's (issue 32:
its size, and the time to write it, follow the session, not the session squared); reading it back
gives the full lists, and records written before keep loading."""

import json

from unsee.middleware.records import Artifact, ArtifactType
from unsee.plugins.view import forget_record, load_forget_record, save_forget_record
from unsee.plugins.view.records import _sketches, expand_sketches


class _Graph(list):
    checkpoints = ()


def _session(turns: int) -> _Graph:
    arts, manifest, seq = [], ["sys"], 0
    arts.append(Artifact(id="sys", session_id="s", type=ArtifactType.PROMPT_BLOCK, seq=0))
    for t in range(turns):
        seq += 1
        u = Artifact(id=f"u{t}", session_id="s", type=ArtifactType.USER_INPUT, seq=seq, turn=t)
        manifest.append(u.id)
        seq += 1
        m = Artifact(id=f"m{t}", session_id="s", type=ArtifactType.MODEL_TURN, parents=tuple(manifest), seq=seq,
                     turn=t)
        seq += 1
        c = Artifact(id=f"c{t}", session_id="s", type=ArtifactType.TOOL_CALL, parents=(m.id,), seq=seq, turn=t)
        manifest.append(m.id)
        arts += [u, m, c]
    # a summary whose parents are not a prefix of anything, then a turn after it
    seq += 1
    arts.append(Artifact(id="sum", session_id="s", type=ArtifactType.SUMMARY, parents=("u0", "m0"), seq=seq))
    seq += 1
    arts.append(Artifact(id="mlast", session_id="s", type=ArtifactType.MODEL_TURN, parents=("sys", "sum", "u9"),
                         seq=seq))
    return _Graph(arts)


class _Report:
    event_id, session_id, strategy, committed, erased_clean, receipt, tau = "ev1", "s", "B7", True, True, None, 3
    checkpoint_id = checkpoint_kind = outcome = None
    deferred_side_effects = orphaned_side_effects = ()

    def __getattr__(self, name):
        return 0


def test_sketches_round_trip_to_the_full_parent_lists():
    g = _session(50)
    compact = _sketches(g)
    full = [{"id": a.id, "parents": list(a.parents)} for a in g]
    assert [{"id": d["id"], "parents": d["parents"]} for d in expand_sketches(compact)] == full
    assert sum(len(d["parents"]) for d in compact) < 4 * len(g)  # O(turns), not O(turns²)
    assert sum(len(d["parents"]) for d in full) > 50 * 50
    assert expand_sketches(full) == full or expand_sketches(full) is full  # older records: unchanged


def test_a_saved_record_is_small_and_loads_with_full_parents(tmp_path):
    g = _session(200)
    path = save_forget_record(tmp_path, forget_record(_Report(), g))
    stored = json.loads(path.read_text())
    assert stored["version"] == 3 and any("parents_base" in d for d in stored["before_artifacts"])
    assert path.stat().st_size < 200_000
    rec = load_forget_record(tmp_path, "ev1")
    assert {d["id"]: d["parents"] for d in rec.before_artifacts} == {a.id: list(a.parents) for a in g}
    assert not any("parents_base" in d for d in rec.before_artifacts)
