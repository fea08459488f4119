"""Derived-only commits: the state a replay left on its scratch thread, checked before the commit.

The commit writes one thing into the session's thread: the final state of the
replay's scratch thread. It may write it only if the replay derived it:

- the scratch thread exists in the agent's checkpointer and holds a state
  (a roll-forward through another graph reads an empty one);
- it is not empty where the session is not;
- its history grows from the seed the fork wrote, and the fork checkpoint's
  messages still in it are verbatim and in order (``Seed``: their ids and
  fingerprints, taken from the session's checkpoint when the fork was made; a
  compaction in the replay may have removed some);
- the replay recorded every user input and run input (a state update's keys, a human's
  decision: ``run_inputs``) the session recorded after the fork, up to where it stopped at a
  human's question the record does not answer;
- no message the replay recorded has an id the session's prefix already gives
  to another message (LangGraph merges messages by id: a model that returns a
  message id twice replaces an earlier message, and the records would clash);
- the target is nowhere in it: every state key (messages, files, todos,
  structured responses, any channel) and the memory items the commit would
  write, in every form an audit looks for (``remaining_places``).

Each check names what is wrong (``NotDerived``, ``TargetRemains``); nothing is
journaled or written before they pass. The journal then names the scratch
thread's head checkpoint: a roll-forward writes that state or nothing
(``check_journaled``).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from unsee.middleware.records import ArtifactType

from .errors import AgentCannotReplay, NotDerived, TargetRemains
from .plan import ReplayPlan
from .thread import parent_ids, thread_cfg


@dataclass(frozen=True)
class Seed:
    """What a scratch thread started from: the checkpoint ``fork_state`` wrote (None: an empty
    seed, the replay starts from nothing) and the fork checkpoint's messages it holds, each as
    (id, fingerprint) in order (``message_prints``)."""

    checkpoint_id: str | None
    messages: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class ScratchState:
    """The scratch thread's final state, as checked: what the commit writes."""

    head: str
    values: dict[str, Any]


def message_prints(messages: Sequence[Any]) -> tuple[tuple[str, int], ...]:
    """(id, fingerprint) of each message, in order: the fingerprint hashes its type, content and
    tool calls (a ``hash`` of text: compared within one process, never stored)."""
    return tuple((str(getattr(m, "id", None)), hash((type(m).__name__, repr(getattr(m, "content", None)),
                                                     repr(getattr(m, "tool_calls", None) or ())))) for m in messages)


def head_of(agent: Any, thread: str) -> tuple[str | None, dict[str, Any]]:
    """(the thread's latest checkpoint id, its values) through ``agent``; (None, {}) for no thread."""
    snap = agent.get_state(thread_cfg(thread))
    cid = ((getattr(snap, "config", None) or {}).get("configurable") or {}).get("checkpoint_id")
    return cid, dict(getattr(snap, "values", None) or {})


def _lineage(agent: Any, thread: str, head: str) -> list[str]:
    """Checkpoint ids from ``head`` back to the thread's first, through the checkpointer."""
    parent = parent_ids(agent.checkpointer, thread)
    line, cid = [], head
    while cid is not None and cid in parent and cid not in line:
        line.append(cid)
        cid = parent[cid]
    return line


def check_derived(agent: Any, plan: ReplayPlan, scratch: str, seed: Seed, *, session_messages: int,
                  fork_records: tuple[list[tuple[str, str]], list[str]], event_id: str,
                  given: Collection[str] | None = None) -> ScratchState:
    """The scratch thread's final state, if the replay derived it (module docstring); else
    ``NotDerived`` naming every problem found. ``session_messages``: how many messages the
    session's live state holds; ``fork_records``: the store's ``rewrites.fork_records(scratch)``;
    ``given``: the recorded inputs the replay gave (None: every one of the plan; a replay that
    stopped at a human's question gives those before it)."""
    session = plan.session_id
    head, values = head_of(agent, scratch)
    if head is None:
        raise NotDerived(session, event_id, [f"the scratch thread {scratch!r} holds no state in the agent's "
                                             "checkpointer"])
    problems = []
    msgs = list(values.get("messages", []) or [])
    if session_messages and not msgs:
        problems.append(f"it holds no message where the session holds {session_messages}")
    if seed.checkpoint_id is not None and seed.checkpoint_id not in _lineage(agent, scratch, head):
        problems.append("its history does not grow from the fork's seed checkpoint")
    if changed := _prefix_changed(seed, msgs):
        problems.append(changed)
    own, clash = fork_records
    recorded = {aid for aid, kind in own if kind == ArtifactType.USER_INPUT.value}
    expected = [i for t in plan.turns for i in plan.inputs.get(t, ()) if given is None or i.artifact_id in given]
    kept = {i.artifact_id for i in expected if not plan.sanitizes(i.artifact_id)}
    if missing := sorted(kept - recorded):
        problems.append(f"the replay did not give {len(missing)} recorded user input(s) ({', '.join(missing[:5])})")
    elif len(recorded) < len(expected):
        problems.append(f"the replay gave {len(recorded)} user input(s) where the session recorded {len(expected)}")
    # every run input given (a state update's keys, a human's decision) was recorded again, by its id
    runs = {aid for aid, kind in own if kind == ArtifactType.RUN_INPUT.value}
    want = {r.artifact_id for r in plan.runs if given is None or r.artifact_id in given}
    if lost := sorted(want - runs):
        problems.append(f"the replay did not give {len(lost)} recorded run input(s) ({', '.join(lost[:5])})")
    if clash:
        problems.append(f"the replay's model returned message id(s) the session's earlier messages already have "
                        f"({', '.join(clash[:5])}): LangGraph merges messages by id, so a reply would replace an "
                        "earlier message; a chat model must give each reply an id of its own")
    if problems:
        raise NotDerived(session, event_id, problems)
    return ScratchState(head, values)


def _prefix_changed(seed: Seed, messages: Sequence[Any]) -> str | None:
    """What is wrong with the fork checkpoint's messages in the final state, if anything: each one
    still there is verbatim (a later message with its id would have replaced it) and they keep
    their order. A compaction may have removed some: that is a later step of the replay."""
    prints = message_prints(messages)
    now = dict(prints)
    order = {mid: i for i, (mid, _) in enumerate(prints)}
    kept = [(mid, fp) for mid, fp in seed.messages if mid in now]
    if changed := [mid for mid, fp in kept if now[mid] != fp]:
        return (f"message(s) of the clean prefix changed ({', '.join(changed[:5])}): a later message took their "
                "id (LangGraph merges messages by id)")
    at = [order[mid] for mid, _ in kept]
    if at != sorted(at):
        return "the clean prefix's messages are no longer in their order"
    return None


def remaining_places(values: dict[str, Any], memory: Iterable[tuple[Any, str, Any]], target: str) -> list[str]:
    """Where ``target`` is in a state's ``values`` (each key; for messages, which ones) and in the
    memory items ``memory`` ((namespace, key, value)), in every form an audit looks for."""
    from unsee.plugins.erasure import holds_target, value_text

    memory = list(memory)
    if not holds_target(value_text([values, [v for _, _, v in memory]]), target):
        return []  # (the common case: one pass over the state's text)
    out = []
    for key in sorted(values):
        value = values[key]
        if key == "messages" and isinstance(value, list):
            hits = [f"#{n} {type(m).__name__}" for n, m in enumerate(value) if holds_target(value_text(m), target)]
            if hits:
                out.append(f"state key 'messages' ({', '.join(hits[:5])}{', ...' if len(hits) > 5 else ''})")
        elif holds_target(value_text(value), target):
            out.append(f"state key {key!r}")
    items = [f"{'/'.join(map(str, ns))}:{k}" for ns, k, v in memory if holds_target(value_text(v), target)]
    if items:
        out.append(f"memory item(s) {', '.join(items[:5])}")
    return out


def check_target_gone(state: ScratchState, memory: Iterable[tuple[Any, str, Any]], plan: ReplayPlan,
                      event: Any, earlier_sources: list[str]) -> None:
    """``TargetRemains`` when the counterfactual still holds ``event.target`` anywhere the commit
    would write it; ``earlier_sources``: where the record shows it entered before the entry this
    forget starts from (kept verbatim in the clean prefix)."""
    places = remaining_places(state.values, memory, event.target)
    if places:
        raise TargetRemains(plan.session_id, event.event_id, places, earlier_sources)


def check_journaled(agent: Any, session: str, scratch: str, journal: dict[str, Any]) -> ScratchState:
    """A roll-forward's check: ``agent`` reads the scratch thread the commit was journaled with, at
    the head the first attempt checked; else ``AgentCannotReplay`` naming the graph that can."""
    from langgraph.checkpoint.base import BaseCheckpointSaver

    graph = journal.get("graph") or "the agent that ran the forget"
    fix = f"finish it with that agent: u.forget(..., agent=<{graph}>) with the same event"
    if not isinstance(getattr(agent, "checkpointer", None), BaseCheckpointSaver):
        raise AgentCannotReplay(session, f"the commit was journaled through {graph}, and this agent has no "
                                         "checkpointer of its own (a subgraph or a worker)", fix)
    head, values = head_of(agent, scratch)
    want = journal.get("head")
    if head is None or (want is not None and head != want):
        seen = "holds no such thread" if head is None else f"holds it at another checkpoint ({head})"
        raise AgentCannotReplay(session, f"the commit was journaled with scratch thread {scratch!r} written through "
                                         f"{graph}, and this agent's checkpointer {seen}", fix)
    return ScratchState(head, values)


__all__ = ["ScratchState", "Seed", "check_derived", "check_journaled", "check_target_gone", "head_of",
           "message_prints", "remaining_places"]
