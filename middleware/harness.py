"""The tools an agent's middleware (or a harness built on it) adds to the agent.

``create_agent`` gives the model the tools listed on each middleware's
``.tools`` next to the application's own (``TodoListMiddleware``'s
``write_todos``; deepagents' filesystem tools and ``task``). Such a tool works
on the agent's own state (a todo list, a virtual file system, a subagent), so a
replay must run it again for its state update to happen in the counterfactual
run too. What the compiled graph keeps of its middleware is the hooks bound to
them: node functions (``before_agent``, ``after_model``...) and the wrappers
chained into the model and tool nodes (``wrap_model_call``,
``wrap_tool_call``). :func:`middleware_of` follows those bound methods (and
the closures and ``__wrapped__`` of the wrappers LangChain builds around them)
to the middleware instances; :func:`register_graph` remembers their tools by
identity, so :func:`is_harness_tool` answers for the very tool objects the
agent's tool node runs.

A middleware that adds tools but hooks nothing is not reachable from the graph;
its tools stay undeclared (the safe default: never fired twice) unless they
declare an effect or return a ``Command``.
"""

from __future__ import annotations

import threading
import types
import weakref
from typing import Any

__all__ = ["is_harness_tool", "middleware_of", "register_graph"]

#: id(tool) -> the tool (weakly): the tools some graph's middleware lists
_TOOLS: "weakref.WeakValueDictionary[int, Any]" = weakref.WeakValueDictionary()
#: id(graph) -> the graph (weakly): graphs already scanned
_GRAPHS: "weakref.WeakValueDictionary[int, Any]" = weakref.WeakValueDictionary()
_LOCK = threading.Lock()
#: how deep the walk follows closures and wrappers (LangChain nests a handful)
_DEPTH = 10


def _middleware_type() -> type:
    from langchain.agents.middleware import AgentMiddleware

    return AgentMiddleware


def middleware_of(graph: Any) -> list[Any]:
    """The ``AgentMiddleware`` instances the compiled ``graph`` reaches through its nodes (in the
    order found, each once)."""
    kind = _middleware_type()
    found: dict[int, Any] = {}
    seen: set[int] = set()

    def walk(obj: Any, depth: int) -> None:
        if obj is None or depth > _DEPTH or id(obj) in seen:
            return
        seen.add(id(obj))
        if isinstance(obj, kind):
            found.setdefault(id(obj), obj)
            return
        if isinstance(obj, types.MethodType):
            walk(obj.__self__, depth + 1)
            walk(obj.__func__, depth + 1)
        elif isinstance(obj, types.FunctionType):
            for cell in obj.__closure__ or ():
                try:
                    walk(cell.cell_contents, depth + 1)
                except ValueError:  # (an empty cell)
                    pass
            walk(getattr(obj, "__wrapped__", None), depth + 1)
        elif isinstance(obj, (list, tuple)):
            for x in obj:
                walk(x, depth + 1)
        else:
            # a node's runnable (``RunnableCallable``: func/afunc) or the tool node's chained wrappers
            for attr in ("func", "afunc", "_wrap_tool_call", "_awrap_tool_call", "__wrapped__"):
                walk(getattr(obj, attr, None), depth + 1)

    nodes = getattr(getattr(graph, "builder", None), "nodes", None) or {}
    for spec in nodes.values():
        walk(getattr(spec, "runnable", None), 0)
    return list(found.values())


def register_graph(graph: Any) -> None:
    """Remember the tools the middleware of ``graph`` add (once per graph; never raises)."""
    if graph is None:
        return
    with _LOCK:
        if _GRAPHS.get(id(graph)) is graph:
            return
    try:
        tools = [t for m in middleware_of(graph) for t in (getattr(m, "tools", None) or ())]
    except Exception:  # an observer's helper: a graph it cannot read adds nothing
        tools = []
    with _LOCK:
        for t in tools:
            try:
                _TOOLS[id(t)] = t
            except TypeError:  # (an object without weak references: not a LangChain tool)
                pass
        try:
            _GRAPHS[id(graph)] = graph
        except TypeError:
            pass


def is_harness_tool(tool: Any) -> bool:
    """Whether a middleware of a registered graph lists this very tool object."""
    return tool is not None and _TOOLS.get(id(tool)) is tool
