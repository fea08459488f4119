"""Replay planning (pure): from a graph, a hit and a strategy to a ``ReplayPlan``.

The plan says where to fork (the graph's ``fork_checkpoint``: the latest
turn-boundary checkpoint at or before tau; nothing for a strategy that starts
from an empty state, B5), which turns to
re-run with which recorded user inputs, and holds the recorded transcript of
the suffix — model turns with their tool calls and returns — that the replay
interceptor walks in order. Nothing here executes anything.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from unsee.middleware.graph import TURN_BOUNDARY, ProvenanceGraph
from unsee.middleware.records import Artifact, ArtifactType, Checkpoint, Hit
from unsee.middleware.run_inputs import is_ref

from .report import ForgetPlan, SideEffect
from .strategy import Strategy


@dataclass(frozen=True)
class RecordedCall:
    artifact_id: str
    call_id: str
    name: str
    args: dict
    effect: str | None
    return_id: str | None
    return_content: str | None
    return_status: str | None
    #: False when the tool never ran (blocked by a policy, deferred by replay), or unsee never saw
    #: it run (the answer appeared in the state without a tool call through the middleware: a
    #: structured-output call, a call a limit middleware blocked, an invalid call)
    executed: bool = True
    #: the tool returned a LangGraph ``Command`` (a state effect: a replay runs it again)
    command: bool = False
    #: its return was observed before the target's entry (the clean prefix): the counterfactual
    #: made this very call and saw this very return
    prefix: bool = False
    #: the tool says calling it again changes nothing more (MCP ``idempotentHint``)
    idempotent: bool = False
    #: an agent ran nested in the call (a subagent the tool invoked on the same thread): a replay
    #: runs the tool again, and the nested run's own calls are matched to their records
    hosts_run: bool = False

    @property
    def fired(self) -> bool:
        """The tool ran and returned: its effect happened (de-duplicate it; report it if orphaned)."""
        return self.return_id is not None and self.executed

    @property
    def reusable(self) -> bool:
        """Its recorded return may answer the same call again (it ran and did not fail)."""
        return self.fired and self.return_status != "error"


@dataclass(frozen=True)
class RecordedTurn:
    artifact_id: str
    message_id: str | None
    text: str
    calls: tuple[RecordedCall, ...]
    in_closure: bool
    turn: int
    seq: int
    #: (artifact id, content hash) of each recorded parent, in order: the prompt as the recorder
    #: saw it, prompt blocks included (None when a parent is not in the graph, and for a turn in
    #: I(z), which is never answered from the record: its prompt, the whole history before it,
    #: is not built)
    prompt: tuple[tuple[str, str], ...] | None = None


@dataclass(frozen=True)
class RecordedInput:
    artifact_id: str
    message_id: str | None
    text: str
    turn: int


@dataclass(frozen=True)
class RecordedRun:
    """What one graph run of the suffix was given, as LangGraph got it (a ``run_input`` artifact:
    ``unsee.middleware.run_inputs.payload_of`` is its body)."""

    artifact_id: str
    turn: int
    seq: int
    payload: dict

    @property
    def resumes(self) -> bool:
        """A ``Command`` with a resume value: a human's decision at an interrupt."""
        return "resume" in self.payload

    def message_refs(self) -> list[str]:
        """The recorded user inputs its messages refer to, in order."""
        out: list[str] = []
        _refs(self.payload, out)
        return out


def _refs(value, out: list[str]) -> None:
    if isinstance(value, dict):
        if is_ref(value):
            out.append(str(value["$artifact"]))
            return
        for v in value.values():
            _refs(v, out)
    elif isinstance(value, list):
        for v in value:
            _refs(v, out)


@dataclass(frozen=True)
class ReplayPlan:
    session_id: str
    #: the strategy's code ("B7")
    strategy: str
    hit: Hit
    entry: Artifact
    closure: frozenset[str]
    checkpoint: Checkpoint | None
    turns: tuple[int, ...]
    inputs: dict[int, tuple[RecordedInput, ...]]
    model_turns: tuple[RecordedTurn, ...]
    rematerialise: bool
    transitions: int
    fork_seq: int
    calls_by_id: dict[str, RecordedCall] = field(default_factory=dict)
    #: every observation the counterfactual removes the target from: the entry and each later
    #: observation that holds it again (a second read of the same record, the user repeating
    #: it); empty means the entry alone
    entries: frozenset[str] = frozenset()
    #: the recorded run inputs of the suffix, in order (empty for a session recorded before
    #: runs' inputs were: its turns are given their user inputs as ``{"messages": [...]}``)
    runs: tuple[RecordedRun, ...] = ()
    #: the session's tool messages as its live state holds them, by tool call id (read once, at
    #: the check before a replay: :func:`with_originals`): a call the replay answers from the
    #: record gets the original message's content blocks, artifact and status, not only its text
    originals: Mapping[str, Any] = field(default_factory=dict)

    @property
    def run_hosts(self) -> frozenset[str]:
        """The tools agents ran nested in (a subagent a tool invokes on the same thread), as the
        suffix's record shows: a replay runs them again, new arguments included."""
        return frozenset(c.name for t in self.model_turns for c in t.calls if c.hosts_run)

    def sanitizes(self, artifact_id: str | None) -> bool:
        """Whether the replay gives this recorded observation without the target."""
        return artifact_id is not None and (artifact_id == self.entry.id or artifact_id in self.entries)

    def fired_external(self) -> list[RecordedCall]:
        """The recorded calls whose side effect reached outside (external or undeclared, not a
        state update) and happened: what a replay must never fire again."""
        return [c for t in self.model_turns for c in t.calls if is_external(c) and c.fired]


def is_external(c: RecordedCall) -> bool:
    """External or undeclared, and not a state effect (``state``, or a ``Command`` returned) nor a
    call that ran an agent nested in it (its effects are the nested run's own calls, each judged
    by itself; a replay runs such a call again)."""
    return c.effect not in ("read", "write", "state") and not c.command and not c.hosts_run


def with_originals(plan: ReplayPlan, messages: Iterable[Any]) -> ReplayPlan:
    """``plan`` with the live state's tool messages (``ReplayPlan.originals``)."""
    originals = {m.tool_call_id: m for m in messages
                 if getattr(m, "type", None) == "tool" and getattr(m, "tool_call_id", None)}
    return replace(plan, originals=originals)


def recorded_turn(g: ProvenanceGraph, mt: Artifact, closure: frozenset[str], entry_seq: int | None = None
                  ) -> RecordedTurn:
    """The recorded model turn ``mt`` with its calls and their returns; ``entry_seq``: the seq of
    the target's entry (a return recorded before it is in the clean prefix)."""
    text = ""
    calls = []
    for cid in g.children(mt.id):
        child = g.get(cid)
        if child.type in (ArtifactType.REPLY, ArtifactType.PLAN):
            text = g.content(cid) or ""
        elif child.type is ArtifactType.TOOL_CALL:
            body = json.loads(g.content(cid) or "{}")
            kids = [g.get(x) for x in g.children(cid)]
            ret = next((k for k in kids if k.type is ArtifactType.TOOL_RETURN), None)
            calls.append((child.seq, RecordedCall(
                artifact_id=cid, call_id=str(child.attrs.get("call_id") or ""), name=body.get("name", ""),
                args=body.get("args", {}), effect=child.attrs.get("effect"),
                return_id=ret.id if ret else None, return_content=g.content(ret.id) if ret else None,
                return_status=ret.attrs.get("status") if ret else None,
                executed=bool(ret.attrs.get("executed", True)) and not ret.attrs.get("unobserved") if ret else True,
                command=bool(ret.attrs.get("command")) if ret else False,
                prefix=ret is not None and entry_seq is not None and ret.seq < entry_seq,
                idempotent=bool(ret.attrs.get("idempotent")) if ret else False,
                hosts_run=any(k.type is ArtifactType.NESTED_INPUT for k in kids),
            )))
    calls.sort(key=lambda x: x[0])
    prompt = None
    if mt.id not in closure:  # (a turn in I(z) is never answered from the record: no prompt to compare)
        parents = [g.get(p) if p in g else None for p in g.manifest(mt.id)]
        prompt = None if None in parents else tuple((a.id, a.content_hash) for a in parents)
    return RecordedTurn(mt.id, mt.attrs.get("message_id"), text, tuple(c for _, c in calls),
                        mt.id in closure, mt.turn, mt.seq, prompt)


def fork_point(g: ProvenanceGraph, tau: int, available: Callable[[Checkpoint], bool] | None = None) -> Checkpoint | None:
    """The latest turn-boundary checkpoint at or before ``tau`` that ``available`` says can still be
    forked from (a retention policy may have pruned its LangGraph checkpoint: docs/retention.md);
    None when none is left: the replay then starts from the empty state, which re-runs the whole
    session like B5 (B7's re-materialisation still applies) and reaches the same counterfactual."""
    cands = [c for c in g.checkpoints if c.step <= tau and c.kind in TURN_BOUNDARY]
    for c in reversed(cands):
        if available is None or not c.langgraph_checkpoint_id or available(c):
            # (its manifest whole: what the fork keeps; a stored delta is rebuilt once, here)
            return c if c.context is None else c.model_copy(
                update={"prompt_manifest": g.checkpoint_manifest(c), "context": None})
    return None


def observed_entries(g: ProvenanceGraph, target: str, hit: Hit, source: str | None = None) -> frozenset[str]:
    """The observations (user inputs, tool returns, memory reads) holding ``target`` at or after
    its entry, the entry included, whatever their source; and the state writes that brought it
    in themselves (``ProvenanceGraph.brings_in``: a tool put it into state, the model never
    gave it), which the replay's tool gives again without it.

    The counterfactual is the session where the target was never seen: it is removed from the
    observation it entered through and from every later one that holds it again (the same
    record read twice, the user repeating it), and I(z) is what any of them reached. An earlier
    observation (before the entry a ``source=`` named) stays in the clean prefix: the
    commit's target check then refuses, naming it. ``source``: the one ``hit`` was located with
    (its occurrences are that source's only; None: they are every occurrence already)."""
    entry = g.get(hit.artifact_id)
    found = (g.get(a) for a in hit.occurrences) if source is None else iter(g.occurrences(target))
    return frozenset([entry.id, *(a.id for a in found if a.seq >= entry.seq and g.brings_in(a, target))])


def make_plan(g: ProvenanceGraph, hit: Hit, closure: frozenset[str], strategy: Strategy | str, *,
              fork_available: Callable[[Checkpoint], bool] | None = None,
              entries: frozenset[str] = frozenset()) -> ReplayPlan:
    """``fork_available``: whether a checkpoint's LangGraph checkpoint is still in the saver (None:
    assume every one is). ``entries``: the observations the replay removes the target from
    (:func:`observed_entries`; empty: the entry alone); ``closure`` must hold what they reach."""
    spec = Strategy.parse(strategy).spec  # UnknownStrategy
    entry = g.get(hit.artifact_id)
    cp = fork_point(g, hit.step, fork_available) if spec.forks_at_checkpoint else None
    first_turn = cp.turn if cp is not None else 1
    fork_seq = cp.seq if cp is not None else 0
    last_turn = max((a.turn for a in g), default=first_turn)
    turns = tuple(range(first_turn, last_turn + 1))
    inputs: dict[int, list[RecordedInput]] = {t: [] for t in turns}
    model_turns = []
    runs = []
    transitions = 0
    for a in g.since_seq(fork_seq):  # (the suffix only: a binary search, not a walk of the session)
        if a.is_observation:
            transitions += 1
        if a.type is ArtifactType.USER_INPUT and a.turn in inputs:
            inputs[a.turn].append(RecordedInput(a.id, a.attrs.get("message_id"), g.content(a.id) or "", a.turn))
        elif a.type is ArtifactType.MODEL_TURN and not a.attrs.get("unobserved"):
            model_turns.append(recorded_turn(g, a, closure, entry.seq))
        elif a.type is ArtifactType.RUN_INPUT and a.turn in inputs and not a.attrs.get("graph_ns"):
            runs.append(RecordedRun(a.id, a.turn, a.seq, json.loads(g.content(a.id) or "{}")))
    calls = {c.call_id: c for t in model_turns for c in t.calls}
    return ReplayPlan(
        session_id=g.session_id or entry.session_id,
        strategy=spec.code,
        hit=hit,
        entry=entry,
        closure=closure,
        checkpoint=cp,
        turns=turns,
        inputs={t: tuple(v) for t, v in inputs.items()},
        model_turns=tuple(model_turns),
        rematerialise=spec.rematerialises,
        transitions=transitions,
        fork_seq=fork_seq,
        calls_by_id=calls,
        entries=entries,
        runs=tuple(runs),
    )


def describe(plan: ReplayPlan) -> ForgetPlan:
    """The human/JSON view of a plan (what ``--dry-run`` prints)."""
    decode = [t.artifact_id for t in plan.model_turns if not plan.rematerialise or t.in_closure]
    remat = [t.artifact_id for t in plan.model_turns if plan.rematerialise and not t.in_closure]
    at_risk = [
        SideEffect(tool=c.name, args=c.args, effect=c.effect, call_artifact_id=c.artifact_id,
                   result=None, status="orphaned")
        for t in plan.model_turns if t.in_closure for c in t.calls
        if is_external(c) and c.fired
    ]
    cp = plan.checkpoint
    return ForgetPlan(
        session_id=plan.session_id, strategy=plan.strategy, target_hash=plan.hit.target_hash,
        tau=plan.hit.step, entry_artifact=plan.entry.id, entry_type=plan.entry.type.value,
        entry_sources=list(plan.entry.source_ids), closure=sorted(plan.closure),
        checkpoint_id=cp.id if cp else None, checkpoint_kind=cp.kind.value if cp else None,
        checkpoint_turn=cp.turn if cp else 0, turns_to_replay=list(plan.turns),
        transitions_to_replay=plan.transitions, model_turns_to_decode=decode,
        model_turns_to_rematerialise=remat, side_effects_at_risk=at_risk,
        assumed_external=sorted({c.name for t in plan.model_turns for c in t.calls
                                 if c.effect is None and not c.command and c.fired and c.name}),
    )
