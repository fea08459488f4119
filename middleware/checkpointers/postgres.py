"""The drivers of LangGraph's ``PostgresSaver`` (a psycopg connection or pool) and
``AsyncPostgresSaver`` (an async connection used from the saver's loop). Tables:
``checkpoints`` (a checkpoint's document, primitives inline as JSONB),
``checkpoint_blobs`` (one serialized value per channel version) and ``checkpoint_writes``."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from typing import Any

from .base import CheckpointerDriver, Convert, saver_class

__all__ = ["AsyncPostgresDriver", "PostgresDriver"]

#: PostgresSaver methods whose storage format unsee's SQL assumes (thread listing, the in-place
#: rewrite of a suffix): a subclass overriding one goes through the API
PG_STORAGE = ("put", "put_writes", "get_tuple", "list", "_dump_blobs", "_load_blobs")

#: (table, its key columns besides thread_id) of the serialized values
_VALUE_TABLES = (("checkpoint_blobs", ("checkpoint_ns", "channel", "version")),
                 ("checkpoint_writes", ("checkpoint_ns", "checkpoint_id", "task_id", "idx")))


def _value_sql(table: str, keys: tuple[str, ...]) -> tuple[str, str]:
    select = (f"SELECT {', '.join(keys)}, type, blob FROM {table} WHERE thread_id = %s "
              f"AND type LIKE %s ORDER BY {', '.join(keys)} FOR UPDATE")
    update = (f"UPDATE {table} SET type = %s, blob = %s WHERE thread_id = %s AND "
              + " AND ".join(f"{k} = %s" for k in keys))
    return select, update


def _updates(rows: list[dict], keys: tuple[str, ...], thread: str, convert: Convert) -> list[tuple]:
    out = []
    for r in rows:
        if new := convert(r["type"], r["blob"]):
            out.append((new[0], new[1], thread, *(r[k] for k in keys)))
    return out


def _like(marker: str) -> str:
    """A LIKE pattern matching any text containing ``marker``."""
    return "%" + marker.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


class PostgresDriver(CheckpointerDriver):
    kind = "postgres"
    engine = "postgres"

    @classmethod
    def saver_type(cls) -> type | None:
        return saver_class("langgraph.checkpoint.postgres", "PostgresSaver")

    @property
    def connection(self) -> Any:
        return getattr(self.saver, "conn", None)

    @property
    def lock(self) -> Any:
        return getattr(self.saver, "lock", None)

    @classmethod
    def open(cls, where: Any = None) -> tuple[Any, Callable[[], None]]:
        """``where``: a PostgreSQL URL; one connection (autocommit, dict rows, as the saver needs)
        and the saver's tables set up."""
        import psycopg
        from psycopg.rows import dict_row

        conn = psycopg.connect(str(where), autocommit=True, prepare_threshold=0, row_factory=dict_row)
        saver = cls.saver_type()(conn)
        saver.setup()
        return saver, conn.close

    @contextlib.contextmanager
    def cursor(self, *, sync_pipeline: bool = False) -> Iterator[Any]:
        """A cursor of the saver's own (its lock held, rows as dicts). ``sync_pipeline``: what the
        saver's pipeline holds is sent first (as its ``prune`` does before a transaction)."""
        with self.saver._cursor() as cur:
            if sync_pipeline and getattr(self.saver, "pipe", None):
                self.saver.pipe.sync()
            yield cur

    def plain(self) -> bool:
        """Its own tables, values as its serde wrote them (no subclass storing rows its own way)."""
        return self.keeps(*PG_STORAGE)

    def thread_ids(self, prefix: str = "") -> list[str] | None:
        if not self.plain():
            return None
        with self.cursor() as cur:  # one query (listing decodes every checkpoint of every thread)
            cur.execute("SELECT DISTINCT thread_id FROM checkpoints WHERE left(thread_id, %s) = %s",
                        (len(prefix), prefix))
            return sorted(r["thread_id"] for r in cur.fetchall())

    def sql_rewritable(self) -> bool:
        return self.plain()

    def rows_readable(self) -> bool:
        try:
            import psycopg
        except ImportError:  # pragma: no cover - the saver needs it
            return False
        # (a pool: its rows are decoded through the API)
        return self.exact() and isinstance(self.connection, psycopg.Connection)

    def reencrypts(self) -> bool:
        return True

    def reencrypt(self, thread: str, convert: Convert, marker: str) -> int:
        n = 0
        with self.cursor() as cur, cur.connection.transaction():
            for table, keys in _VALUE_TABLES:
                select, update = _value_sql(table, keys)
                cur.execute(select, (thread, _like(marker)))
                updates = _updates(cur.fetchall(), keys, thread, convert)
                if updates:
                    cur.executemany(update, updates)
                n += len(updates)
        return n


class AsyncPostgresDriver(PostgresDriver):
    """The same tables; the saver's connection is used from its own loop. No :attr:`lock`: the
    saver's is an asyncio lock of its loop, which no other thread can hold."""

    kind = "async-postgres"
    async_only = True

    @classmethod
    def open(cls, where: Any = None) -> tuple[Any, Callable[[], None]]:
        raise NotImplementedError(f"a {cls.kind} checkpointer is opened from a coroutine (aopen)")

    @classmethod
    async def aopen(cls, where: Any = None) -> tuple[Any, Callable[[], Awaitable[None]]]:
        """``where``: a PostgreSQL URL; the async connection is made on the running loop."""
        from psycopg import AsyncConnection
        from psycopg.rows import dict_row

        conn = await AsyncConnection.connect(str(where), autocommit=True, prepare_threshold=0, row_factory=dict_row)
        saver = cls.saver_type()(conn)
        await saver.setup()
        return saver, conn.close

    @property
    def lock(self) -> Any:
        return None

    @classmethod
    def saver_type(cls) -> type | None:
        return saver_class("langgraph.checkpoint.postgres.aio", "AsyncPostgresSaver")

    def thread_ids(self, prefix: str = "") -> list[str] | None:
        return None

    def sql_rewritable(self) -> bool:
        return False

    def rows_readable(self) -> bool:
        return False

    def on_loop(self, coro: Coroutine) -> Any:
        """Run ``coro`` on the saver's loop from another thread (as LangGraph's async savers' own
        sync methods do); from that loop's thread it would wait on itself: refused."""
        loop = self.saver.loop
        try:
            if asyncio.get_running_loop() is loop:
                coro.close()
                raise asyncio.InvalidStateError("synchronous calls to an async saver are only allowed from a "
                                                "different thread: use the async method (e.g. aprune)")
        except RuntimeError:
            pass
        return asyncio.run_coroutine_threadsafe(coro, loop).result()

    def reencrypt(self, thread: str, convert: Convert, marker: str) -> int:
        return self.on_loop(self.areencrypt(thread, convert, marker))

    async def areencrypt(self, thread: str, convert: Convert, marker: str) -> int:
        n = 0
        async with self.saver._cursor() as cur:
            async with cur.connection.transaction():
                for table, keys in _VALUE_TABLES:
                    select, update = _value_sql(table, keys)
                    await cur.execute(select, (thread, _like(marker)))
                    updates = _updates(await cur.fetchall(), keys, thread, convert)
                    if updates:
                        await cur.executemany(update, updates)
                    n += len(updates)
        return n

