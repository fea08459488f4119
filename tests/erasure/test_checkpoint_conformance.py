"""LangGraph's own checkpointer conformance suite (``langgraph-checkpoint-conformance``) run
against each saver unsee can wrap, bare and wrapped: a wrapper must reach the same conformance
level and the same per-capability results as the saver it wraps (issue 29).

The suite is async-only (it calls ``aput``, ``acopy_thread``, ...). A sync-only saver
(``SqliteSaver``, ``PostgresSaver``) is run through :class:`SyncAsAsync`, which gives it the
async method of each sync method it has, so the wrapper's *sync* paths are what the suite
exercises there. :class:`FullInMemorySaver` is an ``InMemorySaver`` with ``copy_thread``,
``delete_for_runs`` and ``prune`` (no LangGraph saver has all three), so that the wrapper's
extended capabilities run through the suite too; the suite scores it FULL bare.

Add a saver: one line in ``SAVERS``. Add a wrapper: one line in ``WRAPPERS``.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import DetectedCapabilities
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver

from tests.support.full_saver import FullInMemorySaver
from unsee.plugins.erasure.keys import OPTIONAL_METHODS, EncryptingSaver, KeyStore, encrypting, implemented

CONFORMANCE_VERSION = "0.0.2"





def _sync_as_async(name: str) -> Callable:
    sync = name[1:]
    if name == "alist":
        async def alist(self, config, *, filter=None, before=None, limit=None) -> AsyncIterator:
            items = await asyncio.to_thread(lambda: list(self.saver.list(config, filter=filter, before=before,
                                                                         limit=limit)))
            for item in items:
                yield item
        return alist

    async def call(self, *args, **kwargs):
        return await asyncio.to_thread(getattr(self.saver, sync), *args, **kwargs)
    call.__name__ = name
    return call


class SyncAsAsync(BaseCheckpointSaver):
    """The suite's view of a sync saver: ``a<m>`` runs ``saver.<m>`` in a thread, for exactly the
    sync methods ``type(saver)`` implements (``SyncAsAsync(saver)`` picks that subclass)."""

    def __new__(cls, saver: BaseCheckpointSaver):
        names = [m for m in OPTIONAL_METHODS if m.startswith("a") and implemented(type(saver), m[1:])]
        body = {m: _sync_as_async(m) for m in names}
        return super().__new__(type("SyncAsAsync", (SyncAsAsync,), body))

    def __init__(self, saver: BaseCheckpointSaver):
        super().__init__(serde=saver.serde)
        self.saver = saver

    def get_next_version(self, current, channel):
        return self.saver.get_next_version(current, channel)


def _pg_conn(pg_url: str):
    import psycopg
    from psycopg.rows import dict_row

    return psycopg.connect(pg_url, autocommit=True, prepare_threshold=0, row_factory=dict_row)


@asynccontextmanager
async def _memory(serde, ctx):
    yield InMemorySaver(serde=serde)


@asynccontextmanager
async def _full_memory(serde, ctx):
    yield FullInMemorySaver(serde=serde)


@asynccontextmanager
async def _sqlite(serde, ctx):
    conn = sqlite3.connect(ctx["tmp_path"] / f"lg-{ctx['run']}.sqlite", check_same_thread=False)
    try:
        yield SqliteSaver(conn, serde=serde)
    finally:
        conn.close()


@asynccontextmanager
async def _async_sqlite(serde, ctx):
    import aiosqlite
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    async with aiosqlite.connect(ctx["tmp_path"] / f"alg-{ctx['run']}.sqlite") as conn:
        yield AsyncSqliteSaver(conn, serde=serde)


@asynccontextmanager
async def _postgres(serde, ctx):
    from langgraph.checkpoint.postgres import PostgresSaver

    conn = await asyncio.to_thread(_pg_conn, ctx["pg_url"])
    try:
        saver = PostgresSaver(conn, serde=serde)
        await asyncio.to_thread(saver.setup)
        yield saver
    finally:
        conn.close()


@asynccontextmanager
async def _async_postgres(serde, ctx):
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg import AsyncConnection
    from psycopg.rows import dict_row

    async with await AsyncConnection.connect(ctx["pg_url"], autocommit=True, prepare_threshold=0,
                                             row_factory=dict_row) as conn:
        saver = AsyncPostgresSaver(conn, serde=serde)
        await saver.setup()
        yield saver


PG = pytest.mark.postgres
#: one line per saver: (id, opens it given serde or None, sync-only (run via SyncAsAsync), marks)
SAVERS = [
    ("memory", _memory, False, ()),
    ("memory-full", _full_memory, False, ()),
    ("memory-full-sync", _full_memory, True, ()),
    ("sqlite-file", _sqlite, True, ()),
    ("async-sqlite", _async_sqlite, False, ()),
    ("postgres", _postgres, True, (PG,)),
    ("async-postgres", _async_postgres, False, (PG,)),
]
#: one line per wrapper: (id, wraps an opened saver: (saver, ctx) -> the wrapped saver)
WRAPPERS = [
    ("encrypted", lambda saver, ctx: encrypting(saver, ctx["keys"])),  # = u.encrypted(saver)
]


def _report(report) -> dict[str, Any]:
    """The report without its name and failure texts (ids in them differ run to run)."""
    out = report.to_dict()
    out.pop("checkpointer_name")
    for r in out["results"].values():
        r["failures"] = sorted(f.split(":", 1)[0] for f in r["failures"])
    return out


async def _run(name: str, opener, sync_only: bool, ctx: dict, wrap=None) -> tuple[dict, BaseCheckpointSaver]:
    """The suite's report for the saver ``opener`` opens (wrapped by ``wrap``), and the last one."""
    seen: list[BaseCheckpointSaver] = []

    async def factory():  # the suite opens a fresh saver per capability
        ctx["run"] += 1
        async with opener(None, ctx) as saver:
            saver = saver if wrap is None else wrap(saver, ctx)
            seen.append(saver)
            yield SyncAsAsync(saver) if sync_only else saver

    report = await validate(checkpointer_test(name=name)(factory))
    return _report(report), seen[-1]


@pytest.mark.parametrize("wrapper", [pytest.param(w, id=w[0]) for w in WRAPPERS])
@pytest.mark.parametrize("saver", [pytest.param(s, id=s[0], marks=s[3]) for s in SAVERS])
async def test_wrapper_conforms_like_the_saver(saver, wrapper, tmp_path, request):
    name, opener, sync_only, _ = saver
    ctx = {"tmp_path": tmp_path, "run": 0, "keys": KeyStore(tmp_path / "keys.sqlite"),
           "pg_url": request.getfixturevalue("pg_url") if "postgres" in name else None}
    try:
        bare, inner = await _run(name, opener, sync_only, ctx)
        wrapped, outer = await _run(f"{wrapper[0]}({name})", opener, sync_only, ctx, wrap=wrapper[1])
    finally:
        ctx["keys"].close()
    assert isinstance(outer, EncryptingSaver)
    # the wrapper has exactly the inner saver's methods, sync and async
    assert ([m for m in OPTIONAL_METHODS if implemented(type(outer), m)]
            == [m for m in OPTIONAL_METHODS if implemented(type(inner), m)])
    assert DetectedCapabilities.from_instance(outer) == DetectedCapabilities.from_instance(inner)
    assert wrapped == bare, (wrapped, bare)
    assert bare["conformance_level"] == "FULL", bare  # (each saver here passes all it has)
    if name.startswith("memory-full"):  # every extended capability ran through the wrapper
        assert all(r["detected"] and r["passed"] for r in wrapped["results"].values()), wrapped
