"""``make_plan`` and ``describe`` on small hand-built provenance graphs (pure: no store, no agent)."""

from __future__ import annotations

import json

import pytest

from unsee.middleware.graph import ProvenanceGraph
from unsee.middleware.records import Artifact, ArtifactType, Checkpoint, CheckpointKind
from unsee.plugins.forget.errors import UnknownStrategy
from unsee.plugins.forget.plan import describe, make_plan
from unsee.plugins.forget.strategy import STRATEGIES, Strategy

T = ArtifactType
K = CheckpointKind
SID = "s"
SECRET = "4417-2231"


def art(aid, type_, seq, *, turn, step, parents=(), sources=(), **attrs) -> Artifact:
    return Artifact(id=aid, session_id=SID, type=type_, seq=seq, turn=turn, step=step, parents=tuple(parents),
                    source_ids=tuple(sources), attrs=attrs)


def ckpt(cid, kind, *, seq, step, turn, offset) -> Checkpoint:
    return Checkpoint(id=cid, session_id=SID, kind=kind, seq=seq, step=step, turn=turn, token_offset=offset)


def session() -> ProvenanceGraph:
    """Three turns; the secret enters through a read-only tool's return in turn 2.

    turn 1: in1 -> mt1 -> r1                                   (clean prefix)
    turn 2: in2 -> mt2 -> call2 (lookup) -> tr2 (secret) -> mt3 -> r3, call3 (refund, fired)
    turn 3: in3 -> mt4 -> r4                                   (independent of the secret)
    Checkpoints: session start, turn 2 (before in2), a tool call (before tr2), turn 3.
    """
    arts = [
        art("in1", T.USER_INPUT, 10, turn=1, step=1, sources=("user",), message_id="m-in1"),
        art("mt1", T.MODEL_TURN, 11, turn=1, step=1, parents=("in1",), message_id="m-mt1"),
        art("r1", T.REPLY, 12, turn=1, step=1, parents=("mt1",)),
        art("in2", T.USER_INPUT, 20, turn=2, step=2, sources=("user",), message_id="m-in2"),
        art("mt2", T.MODEL_TURN, 21, turn=2, step=2, parents=("in1", "mt1", "in2")),
        art("call2", T.TOOL_CALL, 22, turn=2, step=2, parents=("mt2",), call_id="c2", effect="read"),
        art("tr2", T.TOOL_RETURN, 24, turn=2, step=3, parents=("call2",), sources=("tool:lookup",),
            status="success"),
        art("mt3", T.MODEL_TURN, 25, turn=2, step=3, parents=("in2", "mt2", "tr2")),
        art("r3", T.REPLY, 26, turn=2, step=3, parents=("mt3",)),
        art("call3", T.TOOL_CALL, 27, turn=2, step=3, parents=("mt3",), call_id="c3", effect="external"),
        art("tr3", T.TOOL_RETURN, 28, turn=2, step=4, parents=("call3",), sources=("tool:refund",)),
        art("in3", T.USER_INPUT, 30, turn=3, step=5, sources=("user",)),
        art("mt4", T.MODEL_TURN, 31, turn=3, step=5, parents=("in3",)),
        art("r4", T.REPLY, 32, turn=3, step=5, parents=("mt4",)),
    ]
    contents = {
        "in1": "hello", "r1": "hi", "in2": "look at T1",
        "call2": json.dumps({"name": "lookup", "args": {"ticket": "T1"}}),
        "tr2": f"ticket T1: card {SECRET}", "r3": f"Result: card {SECRET}",
        "call3": json.dumps({"name": "refund", "args": {"order": "A7", "reason": SECRET}}),
        "tr3": "refund issued", "in3": "bye", "r4": "bye!",
    }
    cps = [
        ckpt("cp-start", K.SESSION_START, seq=1, step=1, turn=1, offset=0),
        ckpt("cp-turn2", K.TURN, seq=19, step=2, turn=2, offset=40),
        ckpt("cp-tool", K.TOOL_CALL, seq=23, step=3, turn=2, offset=70),
        ckpt("cp-turn3", K.TURN, seq=29, step=5, turn=3, offset=120),
    ]
    return ProvenanceGraph(arts, cps, content_of=contents.get, hash_of=lambda s: "h:" + s[:2], session_id=SID)


@pytest.fixture
def g():
    return session()


def plan_for(g, strategy):
    hit = g.locate(SECRET)
    return make_plan(g, hit, g.taint(hit), strategy)


def test_the_fork_checkpoint_is_the_latest_turn_boundary_at_or_before_tau(g):
    hit = g.locate(SECRET)
    assert (hit.artifact_id, hit.step) == ("tr2", 3)
    assert g.checkpoint_before(hit.step).id == "cp-tool"  # any kind: the tool-call checkpoint
    assert g.fork_checkpoint(hit.step).id == "cp-turn2"  # the operator's: a turn boundary
    assert g.fork_checkpoint(1).id == "cp-start" and g.fork_checkpoint(0) is None
    assert plan_for(g, "B7").checkpoint.id == "cp-turn2"


def test_b7_plan(g):
    p = plan_for(g, "B7")
    assert p.strategy == "B7" and p.session_id == SID and p.entry.id == "tr2"
    assert p.closure == {"tr2", "mt3", "r3", "call3", "tr3"}
    assert (p.fork_seq, p.turns) == (19, (2, 3))
    assert {t: [i.artifact_id for i in v] for t, v in p.inputs.items()} == {2: ["in2"], 3: ["in3"]}
    assert p.inputs[2][0].text == "look at T1" and p.inputs[2][0].message_id == "m-in2"
    assert [t.artifact_id for t in p.model_turns] == ["mt2", "mt3", "mt4"]  # mt1 is before the fork
    assert [t.in_closure for t in p.model_turns] == [False, True, False]
    assert p.rematerialise
    assert p.transitions == 4  # in2, tr2, tr3, in3: the suffix, not the whole session (5)
    mt2, mt3, _ = p.model_turns
    (lookup,) = mt2.calls
    assert (lookup.name, lookup.args, lookup.effect, lookup.return_id) == ("lookup", {"ticket": "T1"}, "read", "tr2")
    assert lookup.reusable and mt3.text == f"Result: card {SECRET}"
    assert [c.name for c in p.fired_external()] == ["refund"]
    assert set(p.calls_by_id) == {"c2", "c3"}


def test_b5_starts_from_an_empty_state(g):
    p = plan_for(g, "B5")
    assert p.checkpoint is None and p.fork_seq == 0
    assert p.turns == (1, 2, 3) and [i.artifact_id for i in p.inputs[1]] == ["in1"]
    assert [t.artifact_id for t in p.model_turns] == ["mt1", "mt2", "mt3", "mt4"]
    assert not p.rematerialise
    assert p.transitions == 5  # every observation
    d = describe(p)
    assert d.checkpoint_id is None and d.checkpoint_turn == 0 and d.model_turns_to_rematerialise == []


@pytest.mark.parametrize("strategy, remat", [("B7", True), ("B9", True), ("B5'", False), ("B5", False),
                                             ("B0", False), ("B1", False), ("B3", False), ("B8", False)])
def test_rematerialise_flag_per_strategy(g, strategy, remat):
    p = plan_for(g, strategy)
    assert p.rematerialise is remat and p.strategy == strategy
    d = describe(p)
    assert d.strategy == strategy
    if remat:
        assert (d.model_turns_to_decode, d.model_turns_to_rematerialise) == (["mt3"], ["mt2", "mt4"])
    else:
        assert d.model_turns_to_rematerialise == [] and "mt3" in d.model_turns_to_decode


@pytest.mark.parametrize("strategy", [s for s in STRATEGIES if s != "B5"])
def test_every_other_strategy_plans_from_the_turn_checkpoint(g, strategy):
    p = plan_for(g, strategy)
    assert p.checkpoint.id == "cp-turn2" and p.transitions == 4 and p.turns == (2, 3)


def test_b5_prime_forks_like_b7_but_decodes_everything(g):
    p7, p5p = plan_for(g, Strategy.B7), plan_for(g, Strategy.B5P)
    assert p5p.strategy == "B5'" and p5p.checkpoint == p7.checkpoint and p5p.transitions == p7.transitions
    assert describe(p5p).model_turns_to_decode == ["mt2", "mt3", "mt4"]


def test_describe_names_the_side_effects_at_risk(g):
    d = describe(plan_for(g, "B7"))
    assert [(s.tool, s.call_artifact_id, s.status) for s in d.side_effects_at_risk] == [("refund", "call3", "orphaned")]
    assert d.tau == 3 and d.entry_type == "tool_return" and d.entry_sources == ["tool:lookup"]
    assert (d.checkpoint_id, d.checkpoint_kind, d.checkpoint_turn) == ("cp-turn2", "turn", 2)
    assert d.transitions_to_replay == 4 and d.turns_to_replay == [2, 3]
    assert json.loads(d.model_dump_json())["strategy"] == "B7"


def test_unknown_strategy_is_refused(g):
    with pytest.raises(UnknownStrategy):
        plan_for(g, "B42")
