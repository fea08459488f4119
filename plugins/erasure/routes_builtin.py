"""The built-in routes, registered in erasure order: the agent's LangGraph parts first
(the live state's source), unsee's files, then the sandbox; and ``build_routes``."""

from __future__ import annotations

from typing import Any

from . import routes_langgraph, routes_records, routes_sandbox  # noqa: F401  (each registers its routes)
from .ports import ErasureContext
from .routes import Route, route_factories


def build_routes(ctx: ErasureContext, agent: Any) -> list[Route]:
    """The routes that apply to this home and agent, in erasure order."""
    return [r for f in route_factories() if (r := f(ctx, agent)) is not None]
