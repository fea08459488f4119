"""The built-in routes, an explicit table in erasure order, and ``build_routes``.

:data:`BUILTIN_ROUTES` lists every built-in route factory, by the name of the
route it makes: the agent's LangGraph parts first (the live state's source),
then unsee's own files, then the sandbox. Importing a route module registers
nothing; this table is the order. Factories added with
:func:`~unsee.plugins.erasure.routes.register_route` come after the built-ins,
in registration order (``HomeRoute``, the scan of every file no route claims,
is added last by the eraser).
"""

from __future__ import annotations

from typing import Any

from . import routes_langgraph, routes_records, routes_sandbox
from .ports import ErasureContext
from .routes import Route, RouteFactory, registered_factories

#: (route name, factory), in erasure order
BUILTIN_ROUTES: tuple[tuple[str, RouteFactory], ...] = (
    ("langgraph.checkpoints", routes_langgraph.history_route),
    ("langgraph.store", routes_langgraph.store_route),
    ("unsee.records", routes_records.records_route),
    ("unsee.ledger", routes_records.ledger_route),
    ("exports", routes_records.exports_route),
    ("sandbox", routes_sandbox.sandbox_route),
)


def route_factories() -> list[RouteFactory]:
    """Every factory in erasure order: the built-ins in table order, then the registered ones
    in registration order (a built-in registered again is not run twice)."""
    builtin = [factory for _, factory in BUILTIN_ROUTES]
    return builtin + [f for f in registered_factories() if f not in builtin]


def build_routes(ctx: ErasureContext, agent: Any) -> list[Route]:
    """The routes that apply to this home and agent, in erasure order."""
    return [r for f in route_factories() if (r := f(ctx, agent)) is not None]
