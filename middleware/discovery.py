"""Find the compiled agent a middleware instance belongs to.

``u.forget`` must replay through the agent that recorded the session without
the user handing it over. On the sync path the running ``Pregel`` is on the
call stack; on the async path it is not, so we look for the compiled graphs
whose node runnables are bound to this middleware (once per middleware).
"""

from __future__ import annotations

import gc
import sys
from typing import Any


def _pregel_types() -> tuple[type, ...]:
    from langgraph.pregel import Pregel

    return (Pregel,)


def _owns(graph: Any, middleware: Any) -> bool:
    builder = getattr(graph, "builder", None)
    nodes = getattr(builder, "nodes", None) or {}
    for spec in nodes.values():
        runnable = getattr(spec, "runnable", None)
        for attr in ("func", "afunc"):
            fn = getattr(runnable, attr, None)
            if getattr(fn, "__self__", None) is middleware:
                return True
    return False


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
