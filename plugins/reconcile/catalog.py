"""The tools a reconciliation can run: an agent's tools, found in its graph, and the compensators
they declare."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from unsee.plugins.tools import compensator_of

__all__ = ["agent_tools", "compensators", "tool_map"]


def agent_tools(agent: Any) -> dict[str, Any]:
    """Every tool of ``agent`` (a compiled LangGraph graph) by name: its tool nodes', and those of the
    graphs it runs as nodes (a swarm's agents, a supervisor's), at any depth."""
    from langgraph.pregel import Pregel

    out: dict[str, Any] = {}
    todo, seen = [agent], {id(agent)}
    while todo:
        graph = todo.pop()
        for spec in (getattr(getattr(graph, "builder", None), "nodes", None) or {}).values():
            runnable = getattr(spec, "runnable", None)
            tools = getattr(runnable, "tools_by_name", None)
            if isinstance(tools, dict):
                for name, tool in tools.items():
                    out.setdefault(str(name), tool)
            for found in (runnable, getattr(runnable, "bound", None)):
                if isinstance(found, Pregel) and id(found) not in seen:
                    seen.add(id(found))
                    todo.append(found)
    return out


def tool_map(*sources: Iterable[Any] | Mapping[str, Any] | None) -> dict[str, Any]:
    """Tools by name from each source in turn (a mapping or an iterable of tools; the first wins)."""
    out: dict[str, Any] = {}
    for source in sources:
        if not source:
            continue
        items = source.items() if isinstance(source, Mapping) else ((getattr(t, "name", None), t) for t in source)
        for name, tool in items:
            if name:
                out.setdefault(str(name), tool)
    return out


def compensators(tools: Mapping[str, Any]) -> dict[str, Any]:
    """The compensator each tool declares, by the tool's name (tools that declare none are left out)."""
    return {name: c for name, tool in tools.items() if (c := compensator_of(tool)) is not None}
