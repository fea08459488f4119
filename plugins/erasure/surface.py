"""The rollback surface of a deployment: a three-question test as data.

The article "LangGraph Compaction Deletes the View, Not the Record" tests any agent runtime for
Retention Inversion with three questions:

1. What object does each deletion primitive actually act on (not what it is
   named: what it mutates)?
2. Is that object inside the recovery boundary (the checkpoint history a
   restore, a fork or time travel brings back)? If so, a restore undoes it.
3. Is there a second store outside the boundary the deletion never reaches?
   If so, it keeps what no thread operation can remove.

:func:`build_report` answers them from the routes an agent and its unsee home
write (``routes_builtin.build_routes``, the same list an erasure walks) and a
table of what each primitive mutates on each built-in route (:data:`EFFECTS`).
It is pure: the eraser's :meth:`~.eraser.Eraser.surface` gathers the routes,
the primitives the agent's parts offer and, given a marker, each route's copies
of it (a byte-level audit of every session), and calls it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Literal

from pydantic import BaseModel, Field, computed_field

Boundary = Literal["inside", "outside", "unknown"]

#: route name -> (side of LangGraph's recovery boundary, what restores it)
BOUNDARY: dict[str, tuple[Boundary, str]] = {
    "langgraph.checkpoints": ("inside", "LangGraph: time travel, update_state on an old checkpoint or a fork "
                                        "restores any checkpoint's state"),
    "langgraph.store": ("outside", "nothing: cross-thread memory, not versioned; a write stays until deleted"),
    "unsee.records": ("outside", "nothing (unsee's own record of what the agent saw; a forget plans from it)"),
    "unsee.ledger": ("outside", "nothing: by design (a fired side effect is never fired twice)"),
    "exports": ("outside", "nothing: spans already sent to collectors or written as files"),
    "sandbox": ("outside", "not LangGraph: unsee's snapshots restore a sandbox to a checkpoint during a replay"),
    "home.other-files": ("outside", "nothing (files under the home no route claims)"),
}

UNTOUCHED = "untouched"

#: primitive -> (how it is called, route name -> what it mutates there; a route not named: untouched)
EFFECTS: dict[str, tuple[str, dict[str, str]]] = {
    "delete_thread": ("checkpointer.delete_thread(thread_id)", {
        "langgraph.checkpoints": "the thread's rows deleted; their bytes stay in the WAL and free pages (SQLite) or "
                                 "as dead tuples (PostgreSQL) until a VACUUM; nothing says what was there",
    }),
    "RemoveMessage": ("agent.update_state(config, {'messages': [RemoveMessage(id)]})", {
        "langgraph.checkpoints": "a NEW checkpoint without the message: every earlier checkpoint still holds it, "
                                 "and a restore from one brings it back",
    }),
    "store.delete": ("store.delete(namespace, key)", {
        "langgraph.store": "the item deleted; its bytes stay in the WAL and free pages (SQLite) or as dead "
                           "tuples (PostgreSQL) until a VACUUM",
    }),
    "u.forget": ("u.forget(thread_id, RevocationEvent(target=...), agent=agent)", {
        "langgraph.checkpoints": "the live state becomes the counterfactual (the target never seen); with erase "
                                 "(the default) the history is rewritten as clean prefix + counterfactual suffix",
        "langgraph.store": "items written because of the target rolled back",
        "unsee.records": "replaced by the counterfactual; with erase, leftover texts cleaned and vacuumed",
        "unsee.ledger": "with erase, texts holding the target replaced by keyed hashes (the facts kept)",
        "sandbox": "restored to its snapshot before the target; with erase, the later snapshots deleted",
        "exports": "not reached: spans already exported stay (Jaeger JSON files are audited)",
    }),
    "u.erase": ("u.erase(thread_id, event, agent=agent)", {}),  # every route: its own method (below)
    "u.erase_subject": ("u.erase_subject(threads=[...], namespaces=[...], targets=[...])", {
        "langgraph.checkpoints": "the subject's threads deleted whole (scratch and stage threads too), bytes "
                                 "scrubbed; encrypted histories: every key of those threads destroyed",
        "langgraph.store": "the subject's namespaces deleted (atomically against recorded puts), bytes scrubbed",
        "unsee.records": "those sessions' provenance and vault texts dropped",
        "unsee.ledger": "those sessions' texts replaced by keyed hashes (the facts kept)",
        "sandbox": "those sessions' snapshots and environments deleted",
        "exports": "trace files of those sessions deleted; OTLP receivers named as unreachable",
    }),
    "u.retention": ("u.retention(thread_id, 'semantic' | 'latest' | RetentionPolicy(...), agent=agent)", {
        "langgraph.checkpoints": "checkpoints the policy drops deleted and their bytes scrubbed; what a kept "
                                 "checkpoint holds stays",
    }),
}

#: the primitives whose erasure every route states itself (``Route.method``)
ROUTE_METHOD = ("u.erase",)


class RouteSurface(BaseModel):
    """One route: what it holds, which side of the recovery boundary, and (with a marker) its copies."""

    name: str
    holds: str
    boundary: Boundary
    restored_by: str
    #: how unsee's erasure reaches it (the route's own ``method``)
    erased_by: str
    files: list[str] = Field(default_factory=list)
    #: copies of the marker found now (None: no marker asked); per owner in ``copies_by_session``
    marker_copies: int | None = None
    copies_by_session: dict[str, int] = Field(default_factory=dict)


class PrimitiveSurface(BaseModel):
    """One deletion primitive: what it mutates on each route (question 1), whether a restore
    undoes it (question 2), and the routes outside the boundary it never reaches (question 3)."""

    name: str
    call: str
    available: bool
    why_not: str | None = None
    #: route name -> what the primitive mutates there ("untouched")
    mutates: dict[str, str]
    #: it acts on the checkpoint history only through new checkpoints: a restore undoes it
    undone_by_restore: bool
    #: routes outside the boundary it leaves as they are
    never_reaches: list[str]


class SurfaceReport(BaseModel):
    """The three questions answered for one agent and unsee home (``unsee surface``)."""

    home: str
    agent: str | None
    routes: list[RouteSurface]
    primitives: list[PrimitiveSurface]
    #: what no route of this project reaches (the eraser's OUTSIDE list and the routes' own)
    unreachable: list[str] = Field(default_factory=list)
    #: a marker was audited (its text is never stored here)
    marker: bool = False

    @computed_field  # (in the JSON too)
    @property
    def inversion(self) -> list[str]:
        """The article's Retention Inversion, primitive by primitive: an available primitive that acts
        only on state inside the recovery boundary while a route outside it exists, which that
        deletion never reaches."""
        inside = {r.name for r in self.routes if r.boundary == "inside"}
        return [p.name for p in self.primitives if p.available and p.never_reaches
                and any(p.mutates.get(n, UNTOUCHED) != UNTOUCHED for n in inside)
                and all(n in inside for n, what in p.mutates.items() if what != UNTOUCHED)]


def build_report(*, home: str, agent: str | None, routes: Sequence[tuple[str, str, str, list[str]]],
                 available: Mapping[str, str | None], copies: Mapping[str, Mapping[str, int]] | None = None,
                 unreachable: Iterable[str] = ()) -> SurfaceReport:
    """The report for ``routes`` ((name, holds, method, files) in erasure order).

    ``available``: primitive name -> None when the deployment offers it, else why not
    (primitives not named are unavailable: "not offered"). ``copies``: route name ->
    {owner: copies} of the marker (None: no marker asked); owners are session ids or
    ``"(no session)"``."""
    names = [r[0] for r in routes]
    out_routes = []
    for name, holds, method, files in routes:
        side, restored = BOUNDARY.get(name, ("unknown", "not known: a route registered by the application"))
        got = None if copies is None else dict(copies.get(name, {}))
        out_routes.append(RouteSurface(
            name=name, holds=holds, boundary=side, restored_by=restored, erased_by=method, files=list(files),
            marker_copies=None if got is None else sum(got.values()),
            copies_by_session={k: v for k, v in sorted((got or {}).items()) if v}))
    method_of = {r[0]: r[2] for r in routes}
    outside = [n for n in names if BOUNDARY.get(n, ("unknown",))[0] != "inside"]
    prims = []
    for prim, (call, effects) in EFFECTS.items():
        if prim in ROUTE_METHOD:
            mutates = {n: method_of[n] for n in names}
        else:
            mutates = {n: effects.get(n, UNTOUCHED) for n in names}
        reached = {n for n, what in mutates.items() if what != UNTOUCHED and not what.startswith("not reached")
                   and not what.startswith("not erased")}
        why = available.get(prim, "not offered") if prim in available else "not offered"
        prims.append(PrimitiveSurface(
            name=prim, call=call, available=why is None, why_not=why, mutates=mutates,
            undone_by_restore=prim == "RemoveMessage",
            never_reaches=[n for n in outside if n not in reached and n != "home.other-files"]))
    return SurfaceReport(home=home, agent=agent, routes=out_routes, primitives=prims,
                         unreachable=list(dict.fromkeys(unreachable)), marker=copies is not None)
