"""Context manifests stored as deltas: the encoding round-trips, and the closure is exactly the
one whole manifests give, on generated long sessions (compactions, context trimmed by an
outer middleware, parallel tool calls, agents taking turns on one thread, a parent recorded
after its child, a base never recorded)."""

from __future__ import annotations

import random

import pytest

from tests.support.context_reference import whole_graph
from unsee.middleware import context_delta
from unsee.middleware.context_delta import Chains, diff, expand
from unsee.middleware.errors import UnknownArtifact
from unsee.middleware.graph import ProvenanceGraph
from unsee.middleware.records import Artifact, ArtifactType, Checkpoint, CheckpointKind
from unsee.middleware.store_schema import (artifact_from_row, artifact_row, checkpoint_from_row, checkpoint_row,
                                           manifest_of, manifest_text)
from unsee.middleware import semconv as sc


def test_diff_and_expand_are_inverse():
    rnd = random.Random(7)
    for _ in range(3000):
        base = [f"a{i}" for i in rnd.sample(range(60), rnd.randint(0, 30))]
        new = [x for x in base if rnd.random() < 0.8]
        for x in (f"b{i}" for i in range(rnd.randint(0, 6))):
            new.insert(rnd.randint(0, len(new)), x)
        if rnd.random() < 0.1:
            rnd.shuffle(new)
        d = diff(base, new)
        if d is None:  # (the kept ids changed order: stored whole)
            assert [x for x in new if x in base] != [x for x in base if x in new]
            continue
        assert expand(base, *d) == tuple(new)


def test_a_grown_manifest_is_its_new_ids_and_a_shrunk_one_says_what_it_dropped():
    assert diff(["s", "a", "b"], ["s", "a", "b", "c"]) == (("c",), (), ())
    # a compaction: the summary where the old messages were
    assert diff(["s", "a", "b", "c"], ["s", "sum", "c"]) == (("sum",), ("a", "b"), (1,))
    assert diff(["s", "a", "b"], ["s", "b", "a"]) is None


def test_chains_store_every_kth_whole_and_each_agent_against_its_own(monkeypatch):
    ch = Chains(full_every=4)
    stored = [ch.encode(f"m{i}", ["sys", *(f"x{j}" for j in range(i + 1))]) for i in range(9)]
    assert [ref is None for _, ref in stored] == [True, False, False, False, True, False, False, False, True]
    assert stored[1] == (("x1",), stored[1][1]) and stored[1][1].base == "m0"
    # two agents taking turns on one thread: each manifest is a delta of its own agent's last one
    ch = Chains()
    a1 = ch.encode("a1", ["sysA", "u1"])
    b1 = ch.encode("b1", ["sysB", "q1"])
    a2 = ch.encode("a2", ["sysA", "u1", "r1"])
    b2 = ch.encode("b2", ["sysB", "q1", "r2"])
    assert a1[1] is None and b1[1] is None
    assert a2 == (("r1",), a2[1]) and a2[1].base == "a1" and b2[1].base == "b1"


def test_rows_and_spans_carry_the_delta_and_old_records_read_as_whole():
    ref = Chains().encode("m0", ["s", "a"])  # whole
    assert manifest_of(manifest_text(*ref)) == ((("s", "a")), None)
    ch = Chains()
    kept = [f"k{i}" for i in range(10)]
    ch.encode("m0", ["s", "a", "b", *kept])
    added, r = ch.encode("m1", ["s", "sum", *kept, "c"])  # (a compaction: a summary where a and b were)
    assert r is not None and r.dropped == ("a", "b") and r.at == (1, 12)
    assert manifest_of(manifest_text(added, r)) == (added, r)
    a = Artifact(id="m1", session_id="x", type=ArtifactType.MODEL_TURN, parents=added, context=r, seq=3)
    assert artifact_from_row(artifact_row(a)) == a
    attrs = sc.artifact_attributes(a)
    assert attrs[sc.CONTEXT_BASE] == "m0" and "unsee.artifact.parents" not in attrs
    assert sc.artifact_from_attributes(attrs, "x", None, None) == a
    c = Checkpoint(id="c1", session_id="x", kind=CheckpointKind.TURN, step=1, turn=1, seq=4, token_offset=0,
                   prompt_manifest=added, context=r)
    assert checkpoint_from_row(checkpoint_row(c)) == c
    assert sc.checkpoint_from_attributes(sc.checkpoint_attributes(c), "x") == c
    # written before deltas: a JSON list, the parents attribute, the prompt_manifest attribute
    assert manifest_of('["s", "a"]') == (("s", "a"), None)
    old = {"unsee.artifact.id": "m", "unsee.artifact.type": "model_turn", "unsee.artifact.parents": ["s", "a"]}
    assert sc.artifact_from_attributes(old, "x", None, None).parents == ("s", "a")
    oldc = {"unsee.checkpoint.id": "c", "unsee.checkpoint.kind": "turn", "unsee.checkpoint.step": 1,
            "unsee.checkpoint.turn": 1, "unsee.checkpoint.seq": 1, "unsee.checkpoint.token_offset": 0,
            "unsee.checkpoint.prompt_manifest": ["s", "a"]}
    assert sc.checkpoint_from_attributes(oldc, "x").prompt_manifest == ("s", "a")


class _Session:
    """A generated session recorded the way the recorder records one: agents (each its own
    system prompt) take model turns whose context grows by replies and tool results, is
    compacted (a summary replaces the oldest messages), trimmed (an outer middleware shows
    the model part of it), and reordered now and then; tool calls run in parallel;
    checkpoints hold the live messages. Manifests go through ``Chains``, as recorded."""

    def __init__(self, seed: int, turns: int, full_every: int):
        self.rnd = random.Random(seed)
        self.arts: list[Artifact] = []
        self.cps: list[Checkpoint] = []
        self.whole: dict[str, tuple[str, ...]] = {}
        self.turn_chains, self.cp_chains = Chains(full_every), Chains(full_every)
        self.seq = 0
        self._run(turns)

    def _add(self, type_: ArtifactType, parents=(), context=None, aid: str | None = None) -> str:
        self.seq += 1
        aid = aid or f"{type_.value[:2]}{self.seq}"
        self.arts.append(Artifact(id=aid, session_id="g", type=type_, parents=tuple(parents), context=context,
                                  seq=self.seq, step=self.seq, turn=self.seq))
        return aid

    def _model_turn(self, manifest: list[str]) -> str:
        aid = f"mt{self.seq + 1}"
        ids = list(dict.fromkeys(manifest))
        added, ref = self.turn_chains.encode(aid, ids)
        self.whole[aid] = tuple(ids)
        return self._add(ArtifactType.MODEL_TURN, added, ref, aid)

    def _checkpoint(self, live: list[str]) -> None:
        self.seq += 1
        cid = f"cp{self.seq}"
        ids, ref = self.cp_chains.encode(cid, list(live))
        self.whole[cid] = tuple(live)
        self.cps.append(Checkpoint(id=cid, session_id="g", kind=CheckpointKind.TURN, step=self.seq, turn=self.seq,
                                   seq=self.seq, token_offset=0, prompt_manifest=ids, context=ref))

    def _run(self, turns: int) -> None:
        rnd = self.rnd
        agents = {name: [self._add(ArtifactType.PROMPT_BLOCK)] for name in ("a", "b", "c")[:rnd.randint(1, 3)]}
        live: list[str] = []
        for _ in range(turns):
            self._checkpoint(live)
            live.append(self._add(ArtifactType.USER_INPUT))
            if rnd.random() < 0.2 and len(live) > 6:  # a compaction: a summary of the oldest messages
                cut = rnd.randint(2, len(live) - 2)
                live = [self._add(ArtifactType.SUMMARY, live[:cut]), *live[cut:]]
            name = rnd.choice(list(agents))
            for _step in range(rnd.randint(1, 3)):
                shown = list(live)
                if rnd.random() < 0.15:  # an outer middleware trims the model's view
                    shown = [m for m in shown if rnd.random() < 0.7]
                if rnd.random() < 0.05 and len(shown) > 3:  # and, rarely, reorders it
                    i = rnd.randrange(len(shown) - 1)
                    shown[i], shown[i + 1] = shown[i + 1], shown[i]
                mt = self._model_turn([*agents[name], *shown])
                live.append(mt)
                calls = [self._add(ArtifactType.TOOL_CALL, (mt,)) for _ in range(rnd.choice((0, 1, 1, 2, 3)))]
                if not calls:
                    break
                for c in calls:  # parallel calls, their returns after all of them
                    live.append(self._add(ArtifactType.TOOL_RETURN, (c,)))
            if rnd.random() < 0.1:  # a parent recorded after its child (a late link)
                late = f"late{self.seq}"
                self._add(ArtifactType.STATE_WRITE, (late,))
                self._add(ArtifactType.TOOL_RETURN, (), aid=late)

    def graph(self) -> ProvenanceGraph:
        return ProvenanceGraph(self.arts, self.cps, session_id="g")


@pytest.mark.parametrize("seed", range(40))
def test_the_closure_from_deltas_is_the_closure_from_whole_manifests(seed):
    s = _Session(seed, turns=random.Random(seed).randint(5, 60), full_every=random.Random(seed).choice((2, 4, 32)))
    g = s.graph()
    assert g.lineage.deltas  # (the session does store deltas)
    for a in g.of_type(ArtifactType.MODEL_TURN):
        assert g.manifest(a.id) == s.whole[a.id]
    for c in g.checkpoints:
        assert g.checkpoint_manifest(c) == s.whole[c.id]
    ref = whole_graph(g)
    assert not ref.lineage.deltas
    rnd = random.Random(seed)
    obs = [a.id for a in g if a.type in (ArtifactType.USER_INPUT, ArtifactType.TOOL_RETURN, ArtifactType.SUMMARY)]
    for roots in [[x] for x in rnd.sample(obs, min(12, len(obs)))] + [rnd.sample(obs, min(3, len(obs)))]:
        assert g.taint(roots) == ref.taint(roots), roots
        # both ways of counting: in recording order, and over whole manifests
        starts = g._positions(roots)
        assert g._taint_reference(starts) == ref.taint(roots)


def test_a_graph_extended_turn_by_turn_taints_as_one_built_at_once():
    s = _Session(3, turns=40, full_every=8)
    arts = sorted(s.arts, key=lambda a: a.seq)
    g = ProvenanceGraph(arts[:10], session_id="g")
    for k in range(10, len(arts), 7):
        g = g.extended(arts[k:k + 7])
    whole = s.graph()
    for root in [a.id for a in arts if a.type is ArtifactType.USER_INPUT][::3]:
        assert g.taint([root]) == whole.taint([root]) == whole_graph(whole).taint([root])


def test_a_base_never_recorded_is_refused_by_manifest_and_taints_conservatively():
    ch = Chains()
    ch.encode("m-lost", ["s", "u1"])  # (its record failed: never written)
    added, ref = ch.encode("m2", ["s", "u1", "u2"])
    arts = [Artifact(id="s", session_id="g", type=ArtifactType.PROMPT_BLOCK, seq=1),
            Artifact(id="u1", session_id="g", type=ArtifactType.USER_INPUT, seq=2),
            Artifact(id="u2", session_id="g", type=ArtifactType.USER_INPUT, seq=3),
            Artifact(id="m2", session_id="g", type=ArtifactType.MODEL_TURN, parents=added, context=ref, seq=4)]
    g = ProvenanceGraph(arts, session_id="g")
    with pytest.raises(UnknownArtifact, match="m-lost"):
        g.manifest("m2")
    assert "m2" in g.taint(["u1"])  # (it may have read u1: replayed, never reused)


def test_full_every_bounds_the_records_a_reader_follows(monkeypatch):
    s = _Session(11, turns=50, full_every=5)
    g = s.graph()
    for a in g.of_type(ArtifactType.MODEL_TURN):
        hops, cur = 0, a
        while cur.context is not None:
            cur, hops = g.get(cur.context.base), hops + 1
        assert hops < 5
    assert context_delta.FULL_EVERY >= 2


def test_a_long_chain_stores_about_as_many_ids_whole_as_in_deltas():
    """The record grows with the session: whole manifests are stored once the deltas since the
    last hold as many ids (so they take about the deltas' room), and at least every
    ``FULL_EVERY`` records (what bounds a reader; past ``FULL_EVERY`` turns of a chain that is a
    (length)² / FULL_EVERY term, under the deltas' size up to about a thousand turns)."""
    def stored(turns: int) -> tuple[int, int]:
        ch, whole, delta = Chains(), 0, 0
        for t in range(turns):
            ids, ref = ch.encode(f"m{t}", ["sys", *(f"x{j}" for j in range(3 * t + 1))])
            if ref is None:
                whole += len(ids)
            else:
                delta += len(ids) + len(ref.dropped) + len(ref.at)
        return whole, delta
    small, large = stored(100), stored(1000)
    assert small[0] <= small[1] and large[0] <= 2 * large[1], (small, large)
