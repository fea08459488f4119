"""Check first: what every later step of a forget needs, checked before anything changes.

A replay re-runs the session's recorded runs through the agent, the commit
writes the thread through the agent's checkpointer, and the erasure rewrites
the thread's history. ``check_replayable`` refuses, with a typed error naming
what is missing and how to supply it, before the scratch thread is made:

- the agent runs unsee's middleware (a replay is recorded and its calls
  intercepted only through it: through another graph, tools would run again)
  and owns the thread: it has a checkpointer and the checkpointer holds the
  thread (a supervisor's worker or a subgraph has none: the graph the
  application invokes does);
- the agent can replay every recorded input kind of the suffix: runs nested in
  another graph on the same thread (subagents, supervisor workers, swarm
  agents), runs resumed after an interrupt (the human's decision was an input
  the record does not hold), a run still waiting at an interrupt, tools that
  have no synchronous form are refusals, not half-forgets;
- the records hold every input the live state holds (a turn the graph ran
  without unsee's middleware would be dropped by a commit);
- there is a recorded run to replay where the state went on after the fork.

The pure parts (``recorded_refusals``) read only the provenance graph and are
tested directly; ``check_replayable`` adds what the agent and its checkpointer say.
The erasure's own check (``erasure_blockers`` of the erasure plugin) is handed
in by the pipeline, which knows whether the forget erases.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage

from unsee.middleware.discovery import node_owners
from unsee.middleware.graph import ProvenanceGraph
from unsee.middleware.records import ArtifactType

from .errors import AgentCannotReplay, UnsupportedSession
from .plan import ReplayPlan
from .thread import artifact_of, thread_cfg


@dataclass(frozen=True)
class LiveState:
    """The session's thread as the agent's checkpointer holds it now (read once per forget)."""

    checkpoint_id: str
    messages: tuple[BaseMessage, ...]
    keys: tuple[str, ...]


def graph_label(agent: Any) -> str:
    """How an error names a compiled graph: its type and the name it was given."""
    name = getattr(agent, "name", None)
    return f"{type(agent).__name__} {name!r}" if isinstance(name, str) and name else type(agent).__name__


def _nodes(ns: str) -> str:
    """The node path of a checkpoint namespace, without task ids (``worker_a:<id>|tools:<id>`` ->
    ``worker_a/tools``)."""
    return "/".join(seg.split(":", 1)[0] for seg in ns.split("|") if seg)


def recorded_refusals(g: ProvenanceGraph, plan: ReplayPlan) -> list[str]:
    """What the record of the suffix holds that a replay cannot give again (pure): runs nested
    in another graph on the thread, runs resumed after an interrupt."""
    nested: dict[str, None] = {}
    resumed: dict[int, None] = {}
    for a in g.since_seq(plan.fork_seq):
        ns = a.attrs.get("graph_ns")
        if ns:
            nested[_nodes(str(ns))] = None
        if a.attrs.get("resumed"):
            resumed[a.turn] = None
    out = []
    if nested:
        out.append("its runs include agents run nested in another graph on the same thread ("
                   + ", ".join(sorted(nested)) + ": subagents, supervisor workers or swarm agents); a replay "
                   "re-runs the graph that owns the thread's checkpointer, and replaying nested runs is not "
                   "supported yet")
    if resumed:
        out.append("run(s) of turn(s) " + ", ".join(str(t) for t in sorted(resumed)) + " were resumed after an "
                   "interrupt (Command(resume=...), e.g. a human approval): the decision is an input a replay "
                   "cannot give again yet")
    return out


def async_only_tools(agent: Any) -> list[str]:
    """Names of the agent's tools that have no synchronous form (an ``async def`` tool, every MCP
    tool): the replay runs the agent synchronously."""
    out = []
    for spec in (getattr(getattr(agent, "builder", None), "nodes", None) or {}).values():
        tools = getattr(getattr(spec, "runnable", None), "tools_by_name", None)
        if not isinstance(tools, dict):
            continue
        for name, t in tools.items():
            if getattr(t, "func", True) is None and getattr(t, "coroutine", None) is not None:
                out.append(str(name))
    return sorted(set(out))


def records_through_unsee(agent: Any) -> bool:
    """Whether ``agent`` runs unsee's recording middleware (a node of it is bound to one): a replay
    is recorded, and its calls intercepted, only through it."""
    from unsee.middleware.hooks import UnseeMiddleware

    return any(isinstance(owner, UnseeMiddleware) for owner in node_owners(agent))


def live_state(agent: Any, session: str) -> LiveState:
    """The thread as ``agent``'s checkpointer holds it; ``AgentCannotReplay`` when the agent has no
    checkpointer or it does not hold the thread."""
    from langgraph.checkpoint.base import BaseCheckpointSaver

    saver = getattr(agent, "checkpointer", None)
    if not isinstance(saver, BaseCheckpointSaver):
        raise AgentCannotReplay(session, f"{graph_label(agent)} has no checkpointer of its own (checkpointer="
                                         f"{saver!r}): it runs as a part of another graph, a subgraph or a worker")
    snap = agent.get_state(thread_cfg(session))
    cid = ((getattr(snap, "config", None) or {}).get("configurable") or {}).get("checkpoint_id")
    if not cid:
        raise AgentCannotReplay(session, f"the checkpointer of {graph_label(agent)} ({type(saver).__name__}) "
                                         f"holds no thread {session!r}")
    values = dict(snap.values or {})
    if getattr(snap, "interrupts", ()):
        raise UnsupportedSession(session, ["its latest run is waiting at an interrupt (e.g. a human approval): "
                                           "resume it (Command(resume=...)) before forgetting"])
    return LiveState(cid, tuple(values.get("messages", []) or ()), tuple(sorted(values)))


def unrecorded_inputs(session: str, live: LiveState, recorded: Iterable[str] | ProvenanceGraph) -> list[BaseMessage]:
    """The human messages of the live state the records do not hold (a run the graph made
    without unsee's middleware: a supervisor answering alone, a graph without it)."""
    return [m for m in live.messages
            if isinstance(m, HumanMessage) and (aid := artifact_of(session, m)) and aid not in recorded]


def check_replayable(agent: Any, session: str, g: ProvenanceGraph, plan: ReplayPlan, *,
                     erasure: Callable[[Any, str], list[str]] | None = None,
                     inputs_from_state: bool = False) -> LiveState:
    """Refuse (``AgentCannotReplay``, ``UnsupportedSession``) unless every later step of a
    replaying forget can run for ``session`` through ``agent`` (module docstring). ``erasure``:
    the erasure plugin's check of the thread (reasons it cannot rewrite it; None: the forget
    does not erase). ``inputs_from_state``: the plan already takes the inputs the records lack
    from the state (B5 after a run that died). Returns the live state, read once."""
    reasons = recorded_refusals(g, plan)
    if not reasons and not records_through_unsee(agent):  # (nested runs: their graphs hold it, and are refused)
        raise AgentCannotReplay(session, f"{graph_label(agent)} does not run unsee's middleware: a replay through it "
                                         "would be neither recorded nor intercepted (its tools would run again)",
                                "pass the agent the session was recorded with (create_agent(..., middleware="
                                "[u.middleware(), ...]))")
    live = live_state(agent, session)
    if tools := async_only_tools(agent):
        reasons.append(f"tool(s) {', '.join(tools)} have no synchronous form (async def or MCP tools) and a "
                       "replay runs the agent synchronously; replaying them is not supported yet")
    if not inputs_from_state and (missing := unrecorded_inputs(session, live, g)):
        reasons.append(f"its state holds {len(missing)} user input(s) unsee did not record (a run made "
                       "without unsee's middleware, e.g. a supervisor or outer graph answering alone): a "
                       "replay would drop them")
    if not any(plan.inputs.get(t) for t in plan.turns) and _went_on(live, g, plan):
        reasons.append("no recorded run of the agent to replay after the fork point although the state went on "
                       "(were the runs recorded by u.middleware() in this agent?)")
    if erasure is not None:
        reasons.extend(erasure(agent, session))
    if reasons:
        raise UnsupportedSession(session, reasons)
    return live


def _went_on(live: LiveState, g: ProvenanceGraph, plan: ReplayPlan) -> bool:
    """Whether the live state holds messages beyond the fork checkpoint's (what a replay with no
    turn would drop)."""
    kept = set(plan.checkpoint.prompt_manifest) if plan.checkpoint is not None else set()
    return any(artifact_of(plan.session_id, m) not in kept for m in live.messages)


__all__ = ["LiveState", "async_only_tools", "check_replayable", "graph_label", "live_state", "recorded_refusals",
           "records_through_unsee", "unrecorded_inputs"]
