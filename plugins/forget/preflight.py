"""Check first: what every later step of a forget needs, checked before anything changes.

A replay re-runs the session's recorded runs through the agent, the commit
writes the thread through the agent's checkpointer, and the erasure rewrites
the thread's history. ``check_replayable`` refuses, with a typed error naming
what is missing and how to supply it, before the scratch thread is made:

- the agent runs unsee's middleware (a replay is recorded and its calls
  intercepted only through it: through another graph, tools would run again),
  in every agent it runs as a node (a swarm's agents: yes; a
  ``langgraph-supervisor`` supervisor, built without middleware: refused),
  and owns the thread: it has a checkpointer and the checkpointer holds the
  thread (a supervisor's worker or a subgraph has none: the graph the
  application invokes does, and replays the runs nested in it);
- the agent can replay every recorded input kind of the suffix: nested runs
  recorded as turns of their own (an older unsee), runs resumed after an
  interrupt whose decision the record does not hold are refusals, not
  half-forgets (a run waiting at an interrupt is forgotten up to the same
  pause; tools with no synchronous form need ``aforget``: ``NeedsAsync``);
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

from unsee.middleware.discovery import node_owners, unrecorded_tool_nodes
from unsee.middleware.graph import ProvenanceGraph
from unsee.middleware.records import ArtifactType

from .errors import AgentCannotReplay, NeedsAsync, UnsupportedSession
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
    """What the record of the suffix holds that a replay cannot give again (pure): runs resumed
    after an interrupt, and nested runs recorded as turns of their own.

    Runs nested in another graph on the thread (subagents, supervisor workers, swarm agents, an
    agent node) are recorded as parts of the outer run's turn (``graph_ns`` with ``in_turn``):
    re-running the graph that owns the thread re-runs them, and their calls are matched to their
    records. A record of a nested run without ``in_turn`` was made by an older unsee, which made
    it a turn of its own (its input a user turn, its start a fork point inside the outer run):
    it cannot be replayed."""
    legacy: dict[str, None] = {}
    resumed: dict[int, None] = {}
    decided: set[int] = set()  # (turns whose resumed run's input, the decision, is recorded)
    for a in g.since_seq(plan.fork_seq):
        ns = a.attrs.get("graph_ns")
        if ns and not a.attrs.get("in_turn"):
            legacy[_nodes(str(ns))] = None
        if a.type is ArtifactType.RUN_INPUT and a.attrs.get("kind") == "command":
            decided.add(a.turn)  # (recorded before the resumed run's calls)
        elif a.attrs.get("resumed") and a.turn not in decided:
            resumed[a.turn] = None
    out = []
    if legacy:
        out.append("its record holds runs nested in another graph on the same thread (" + ", ".join(sorted(legacy))
                   + ") as turns of their own (recorded by an earlier unsee): a replay would give their inputs to "
                   "the graph as the user's; erase the thread whole (u.erase_subject) or forget in sessions "
                   "recorded since")
    if resumed:
        out.append("run(s) of turn(s) " + ", ".join(str(t) for t in sorted(resumed)) + " were resumed after an "
                   "interrupt (Command(resume=...), e.g. a human approval) and the record does not hold the "
                   "decision (recorded by an earlier unsee): a replay cannot give it again")
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


def _subgraphs(agent: Any) -> list[tuple[str, Any]]:
    """The compiled graphs ``agent`` runs as nodes, at any depth (node path, graph): a swarm's
    agents, a supervisor's supervisor agent, an agent used as a ``StateGraph`` node."""
    from langgraph.pregel import Pregel

    out: list[tuple[str, Any]] = []
    todo: list[tuple[str, Any]] = [("", agent)]
    seen = {id(agent)}
    while todo:
        path, graph = todo.pop()
        for name, spec in (getattr(getattr(graph, "builder", None), "nodes", None) or {}).items():
            runnable = getattr(spec, "runnable", None)
            for found in [runnable, *_wrapped(runnable)]:
                if isinstance(found, Pregel) and id(found) not in seen:
                    seen.add(id(found))
                    sub = f"{path}/{name}" if path else str(name)
                    out.append((sub, found))
                    todo.append((sub, found))
    return out


def _wrapped(runnable: Any) -> list[Any]:
    """What a node's function closes over (a supervisor's worker node is a function calling the
    worker's graph)."""
    out = []
    for attr in ("func", "afunc"):
        for cell in getattr(getattr(runnable, attr, None), "__closure__", None) or ():
            try:
                out.append(cell.cell_contents)
            except ValueError:  # (an empty cell)
                pass
    return out


def _runs_unsee(graph: Any) -> bool:
    """Whether ``graph`` itself records through unsee: a node of it is a hook of unsee's middleware
    (a ``create_agent``), or its model or tool nodes record through it (``u.recorded_model``,
    ``u.tool_node``: a hand-written graph, ``create_react_agent``) and none of its tool nodes
    runs tools unrecorded (a replay would run them again)."""
    from unsee.middleware.hooks import UnseeMiddleware

    return (any(isinstance(owner, UnseeMiddleware) for owner in node_owners(graph))
            and not unrecorded_tool_nodes(graph, UnseeMiddleware))


def records_through_unsee(agent: Any) -> bool:
    """Whether ``agent`` runs unsee's recording middleware (a node of it, or of a graph it runs as a
    node, is bound to one): a replay is recorded, and its calls intercepted, only through it."""
    return _runs_unsee(agent) or any(_runs_unsee(sub) for _, sub in _subgraphs(agent))


def _runs_tools(graph: Any) -> bool:
    from langgraph.prebuilt import ToolNode

    nodes = getattr(getattr(graph, "builder", None), "nodes", None) or {}
    return any(isinstance(getattr(spec, "runnable", None), ToolNode) for spec in nodes.values())


def unrecorded_agents(agent: Any) -> list[str]:
    """The node paths of agents ``agent`` runs as nodes without unsee's middleware (a
    ``langgraph-supervisor`` supervisor, an agent built without ``u.middleware()``) while others
    run it: their model calls and tools would run again in a replay, unrecorded and unmatched."""
    subs = [(p, sub) for p, sub in _subgraphs(agent) if _runs_tools(sub) and not _runs_unsee(sub)]
    return sorted(p for p, _ in subs)


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
    # (a session waiting at an interrupt is forgotten up to the same pause: the replay gives the
    # recorded inputs and the counterfactual waits at its own question)
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
    if not reasons and not records_through_unsee(agent):  # (a record refused anyway says why first)
        raise AgentCannotReplay(session, f"{graph_label(agent)} does not run unsee's middleware: a replay through it "
                                         "would be neither recorded nor intercepted (its tools would run again)",
                                "pass the agent the session was recorded with (create_agent(..., middleware="
                                "[u.middleware(), ...]); a graph without create_agent: u.recorded_model(model) "
                                "and u.tool_node(tools) for every ToolNode)")
    live = live_state(agent, session)
    if bare := unrecorded_agents(agent):
        reasons.append(f"the agent(s) {', '.join(bare)} of {graph_label(agent)} run without unsee's middleware "
                       "(a langgraph-supervisor supervisor takes none): a replay would run their model calls and "
                       "tools again, unrecorded; build them with middleware=[u.middleware()]")
    if (tools := async_only_tools(agent)) and not _replays_async():
        raise NeedsAsync(session, tools)
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


def _replays_async() -> bool:
    """Whether this forget replays with ``ainvoke`` (``aforget``: ``replay.replay_loop`` is set)."""
    from .replay import replay_loop

    return replay_loop.get() is not None


def _went_on(live: LiveState, g: ProvenanceGraph, plan: ReplayPlan) -> bool:
    """Whether the live state holds messages beyond the fork checkpoint's (what a replay with no
    turn would drop)."""
    kept = set(plan.checkpoint.prompt_manifest) if plan.checkpoint is not None else set()
    return any(artifact_of(plan.session_id, m) not in kept for m in live.messages)


__all__ = ["LiveState", "async_only_tools", "check_replayable", "graph_label", "live_state", "recorded_refusals",
           "records_through_unsee", "unrecorded_agents", "unrecorded_inputs"]
