"""The conformance suite every erasure route passes, third-party ones included.

Needs pytest, a dev dependency (``pip install 'unsee[dev]'``); importing
``unsee.plugins.erasure`` never imports this module. Subclass
:class:`RouteConformance` in a test module and provide a ``route_case``
fixture: a :class:`RouteCase` whose route holds copies of a target for a
recorded session, on real files (inspect_ai / pytest style, like
``unsee.sandbox.testing.EnvironmentConformance``)::

    import pytest
    from unsee import RevocationEvent, Unsee
    from unsee.plugins.erasure import register_route, unregister_route
    from unsee.plugins.erasure.testing import RouteCase, RouteConformance
    from unsee.wiring import erasure_context

    def notes_route(ctx, agent):            # your factory: (ErasureContext, agent) -> Route | None
        return NotesRoute(ctx.home / "notes.jsonl")

    class TestNotes(RouteConformance):
        crash_steps = ("erase:notes:staged",)   # the fault points inside your erase, if any

        @pytest.fixture
        def route_case(self, tmp_path):
            u = Unsee(home=tmp_path)
            ...                                  # run an agent on session "t1" and "t2", plant the notes
            register_route(notes_route)
            yield RouteCase(notes_route, erasure_context(u), "t1", RevocationEvent(target="4417-2231"),
                            kept_same=lambda: notes_of("t1", without="4417-2231"),
                            kept_other=lambda: notes_of("t2"))
            unregister_route(notes_route)
            u.close()

(``pytest.register_assert_rewrite("unsee.plugins.erasure.testing")`` in the
``conftest.py``, before the import, gives detailed assertion messages.)

What the suite checks of a route (the contract of ``routes.Route``):

- it names itself: ``name``, ``holds``, ``method`` are non-empty, and
  ``unreachable()`` is a list of non-empty sentences;
- ``audit`` finds the planted copies, and changes nothing: the bytes of the
  route's files (SQLite files read in a child process, as the audit does) and
  the case's ``values()`` are the same after it;
- after ``erase``, ``audit`` finds no copy (bytes and values); ``erase`` again
  succeeds and still leaves none (idempotent);
- an erasure interrupted part-way is finished by a rerun: a crash is injected
  (``unsee.middleware.faults.crash_at``) before the route's step of an
  :class:`~unsee.plugins.erasure.Eraser` run (``erase:<route name>``), at each
  of the route's own fault points (``crash_steps``), and after every route
  erased but before the audit and the receipt; the rerun ends with no copy;
- the route is in the eraser's audit, its results and its receipt (the suite
  registers the case's factory for that test; a built-in one is already there),
  and the files it claims are not counted again as ``home.other-files``;
- what is not the target survives: ``kept_same()`` (records of the session that
  do not hold the target) and ``kept_other()`` (records of another session) are
  non-empty and equal before and after the erase.

A route that holds no copy by construction (e.g. ``exports`` when spans carry
no payload) sets ``plants_copies = False``: the suite then checks it holds none.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest

from unsee.middleware.errors import InjectedCrash
from unsee.middleware.faults import crash_at

from .eraser import AuditReport, Eraser, HomeRoute
from .forms import target_forms
from .isolated import is_sqlite_family, scan_isolated
from .ports import ErasureContext
from .routes import Route, RouteAudit, RouteFactory, Scope, registered_route
from .scan import sha256_file

__all__ = ["RouteCase", "RouteConformance", "file_digests"]

#: placeholders of the crash steps every route is tested at (resolved with the route's name)
BEFORE, AFTER = "before-route", "after-every-route"


@dataclass(frozen=True)
class RouteCase:
    """A route's factory over a home whose route holds copies of ``event.target`` for ``session``.

    ``ctx`` is the home's real :class:`ErasureContext` (``session`` recorded there, its live
    records free of the target: erasure follows a forget); ``event`` has ``target`` and
    ``event_id`` (a ``RevocationEvent``). ``kept_same``/``kept_other`` return what must survive
    the erase (records of ``session`` without the target / of another session): anything
    comparable with ``==``. ``values`` returns what the route's owner shows through its API
    (compared before and after an audit; None: the files' bytes only)."""

    factory: RouteFactory
    ctx: ErasureContext
    session: str
    event: Any
    kept_same: Callable[[], Any]
    kept_other: Callable[[], Any]
    agent: Any = None
    values: Callable[[], Any] | None = None

    @property
    def target(self) -> str:
        return self.event.target

    def route(self) -> Route:
        """A fresh route from the factory (as each erasure builds its own)."""
        route = self.factory(self.ctx, self.agent)
        assert route is not None, f"{self.factory!r} made no route for this case (it does not apply)"
        return route

    def scope(self) -> Scope:
        return Scope(self.session, self.target, target_forms(self.target), self.event.event_id)

    def eraser(self) -> Eraser:
        return Eraser(self.ctx)


def file_digests(paths: list[Path], target: str) -> dict[str, str]:
    """SHA-256 of every file in ``paths`` (directories walked); SQLite files digested in a child
    process, so this process's connections keep their locks (``isolated.py``). A ``-shm`` file is
    left out: it is SQLite's shared WAL index, where every reader (the saver's own API included)
    writes its read marks; it holds no record."""
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            files += sorted(Path(root) / f for root, _, names in os.walk(p) for f in names)
        elif p.is_file():
            files.append(p)
    files = [p for p in files if not str(p).endswith("-shm")]
    lite = [str(p) for p in files if is_sqlite_family(p)]
    out = {p: hit["sha256"] for p, hit in scan_isolated(lite, target, digests=True).items()}
    out.update({str(p): sha256_file(p) for p in files if str(p) not in out and p.is_file()})
    return out


def _found(audit: RouteAudit) -> tuple[dict[str, int], int, int]:
    """What an audit found, for comparing two audits."""
    return {k: v for k, v in audit.byte_copies.items() if v}, audit.value_copies, audit.source_copies


def _clean(audit: RouteAudit) -> bool:
    return sum(audit.byte_copies.values()) == 0 and audit.value_copies == 0


def _row(report: AuditReport, name: str) -> RouteAudit:
    rows = [r for r in report.routes if r.route == name]
    assert len(rows) == 1, (f"route {name!r} is {len(rows)} times in the eraser's audit: "
                            f"{[r.route for r in report.routes]}")
    return rows[0]


class RouteConformance:
    """The suite. Subclasses provide the ``route_case`` fixture (a :class:`RouteCase`)."""

    #: the fault points inside the route's ``erase`` (``fault_point(name)``), each tested
    crash_steps: ClassVar[tuple[str, ...]] = ()
    #: the case's route holds copies before the erase (False: a route that holds none by construction)
    plants_copies: ClassVar[bool] = True

    @pytest.fixture
    def route_case(self) -> RouteCase:
        raise NotImplementedError(f"{type(self).__name__} must provide a `route_case` fixture")

    def pytest_generate_tests(self, metafunc):
        if "crash_step" in metafunc.fixturenames:
            metafunc.parametrize("crash_step", [BEFORE, *self.crash_steps, AFTER])

    # -- what it is -------------------------------------------------------------

    def test_names_what_it_holds_and_cannot_reach(self, route_case):
        route = route_case.route()
        for attr in ("name", "holds", "method"):
            value = getattr(route, attr, None)
            assert isinstance(value, str) and value.strip(), f"{type(route).__name__}.{attr} must be a non-empty str"
        unreachable = route.unreachable()
        assert isinstance(unreachable, list), "unreachable() returns a list of sentences"
        assert all(isinstance(u, str) and u.strip() for u in unreachable), unreachable
        files = route.files(route_case.scope())
        assert isinstance(files, list) and all(isinstance(p, (str, os.PathLike)) for p in files), files

    # -- audit -------------------------------------------------------------------

    def test_audit_finds_the_planted_copies(self, route_case):
        audit = route_case.route().audit(route_case.scope())
        assert isinstance(audit, RouteAudit) and audit.route == route_case.route().name
        if self.plants_copies:
            assert audit.copies > 0, f"the case planted no copy the audit finds: {audit}"
        else:
            assert _clean(audit), f"{audit.route} holds no copy by construction, found: {audit}"

    def test_audit_changes_nothing(self, route_case):
        route, scope = route_case.route(), route_case.scope()
        files = route.files(scope)
        before = file_digests(files, scope.target), route_case.values() if route_case.values else None
        first = route.audit(scope)
        second = route_case.route().audit(route_case.scope())
        after = file_digests(files, scope.target), route_case.values() if route_case.values else None
        assert after[0] == before[0], "an audit changed the route's files"
        assert after[1] == before[1], "an audit changed what the route's owner holds"
        assert _found(first) == _found(second), "two audits of an unchanged route disagree"

    # -- erase -------------------------------------------------------------------

    def test_erase_leaves_no_copy(self, route_case):
        route, scope = route_case.route(), route_case.scope()
        notes = route.erase(scope)
        assert isinstance(notes, list) and all(isinstance(n, str) for n in notes), notes
        after = route_case.route().audit(route_case.scope())
        assert _clean(after), f"copies left after erase: {after}"

    def test_erase_is_idempotent(self, route_case):
        route, scope = route_case.route(), route_case.scope()
        route.erase(scope)
        again = route.erase(scope)  # the same route object, then a fresh one (a rerun)
        assert isinstance(again, list)
        assert isinstance(route_case.route().erase(route_case.scope()), list)
        after = route_case.route().audit(route_case.scope())
        assert _clean(after), f"copies left after a second erase: {after}"

    def test_erase_keeps_what_is_not_the_target(self, route_case):
        same, other = route_case.kept_same(), route_case.kept_other()
        assert same, "the case must plant a record of the session that does not hold the target"
        assert other, "the case must plant a record of another session"
        route_case.route().erase(route_case.scope())
        assert route_case.kept_same() == same, "the erase lost a record of the session without the target"
        assert route_case.kept_other() == other, "the erase changed another session's records"

    # -- through the eraser --------------------------------------------------------

    def test_crash_part_way_is_finished_by_a_rerun(self, route_case, crash_step):
        name = route_case.route().name
        step = {BEFORE: f"erase:{name}", AFTER: f"erase:{HomeRoute.name}"}.get(crash_step, crash_step)
        same, other = route_case.kept_same(), route_case.kept_other()
        eraser = route_case.eraser()
        with registered_route(route_case.factory):
            with crash_at(step), pytest.raises(InjectedCrash):
                eraser.erase(route_case.session, route_case.event, agent=route_case.agent)
            result = route_case.eraser().erase(route_case.session, route_case.event, agent=route_case.agent)
        row = _row(result.after, name)
        assert _clean(row), f"the rerun after a crash at {step} left copies on {name}: {row}"
        assert _clean(route_case.route().audit(route_case.scope()))
        assert route_case.kept_same() == same and route_case.kept_other() == other

    def test_eraser_audits_erases_and_signs_the_route(self, route_case):
        route, scope = route_case.route(), route_case.scope()
        direct = route.audit(scope)
        eraser = route_case.eraser()
        with registered_route(route_case.factory):
            before = eraser.audit(route_case.session, route_case.target, agent=route_case.agent)
            result = eraser.erase(route_case.session, route_case.event, agent=route_case.agent)
        row = _row(before, route.name)
        assert row.copies == direct.copies and row.value_copies == direct.value_copies, (row, direct)
        assert all(u in before.unreachable for u in route.unreachable())
        claimed = {Path(p).resolve() for p in route.files(scope)}
        home = _row(before, HomeRoute.name)
        counted_twice = [p for p in home.byte_copies
                         if (rp := Path(p).resolve()) in claimed or claimed & set(rp.parents)]
        assert not counted_twice, f"files of {route.name} also counted as {HomeRoute.name}: {counted_twice}"
        assert route.name in result.notes
        assert _clean(_row(result.after, route.name))
        receipt = {r.name: r for r in result.receipt.routes}
        assert route.name in receipt, f"{route.name} is not in the receipt: {sorted(receipt)}"
        signed = receipt[route.name]
        assert signed.method == route.method and signed.copies_before == row.copies
        assert signed.copies_after == 0 and signed.value_copies_after == 0
        if self.plants_copies:
            assert signed.copies_before > 0
