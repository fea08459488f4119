"""The route conformance suite (``unsee.plugins.erasure.testing``) run on every built-in
route of ``BUILTIN_ROUTES`` and on a third-party route registered here, each on a real
home: a real agent on real SQLite files and a real sandbox, forgotten with its record kept
(``forget(erase=False)``), so the route holds copies for the suite to erase.

Also the registry itself: the built-in order is the table's, importing a route module
registers nothing, a registered factory comes after the built-ins and can be removed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest

from tests.support.erasure_agents import SECRET, TURNS, build, live, run
from unsee import RevocationEvent
from unsee.middleware.faults import fault_point
from unsee.plugins.erasure import (BUILTIN_ROUTES, Eraser, Route, RouteAudit, Scope, register_route,
                                   registered_route, route_factories, unregister_route)
from unsee.plugins.erasure.routes_builtin import build_routes
from unsee.plugins.erasure.testing import RouteCase, RouteConformance
from unsee.sandbox import environment_items, read_item, snapshot_item
from unsee.wiring import erasure_context

#: session t2 runs first, so it never reads t1's memories (the memory namespace is shared)
OTHER_TURNS = ["Hello, I'm Bo.", "Please look up T2.", "File it in my case.", "What is the status?"]


def cfg(thread: str) -> dict:
    return {"configurable": {"thread_id": thread}}


@dataclass
class Recorded:
    home: Path
    u: Any
    agent: Any
    close: Any
    event: RevocationEvent


def recorded_home(tmp_path: Path, turns=TURNS, *, forget: bool = True, prepare=None, **build_kw) -> Recorded:
    """t2, then t1 (``turns``) on a fresh home; with ``forget``, SECRET forgotten in t1 with its
    record kept (committed: the state is the counterfactual one, the old record still there)."""
    home = tmp_path / "home"
    home.mkdir()
    u, agent, close = build(home, **build_kw)
    if prepare is not None:
        prepare(u, agent)
    run(agent, "t2", OTHER_TURNS)
    run(agent, "t1", turns)
    event = RevocationEvent(target=SECRET)
    if forget:
        assert u.forget("t1", event, erase=False).committed
    u.flush()
    return Recorded(home, u, agent, close, event)


def builtin(name: str):
    return dict(BUILTIN_ROUTES)[name]


class BuiltinRoute(RouteConformance):
    """A built-in route of the table, on the erasure scenario of issue 12 (``erasure_agents``).
    Subclasses name the route and say what of t1 and t2 must survive its erase."""

    route_name: ClassVar[str]
    turns: ClassVar[list[str]] = TURNS
    build_kw: ClassVar[dict] = {}

    def prepare(self, u, agent) -> None:
        """Before the agent runs (e.g. set up the store)."""

    @pytest.fixture
    def recorded(self, tmp_path):
        rec = recorded_home(tmp_path, self.turns, prepare=self.prepare, **self.build_kw)
        yield rec
        rec.close()

    @pytest.fixture
    def route_case(self, recorded):
        return RouteCase(builtin(self.route_name), erasure_context(recorded.u), "t1", recorded.event,
                         kept_same=lambda: self.kept(recorded, "t1"), kept_other=lambda: self.kept(recorded, "t2"),
                         agent=recorded.agent, values=lambda: self.values(recorded))

    def kept(self, rec: Recorded, session: str) -> Any:
        raise NotImplementedError

    def values(self, rec: Recorded) -> Any:
        return None


# -- the built-in routes, in table order ----------------------------------------------------


def _history(agent, thread):
    return [(s.config["configurable"]["checkpoint_id"], repr(s.values), repr(s.metadata))
            for s in agent.get_state_history(cfg(thread))]


class TestCheckpointHistory(BuiltinRoute):
    route_name = "langgraph.checkpoints"
    crash_steps = ("erase:history:staged", "erase:history:swapping")

    def kept(self, rec, session):
        history = _history(rec.agent, session)
        if session == "t1":
            # the clean prefix (the first turn, before the forked one): the same values (the
            # rewrite marks the metadata of what it wrote, and the forked turn's input checkpoint
            # is the counterfactual suffix's first)
            history = sorted(values for _, values, _ in history if "look up T1" not in values)
        return live(rec.agent, session), history

    def values(self, rec):
        return _history(rec.agent, "t1"), _history(rec.agent, "t2")


class TestMemoryStore(BuiltinRoute):
    route_name = "langgraph.store"
    #: the target reaches the memory store in I(z) (a memory of the user's own words); the
    #: forget's commit rolls the item back, the old bytes stay in the store's WAL
    turns = ["Hello, I'm Dana.", f"remember that my card is {SECRET}", "What is the status?"]

    def prepare(self, u, agent):
        agent.store.inner.conn.execute("PRAGMA journal_mode=WAL")  # old pages outlive the rollback
        agent.store.inner.put(("mem", "bo"), "pref", {"text": "tea, no sugar"})  # another user's memory

    def _items(self, rec, namespace=()):
        return sorted((tuple(i.namespace), i.key, json.dumps(i.value))
                      for i in rec.agent.store.inner.search(namespace, limit=100))

    def kept(self, rec, session):
        return self._items(rec, ("mem", "dana") if session == "t1" else ("mem", "bo"))

    def values(self, rec):
        return self._items(rec)


class TestRecords(BuiltinRoute):
    route_name = "unsee.records"
    #: with make test's second pass (UNSEE_TEST_STORE=postgres) unsee's records are in PostgreSQL:
    #: the audit reads values there, and the commit already replaced them (as TestRecordsPostgres)
    plants_copies = os.environ.get("UNSEE_TEST_STORE") != "postgres"

    def kept(self, rec, session):
        return rec.u.store.contents(session)

    def values(self, rec):
        return [rec.u.store.contents(s) for s in ("t1", "t2")]


def _calls(rec, session=None):
    return [(c.call_id, c.session, c.tool, c.status, c.args_json, c.result_json, c.error)
            for c in rec.u.ledger.calls(session=session)]


class TestLedger(BuiltinRoute):
    route_name = "unsee.ledger"

    def kept(self, rec, session):
        # (a call that held the target keeps its fact, its text becomes {"erased": <keyed hash>})
        return [c for c in _calls(rec, session) if not any(SECRET in (t or "") or '{"erased"' in (t or "")
                                                           for t in c[4:])]

    def values(self, rec):
        return _calls(rec)


class TestExports(BuiltinRoute):
    """Spans exported as Jaeger JSON (outside the home) and over OTLP to a real receiver. Spans
    carry no payload by default, so this route holds no copy (it erases nothing by design)."""

    route_name = "exports"
    plants_copies = False

    @pytest.fixture
    def recorded(self, tmp_path, grpc_receiver):
        rec = recorded_home(tmp_path, self.turns)
        out = tmp_path / "exported"
        out.mkdir()
        for s in ("t1", "t2"):
            assert rec.u.export_jaeger_json(s, out / f"{s}.json") > 0
        receiver = grpc_receiver()
        assert rec.u.export_otlp("t1", f"grpc://127.0.0.1:{receiver.port}", timeout=5) == receiver.spans > 0
        rec.exported = out
        yield rec
        rec.close()

    def kept(self, rec, session):
        return (rec.exported / f"{session}.json").read_bytes()

    def values(self, rec):
        return (rec.home / "exports.jsonl").read_text()

    def test_otlp_export_is_named_unreachable(self, route_case):
        unreachable = route_case.route().unreachable()
        assert any("sent to grpc://127.0.0.1" in u and "no payload text" in u for u in unreachable), unreachable


def _stored(rec, session):
    """Every stored item of every environment the session owned, with its files."""
    out = {}
    for snap in rec.u.environments.environments_of(session):
        for item in environment_items(snap):
            out[item.describe()] = sorted(read_item(item))
    return out


class TestSandbox(BuiltinRoute):
    route_name = "sandbox"

    def kept(self, rec, session):
        env = rec.u.environments.env(session)
        initial = rec.u.environments.initial_snapshot(session)
        mine = env.read_file("case/notes.txt"), sorted(read_item(snapshot_item(initial)))
        # t1 keeps its live sandbox and its initial state; t2 keeps everything it stored
        return mine if session == "t1" else (mine, _stored(rec, session))

    def values(self, rec):
        return _stored(rec, "t1"), _stored(rec, "t2")


@pytest.mark.docker
class TestSandboxDocker(TestSandbox):
    """Snapshots as Docker images, the environments as containers (read in place or exported)."""

    build_kw = {"sandbox": "docker"}


# -- the same routes on PostgreSQL: LangGraph's PostgresSaver/PostgresStore and unsee's records in
# one database (build(pg_url=...)); the audit reads values in SQL (no file of the server's is read)


class OnPostgres:
    @pytest.fixture
    def recorded(self, tmp_path, pg_url):
        rec = recorded_home(tmp_path, self.turns, prepare=self.prepare, pg_url=pg_url)
        yield rec
        rec.close()


@pytest.mark.postgres
class TestCheckpointHistoryPostgres(OnPostgres, TestCheckpointHistory):
    pass


@pytest.mark.postgres
class TestMemoryStorePostgres(OnPostgres, TestMemoryStore):
    #: the forget's commit rolled the item back; what is left is dead tuples of the store's table,
    #: which no SQL reads (VACUUM FULL drops them; the server's WAL is named unreachable)
    plants_copies = False

    def prepare(self, u, agent):
        agent.store.inner.put(("mem", "bo"), "pref", {"text": "tea, no sugar"})


@pytest.mark.postgres
class TestLedgerPostgres(OnPostgres, TestLedger):
    """The ledger in the store's ``unsee.calls`` table (no ledger file: values audited)."""


@pytest.mark.postgres
class TestRecordsPostgres(OnPostgres, TestRecords):
    #: the commit replaced the session's rows; the scratch sessions' hold no copy either: what
    #: is left is dead tuples (VACUUM FULL drops them; the server's WAL is named unreachable)
    plants_copies = False


def test_every_builtin_route_runs_the_suite():
    tested = {cls.route_name for cls in globals().values()
              if isinstance(cls, type) and issubclass(cls, BuiltinRoute) and cls.__name__.startswith("Test")}
    assert tested == {name for name, _ in BUILTIN_ROUTES}


# -- a third-party route: notes in a JSON-lines file under the home ---------------------------

NOTES = "notes.jsonl"


class NotesRoute(Route):
    """Notes an app keeps beside the agent, one JSON object a line (``session``, ``text``)."""

    name = "app.notes"
    holds = "the app's notes about each session (notes.jsonl)"
    method = "notes of the session holding the target dropped (file rewritten, then renamed over the old one)"

    def __init__(self, path: Path):
        self.path = Path(path)
        self.staged = self.path.with_name(self.path.name + ".new")

    def _notes(self) -> list[dict]:
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines() if line.strip()]

    def files(self, scope: Scope | None = None) -> list[Path]:
        return [self.path, self.staged]

    def audit(self, scope: Scope) -> RouteAudit:
        out = self._audit()
        out.value_copies = sum(1 for n in self._notes() if n["session"] == scope.session and scope.holds(n["text"]))
        out.add_files([p for p in self.files() if p.exists()], scope)
        return out

    def erase(self, scope: Scope) -> list[str]:
        notes = self._notes()
        keep = [n for n in notes if not (n["session"] == scope.session and scope.holds(n["text"]))]
        self.staged.write_text("".join(json.dumps(n) + "\n" for n in keep))
        fault_point("erase:notes:staged")
        os.replace(self.staged, self.path)  # atomic: the old file or the new one, never half of each
        return [f"{len(notes) - len(keep)} notes dropped"]

    def unreachable(self) -> list[str]:
        return [f"copies of {self.path.name} other programs made (editors' swap files, backups)"]


def notes_route(ctx, agent):
    return NotesRoute(ctx.home / NOTES)


def plant_notes(home: Path) -> None:
    with open(home / NOTES, "w") as f:
        for session, text in [("t1", f"customer read out card {SECRET}"), ("t1", "prefers email"),
                              ("t2", "kettle leaks, replacement sent")]:
            f.write(json.dumps({"session": session, "text": text}) + "\n")


def notes_of(home: Path, session: str) -> list[str]:
    path = home / NOTES
    return [n["text"] for n in map(json.loads, path.read_text().splitlines())
            if n["session"] == session and SECRET not in n["text"]]


class TestThirdPartyRoute(RouteConformance):
    crash_steps = ("erase:notes:staged",)

    @pytest.fixture
    def route_case(self, tmp_path):
        # the agent never saw the card: only the app's notes hold it (the session's records are free of it)
        rec = recorded_home(tmp_path, ["Hello, I'm Dana.", "What is the status?"], forget=False)
        plant_notes(rec.home)
        register_route(notes_route)
        try:
            yield RouteCase(notes_route, erasure_context(rec.u), "t1", rec.event,
                            kept_same=lambda: notes_of(rec.home, "t1"), kept_other=lambda: notes_of(rec.home, "t2"),
                            agent=rec.agent, values=lambda: (rec.home / NOTES).read_text())
        finally:
            unregister_route(notes_route)
            rec.close()


def test_a_route_not_registered_is_still_audited_as_other_files(tmp_path):
    """Unregistered, the notes file is caught by the home scan; registered, it is the route's; and
    the eraser's erase and receipt carry it, after every built-in route."""
    rec = recorded_home(tmp_path, ["Hello, I'm Dana.", "What is the status?"], forget=False)
    try:
        plant_notes(rec.home)
        eraser = Eraser(erasure_context(rec.u))
        unregistered = eraser.audit("t1", SECRET, agent=rec.agent)
        assert "app.notes" not in [r.route for r in unregistered.routes]
        home = next(r for r in unregistered.routes if r.route == "home.other-files")
        assert home.byte_copies == {str(rec.home / NOTES): 1}
        with registered_route(notes_route):
            result = eraser.erase("t1", rec.event, agent=rec.agent)
        assert notes_route not in route_factories()
        names = [r.name for r in result.receipt.routes]
        assert names == [*(n for n, _ in BUILTIN_ROUTES), "app.notes", "home.other-files"]
        notes = next(r for r in result.receipt.routes if r.name == "app.notes")
        assert notes.copies_before == 1 and notes.copies_after == 0 and "1 notes dropped" in notes.notes
        assert result.clean and notes_of(rec.home, "t1") == ["prefers email"]
    finally:
        rec.close()


# -- the registry ----------------------------------------------------------------------------


def test_builtin_routes_are_a_table_in_erasure_order(tmp_path):
    assert [name for name, _ in BUILTIN_ROUTES] == [
        "langgraph.checkpoints", "langgraph.store", "unsee.records", "unsee.ledger", "exports", "sandbox"]
    assert route_factories()[:len(BUILTIN_ROUTES)] == [f for _, f in BUILTIN_ROUTES]
    rec = recorded_home(tmp_path, ["Hello, I'm Dana.", "Please look up T1."], forget=False)
    try:
        ctx = erasure_context(rec.u)
        for name, factory in BUILTIN_ROUTES:  # each entry makes the route it is named after
            assert factory(ctx, rec.agent).name == name
        assert [r.name for r in build_routes(ctx, rec.agent)] == [n for n, _ in BUILTIN_ROUTES]
    finally:
        rec.close()


def test_register_route_comes_after_the_builtins_and_can_be_removed():
    def first(ctx, agent):
        return None

    def second(ctx, agent):
        return None

    builtins = [f for _, f in BUILTIN_ROUTES]
    assert register_route(second) is second  # usable as a decorator
    try:
        register_route(first)
        register_route(second)  # idempotent: keeps its place
        register_route(builtins[0])  # a built-in registered again is not run twice
        assert route_factories() == [*builtins, second, first]
    finally:
        assert unregister_route(first) and unregister_route(second)
        unregister_route(builtins[0])
    assert not unregister_route(first)
    assert route_factories() == builtins
    with registered_route(first) as f:
        assert f is first and route_factories()[-1] is first
        with registered_route(first):  # nested: the outer block still owns it
            pass
        assert route_factories()[-1] is first
    assert route_factories() == builtins
    with pytest.raises(TypeError):
        register_route("not a factory")


def test_importing_registers_nothing_and_not_the_suite():
    """Route modules have no import side effect (the table is the order), and importing the face or
    the eraser never imports the conformance suite (nor pytest)."""
    code = ("import sys\n"
            "from unsee.plugins.erasure import Eraser, routes, routes_langgraph, routes_records, routes_sandbox\n"
            "from unsee.plugins.erasure.routes import registered_factories\n"
            "print(registered_factories(), 'unsee.plugins.erasure.testing' in sys.modules, 'pytest' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=tempfile.gettempdir()).stdout
    assert out.split() == ["[]", "False", "False"]
