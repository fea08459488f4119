"""The conformance suite every checkpointer driver runs (``unsee.middleware.checkpointers``).

Each saver below gets the same threads written through LangGraph (a graph with a
list channel and a counter; three turns on the session's thread, one on a scratch
thread, one on another session's), then each operation of its driver is checked
against the saver API's view of them: thread ids, has_checkpoint, parent ids,
in-place re-encoding, delete_thread, the file and connection it names, the
capabilities it claims. An async saver is built and written on a loop of its own
thread, and its driver is used from this one (as unsee uses it). Plus the typed
refusal for a saver class no driver serves and ``register_driver`` for a new one.

Each saver is made by its driver's factory (``open_saver`` / ``aopen_saver``), so the
factories are checked too. Add a saver: one driver in the package, one line in ``SAVERS``.
"""

from __future__ import annotations

import asyncio
import operator
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from unsee.middleware.checkpointers import (CheckpointerDriver, GenericDriver, NoCheckpointerDriver, aopen_saver,
                                            driver_for, driver_or_generic, open_saver, register_driver,
                                            registered_drivers, unregister_driver)
from unsee.middleware.errors import InvalidArgument, UnseeError

T, SCRATCH, OTHER = "s1", "s1~cf-0001", "s2"


class State(TypedDict):
    items: Annotated[list, operator.add]
    n: int


def _graph(saver: Any):
    g = StateGraph(State)
    g.add_node("step", lambda s: {"items": [f"item {len(s['items'])}"], "n": s.get("n", 0) + 1})
    g.add_edge(START, "step")
    g.add_edge("step", END)
    return g.compile(checkpointer=saver)


def _cfg(thread: str) -> dict:
    return {"configurable": {"thread_id": thread}}


TURNS = ((T, 3), (SCRATCH, 1), (OTHER, 1))


class _Loop:
    """An event loop on a thread of its own (an async saver's home)."""

    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=60)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


@dataclass
class Case:
    saver: Any
    kind: str
    file: Path | None
    #: (sql_rewritable, rows_readable, reencrypts, async_only)
    claims: tuple[bool, bool, bool, bool]
    run_async: Callable[[Any], Any] | None = None  # runs a coroutine where the saver lives


def _write(case: Case) -> None:
    graph = _graph(case.saver)
    for thread, turns in TURNS:
        for _ in range(turns):
            if case.run_async is None:
                graph.invoke({"items": ["hello"]}, _cfg(thread))
            else:
                case.run_async(graph.ainvoke({"items": ["hello"]}, _cfg(thread)))


@contextmanager
def _opened(kind: str, where: Any, file: Path | None, claims: tuple[bool, bool, bool, bool]) -> Iterator[Case]:
    saver, close = open_saver(kind, where)
    try:
        yield Case(saver, kind, file, claims)
    finally:
        close()


@contextmanager
def _opened_on_a_loop(kind: str, where: Any, file: Path | None,
                      claims: tuple[bool, bool, bool, bool]) -> Iterator[Case]:
    home = _Loop()
    saver, close = home.run(aopen_saver(kind, where))
    try:
        yield Case(saver, kind, file, claims, home.run)
    finally:
        home.run(close())
        home.close()


def _memory(tmp_path: Path, pg_url: str | None):
    return _opened("memory", None, None, (False, True, True, False))


def _sqlite(tmp_path: Path, pg_url: str | None):
    return _opened("sqlite", tmp_path / "lg.sqlite", tmp_path / "lg.sqlite", (True, True, False, False))


def _async_sqlite(tmp_path: Path, pg_url: str | None):
    path = tmp_path / "lg-async.sqlite"
    return _opened_on_a_loop("async-sqlite", path, path, (False, False, False, False))


def _postgres(tmp_path: Path, pg_url: str | None):
    return _opened("postgres", pg_url, None, (True, True, True, False))


def _async_postgres(tmp_path: Path, pg_url: str | None):
    return _opened_on_a_loop("async-postgres", pg_url, None, (False, False, True, True))


PG = pytest.mark.postgres
SAVERS = [
    pytest.param(_memory, id="memory"),
    pytest.param(_sqlite, id="sqlite-file"),
    pytest.param(_async_sqlite, id="async-sqlite"),
    pytest.param(_postgres, id="postgres", marks=PG),
    pytest.param(_async_postgres, id="async-postgres", marks=PG),
]


@pytest.fixture(params=SAVERS)
def case(request, tmp_path) -> Iterator[Case]:
    pg_url = request.getfixturevalue("pg_url") if "postgres" in request.node.keywords else None
    with request.param(tmp_path, pg_url) as c:
        _write(c)
        yield c


# -- the saver API's view --------------------------------------------------------------------------


def _api_threads(saver: Any) -> set[str]:
    return {t.config["configurable"]["thread_id"] for t in saver.list(None)}


def _api_root(saver: Any, thread: str) -> list[Any]:
    return [t for t in saver.list(_cfg(thread)) if not t.config["configurable"].get("checkpoint_ns")]


def _api_parents(saver: Any, thread: str) -> dict[str, str | None]:
    return {t.config["configurable"]["checkpoint_id"]:
            ((t.parent_config or {}).get("configurable") or {}).get("checkpoint_id") for t in _api_root(saver, thread)}


def _api_values(saver: Any, thread: str) -> list[tuple[str, Any, Any]]:
    return [(t.config["configurable"]["checkpoint_id"], t.checkpoint["channel_values"], t.pending_writes)
            for t in _api_root(saver, thread)]


# -- the suite -------------------------------------------------------------------------------------


def test_the_registry_finds_the_driver_of_the_kind_it_opened(case):
    driver = driver_for(case.saver)
    assert driver.kind == case.kind and driver.saver is case.saver
    assert type(driver).handles(case.saver) and driver.exact()
    assert driver_or_generic(case.saver).kind == case.kind
    assert driver.engine in ("memory", "sqlite", "postgres")


def test_it_claims_what_it_does(case):
    d = driver_for(case.saver)
    assert (d.sql_rewritable(), d.rows_readable(), d.reencrypts(), d.async_only) == case.claims


def test_thread_ids_are_the_api_s(case):
    ids = driver_for(case.saver).thread_ids()
    every = _api_threads(case.saver)
    assert every == {T, SCRATCH, OTHER}
    if ids is not None:
        assert ids == sorted(every)
        assert driver_for(case.saver).thread_ids(T + "~cf-") == [SCRATCH]
        assert driver_for(case.saver).thread_ids("nobody") == []


def test_has_checkpoint_is_the_api_s(case):
    d = driver_for(case.saver)
    for t in _api_root(case.saver, T):
        answer = d.has_checkpoint(T, t.config["configurable"]["checkpoint_id"])
        assert answer in (None, True)
    some = _api_root(case.saver, T)[0].config["configurable"]["checkpoint_id"]
    assert d.has_checkpoint(T, "1f0-not-a-checkpoint") in (None, False)
    assert d.has_checkpoint("nobody", some) in (None, False)
    assert d.has_checkpoint(OTHER, some) in (None, False)


def test_parent_ids_are_the_api_s(case):
    parents = driver_for(case.saver).parent_ids(T)
    if parents is not None:
        assert parents == _api_parents(case.saver, T)
        assert len(parents) >= 3
    assert driver_for(case.saver).parent_ids("nobody") in (None, {})


def test_storage_access(case):
    d = driver_for(case.saver)
    found = d.database_file()
    assert (found.resolve() if found else None) == (case.file.resolve() if case.file else None)
    assert (d.connection is None) == (case.kind == "memory")
    with d.locked():
        pass  # (a context manager whatever the saver's lock)


def test_reencrypt_keeps_the_api_s_view(case):
    d = driver_for(case.saver)
    if not d.reencrypts():
        with pytest.raises(NotImplementedError):
            d.reencrypt(T, lambda t, b: None, "+x:")
        return
    before = {t: _api_values(case.saver, t) for t in (T, OTHER)}
    seen: list[str] = []

    def same(typ: str, data: bytes):  # every value of ours the storage offers, written back as it was
        seen.append(typ)
        return (typ, bytes(data)) if "msgpack" in typ else None

    n = d.reencrypt(T, same, "msgpack")
    assert n > 0 and seen
    assert d.reencrypt(T, lambda t, b: None, "msgpack") == 0
    assert {t: _api_values(case.saver, t) for t in (T, OTHER)} == before

    def fail(typ: str, data: bytes):
        raise ValueError("a value that cannot be converted")

    with pytest.raises(ValueError):
        d.reencrypt(T, fail, "msgpack")
    assert {t: _api_values(case.saver, t) for t in (T, OTHER)} == before  # nothing changed


def test_on_loop_runs_where_the_storage_is(case):
    d = driver_for(case.saver)
    if not d.async_only:
        return
    got = d.on_loop(case.saver.aget_tuple(_cfg(T)))
    assert got.config["configurable"]["checkpoint_id"] == _api_root(case.saver, T)[0].config["configurable"][
        "checkpoint_id"]


def test_delete_thread_leaves_the_others(case):
    d = driver_for(case.saver)
    others = {t: _api_values(case.saver, t) for t in (OTHER, SCRATCH)}
    d.delete_thread(T)
    assert _api_root(case.saver, T) == []
    assert {t: _api_values(case.saver, t) for t in (OTHER, SCRATCH)} == others
    ids = d.thread_ids()
    assert ids is None or ids == sorted(_api_threads(case.saver)) == sorted([OTHER, SCRATCH])


# -- plainness: a subclass storing or reading its own way goes through the API -----------------------


def test_a_subclass_reading_its_own_way_is_answered_through_the_api(tmp_path):
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.checkpoint.sqlite import SqliteSaver

    class Reading(InMemorySaver):
        def get_tuple(self, config):
            return super().get_tuple(config)

        def list(self, config, **kw):
            return super().list(config, **kw)

    saver = Reading()
    _graph(saver).invoke({"items": ["x"]}, _cfg(T))
    d = driver_for(saver)
    assert d.kind == "memory" and not d.exact()
    assert d.has_checkpoint(T, "x") is None and d.parent_ids(T) is None and not d.rows_readable()
    assert d.thread_ids() == [T]  # (the dict's keys: a subclass keeps them)

    conn = sqlite3.connect(tmp_path / "sub.sqlite", check_same_thread=False)

    class Sub(SqliteSaver):
        pass

    sub = Sub(conn)
    _graph(sub).invoke({"items": ["x"]}, _cfg(T))
    d = driver_for(sub)
    assert d.kind == "sqlite" and d.parent_ids(T) is None  # (exactly SqliteSaver only)
    assert d.has_checkpoint(T, "x") is False and d.sql_rewritable()
    conn.close()


# -- the registry --------------------------------------------------------------------------------------


class _Custom(BaseCheckpointSaver):
    """A saver no driver of unsee's serves."""

    def __init__(self):
        super().__init__()
        self.rows: dict[str, list[str]] = {"a": ["1"], "b": ["2"]}


def test_a_saver_without_a_driver_is_refused_typed_and_falls_back_to_the_api():
    saver = _Custom()
    with pytest.raises(NoCheckpointerDriver, match="_Custom") as e:
        driver_for(saver)
    assert isinstance(e.value, UnseeError) and isinstance(e.value, TypeError) and e.value.saver_type is _Custom
    generic = driver_or_generic(saver)
    assert isinstance(generic, GenericDriver) and generic.kind == "generic" and generic.engine is None
    assert generic.thread_ids() is None and generic.has_checkpoint("a", "1") is None and generic.parent_ids("a") is None
    assert not (generic.sql_rewritable() or generic.rows_readable() or generic.reencrypts() or generic.async_only)
    assert generic.connection is None and generic.database_file() is None and not generic.keeps("list")


def test_a_driverless_saver_still_shows_the_storage_it_holds(tmp_path):
    """The API for every read and write, but the file its ``conn`` is on is found: the audit scans
    it and the erasure scrubs it (LangGraph's shallow PostgreSQL savers, a user's saver over sqlite3)."""
    saver = _Custom()
    saver.conn = sqlite3.connect(tmp_path / "custom.sqlite", check_same_thread=False)
    saver.lock = threading.Lock()
    try:
        generic = driver_or_generic(saver)
        assert isinstance(generic, GenericDriver) and generic.connection is saver.conn
        assert generic.lock is saver.lock and generic.database_file() == tmp_path / "custom.sqlite"
        assert not (generic.sql_rewritable() or generic.rows_readable() or generic.reencrypts())
        saver.lock = asyncio.Lock()  # (an async saver's lock: only its loop holds it)
        assert generic.lock is None
    finally:
        saver.conn.close()


def test_register_driver_serves_a_new_saver_class():
    class CustomDriver(CheckpointerDriver):
        kind = "custom"
        engine = None

        @classmethod
        def saver_type(cls):
            return _Custom

        def thread_ids(self, prefix: str = "") -> list[str]:
            return sorted(t for t in self.saver.rows if t.startswith(prefix))

    assert register_driver(CustomDriver) is CustomDriver
    try:
        assert registered_drivers()[0] is CustomDriver
        d = driver_for(_Custom())
        assert isinstance(d, CustomDriver) and d.thread_ids() == ["a", "b"] and d.exact()
        register_driver(CustomDriver)  # again: still once
        assert registered_drivers().count(CustomDriver) == 1
    finally:
        unregister_driver(CustomDriver)
    with pytest.raises(NoCheckpointerDriver):
        driver_for(_Custom())


def test_a_registered_driver_wins_over_the_built_in_one_for_a_subclass():
    from langgraph.checkpoint.memory import InMemorySaver

    class Mine(InMemorySaver):
        pass

    class MineDriver(CheckpointerDriver):
        kind = "mine"

        @classmethod
        def saver_type(cls):
            return Mine

    register_driver(MineDriver)
    try:
        assert driver_for(Mine()).kind == "mine"
        assert driver_for(InMemorySaver()).kind == "memory"
    finally:
        unregister_driver(MineDriver)
    assert driver_for(Mine()).kind == "memory"


@pytest.mark.parametrize("bad", [object, GenericDriver, "memory", None])
def test_register_driver_takes_only_a_driver_class(bad):
    before = registered_drivers()
    with pytest.raises(TypeError):
        register_driver(bad)
    assert registered_drivers() == before


def test_open_saver_refuses_an_unknown_kind_and_a_sync_open_of_an_async_one(tmp_path):
    with pytest.raises(InvalidArgument, match="known: .*memory"):
        open_saver("cassandra")
    with pytest.raises(NotImplementedError):
        open_saver("async-sqlite", tmp_path / "x.sqlite")
    with pytest.raises(NotImplementedError):
        open_saver("async-postgres", "postgresql://nowhere/x")
    assert not (tmp_path / "x.sqlite").exists()


def test_open_saver_leaves_a_connection_it_was_given_open(tmp_path):
    conn = sqlite3.connect(tmp_path / "mine.sqlite", check_same_thread=False)
    saver, close = open_saver("sqlite", conn)
    close()
    assert driver_for(saver).connection is conn and conn.execute("SELECT 1").fetchone() == (1,)
    conn.close()
