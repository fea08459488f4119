"""Find the compiled agent a middleware instance belongs to, and the graph that owns its thread.

``u.forget`` must replay through the agent that recorded the session without
the user handing it over. On the sync path the running ``Pregel`` is on the
call stack; on the async path it is not, so we look for the compiled graphs
whose node runnables are bound to this middleware (once per session), the one
whose checkpointer the running task writes to first.
``find_thread_graph`` prefers the outermost graph on the stack that has a
checkpointer: the one that owns the thread when this agent runs nested in it.

A graph without middleware hooks (a hand-written ``StateGraph``,
``create_react_agent``) belongs to the middleware its recorded parts run
through (``graph_adapter``): the wrappers of its tool nodes, and the recorded
chat models its node functions reach (their closure, the globals they name).
"""

from __future__ import annotations

import gc
import sys
from typing import Any

from .context import configurable


def _pregel_types() -> tuple[type, ...]:
    from langgraph.pregel import Pregel

    return (Pregel,)


def node_owners(graph: Any) -> list[Any]:
    """The objects the graph's node functions are bound to (a ``create_agent``'s middleware
    instances: each hook is a node), in node order, followed by the recording middleware that
    the graph's recorded tool nodes and recorded chat models run through (``graph_adapter``:
    a hand-written graph or ``create_react_agent``)."""
    out = []
    for _, runnable in _node_runnables(graph):
        for attr in ("func", "afunc"):
            owner = getattr(getattr(runnable, attr, None), "__self__", None)
            if owner is not None:
                out.append(owner)
    for _, runnable in _node_runnables(graph):
        out.extend(_recording_parts(runnable))
    return out


def _node_runnables(graph: Any) -> list[tuple[str, Any]]:
    builder = getattr(graph, "builder", None)
    nodes = getattr(builder, "nodes", None) or {}
    return [(name, getattr(spec, "runnable", None)) for name, spec in nodes.items()]


def _is_tool_node(runnable: Any) -> bool:
    from langgraph.prebuilt import ToolNode

    return isinstance(runnable, ToolNode)


#: the attribute a recorded chat model or tool-call wrapper (``graph_adapter``) names the
#: recording middleware it runs through with
RECORDING_MIDDLEWARE_ATTR = "unsee_middleware"


def recording_middleware_of(obj: Any) -> Any | None:
    """The middleware ``obj`` records through: a recorded chat model's or tool-call wrapper's
    (``RECORDING_MIDDLEWARE_ATTR``), else the object a bound method (a middleware's own
    ``wrap_tool_call``) belongs to; None for anything else."""
    if obj is None or isinstance(obj, type):
        return None
    marked = getattr(obj, RECORDING_MIDDLEWARE_ATTR, None)
    if marked is not None:
        return marked
    return getattr(obj, "__self__", None)


def _recording_parts(runnable: Any) -> list[Any]:
    """The recording middleware a node records through: its tool wrappers' (a ``ToolNode``) or
    that of the recorded chat models its functions reach (closure, globals they name)."""
    if _is_tool_node(runnable):
        found = [recording_middleware_of(getattr(runnable, attr, None))
                 for attr in ("_wrap_tool_call", "_awrap_tool_call")]
        return [m for m in found if m is not None]
    out: list[Any] = []
    for attr in ("func", "afunc"):
        fn = getattr(runnable, attr, None)
        if fn is not None and getattr(fn, "__self__", None) is None:
            for value in _referenced(fn):
                out.extend(_models_in(value))
    return out


def _referenced(fn: Any) -> list[Any]:
    """What a node function reaches by name: its closure's values and the globals it names."""
    fn = getattr(fn, "func", fn)  # (functools.partial)
    out = [c.cell_contents for c in (getattr(fn, "__closure__", None) or ()) if _filled(c)]
    code, env = getattr(fn, "__code__", None), getattr(fn, "__globals__", None) or {}
    if code is not None:
        out.extend(env[n] for n in code.co_names if n in env)
    return out


def _filled(cell: Any) -> bool:
    try:
        cell.cell_contents
    except ValueError:
        return False
    return True


def _models_in(value: Any, depth: int = 3) -> list[Any]:
    """The middleware of the recorded chat models in ``value``: itself, the steps of a runnable
    sequence, what a binding binds (``model.bind(...)``, ``prompt | model``)."""
    from langchain_core.language_models import BaseChatModel
    from langchain_core.runnables import RunnableBinding, RunnableSequence

    if isinstance(value, BaseChatModel):
        marked = getattr(value, RECORDING_MIDDLEWARE_ATTR, None)
        return [marked] if marked is not None else []
    if depth == 0:
        return []
    if isinstance(value, RunnableSequence):
        return [m for step in value.steps for m in _models_in(step, depth - 1)]
    if isinstance(value, RunnableBinding):
        return _models_in(value.bound, depth - 1)
    return []


def unrecorded_tool_nodes(graph: Any, middleware_type: type) -> list[str]:
    """The graph's ``ToolNode`` nodes that run their tools without a ``middleware_type`` (unsee's
    recording middleware) wrapping them: a replay would run their tools again. A
    ``create_agent``'s own tool node counts as recorded where a hook of the agent is one."""
    hooks = any(isinstance(getattr(getattr(runnable, attr, None), "__self__", None), middleware_type)
                for _, runnable in _node_runnables(graph) for attr in ("func", "afunc"))
    out = []
    for name, runnable in _node_runnables(graph):
        if not _is_tool_node(runnable):
            continue
        wrappers = [getattr(runnable, a, None) for a in ("_wrap_tool_call", "_awrap_tool_call")]
        if any(isinstance(recording_middleware_of(w), middleware_type) for w in wrappers):
            continue
        if hooks and any(w is not None for w in wrappers):
            continue  # (a create_agent's ToolNode: its wrapper is the agent's middleware chain)
        if _state_tools_only(runnable):
            continue  # (handoffs and the like: a replay runs them again for their update, as it should)
        out.append(name)
    return out


def _state_tools_only(tool_node: Any) -> bool:
    """Whether every tool of ``tool_node`` only updates the graph's state (effect ``state``: a
    handoff, ``write_todos``): running them again in a replay touches nothing outside it."""
    from .tools import STATE, effect_of

    tools = list((getattr(tool_node, "tools_by_name", None) or {}).values())
    return bool(tools) and all(effect_of(t) == STATE for t in tools)


def _owns(graph: Any, middleware: Any) -> bool:
    return any(owner is middleware for owner in node_owners(graph))


def _has_saver(graph: Any) -> bool:
    from langgraph.checkpoint.base import BaseCheckpointSaver

    return isinstance(getattr(graph, "checkpointer", None), BaseCheckpointSaver)


def find_thread_graph(middleware: Any) -> Any | None:
    """The graph that owns the running thread's checkpointer: the outermost graph on the call
    stack compiled with a checkpointer of its own (a supervisor, a swarm, an outer agent whose
    tool runs this one), else the graph this middleware belongs to (``find_agent``).

    A graph run inside another one on the same thread (a worker, a subagent) has no
    checkpointer: its state is a part of the outer graph's, which a forget replays and an
    erasure reads. On the async path the stack does not hold the outer graph: the middleware's
    own graph is returned, and a forget refuses it until given the outer one."""
    types = _pregel_types()
    outer = None
    frame = sys._getframe(1)
    while frame is not None:
        candidate = frame.f_locals.get("self")
        if isinstance(candidate, types) and _has_saver(candidate):
            outer = candidate  # (walking outwards: the last one found is the outermost)
        frame = frame.f_back
    return outer if outer is not None else find_agent(middleware)


def find_agent(middleware: Any) -> Any | None:
    types = _pregel_types()
    frame = sys._getframe(1)
    while frame is not None:
        candidate = frame.f_locals.get("self")
        if isinstance(candidate, types) and _owns(candidate, middleware):
            return candidate
        frame = frame.f_back
    # Off the stack (the async path): every graph this middleware records through, the one whose
    # checkpointer the running task writes to first (several graphs may share one middleware)
    found = [obj for obj in gc.get_objects() if isinstance(obj, types) and _owns(obj, middleware)]
    saver = configurable().get("__pregel_checkpointer")
    return next((g for g in found if saver is not None and getattr(g, "checkpointer", None) is saver),
                found[0] if found else None)
