"""Find the compiled agent a middleware instance belongs to, and the graph that owns its thread.

``u.forget`` must replay through the agent that recorded the session without
the user handing it over. On the sync path the running ``Pregel`` is on the
call stack; on the async path it is not, so we look for the compiled graphs
whose node runnables are bound to this middleware (once per middleware).
``find_thread_graph`` prefers the outermost graph on the stack that has a
checkpointer: the one that owns the thread when this agent runs nested in it.
"""

from __future__ import annotations

import gc
import sys
from typing import Any


def _pregel_types() -> tuple[type, ...]:
    from langgraph.pregel import Pregel

    return (Pregel,)


def node_owners(graph: Any) -> list[Any]:
    """The objects the graph's node functions are bound to (a ``create_agent``'s middleware
    instances: each hook is a node), in node order."""
    builder = getattr(graph, "builder", None)
    nodes = getattr(builder, "nodes", None) or {}
    out = []
    for spec in nodes.values():
        runnable = getattr(spec, "runnable", None)
        for attr in ("func", "afunc"):
            owner = getattr(getattr(runnable, attr, None), "__self__", None)
            if owner is not None:
                out.append(owner)
    return out


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
    for obj in gc.get_objects():
        if isinstance(obj, types) and _owns(obj, middleware):
            return obj
    return None
