"""PostgreSQL tables behind LangGraph's ``PostgresSaver`` / ``PostgresStore``: rewriting them.

A deleted row stays in the table's heap and TOAST files until the table is
rewritten; plain ``VACUUM`` left 20 of 22 copies, ``VACUUM FULL`` removed them
all (measured after ``delete_thread``). What the server already wrote to its WAL, archives,
backups and replicas is beyond reach: routes name it as unreachable.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

SAVER_TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")
STORE_TABLES = ("store",)
UNREACHABLE = "PostgreSQL WAL segments, WAL archives, backups and replicas of the {what} tables"


def is_postgres(conn: Any) -> bool:
    """A psycopg connection or pool (what LangGraph's Postgres savers and stores hold)."""
    return conn is not None and type(conn).__module__.split(".")[0] in ("psycopg", "psycopg_pool")


@contextlib.contextmanager
def _connection(conn: Any, lock: Any) -> Iterator[Any]:
    with lock if lock is not None else contextlib.nullcontext():
        if hasattr(conn, "getconn"):  # a pool
            with conn.connection() as c:
                yield c
        else:
            yield conn


def vacuum_full(conn: Any, tables: Sequence[str], *, lock: Any = None) -> str:
    """``VACUUM FULL`` each table (it cannot run inside a transaction: LangGraph's Postgres
    savers need autocommit connections anyway). Returns a note for the receipt."""
    with _connection(conn, lock) as c:
        if not getattr(c, "autocommit", False):
            return "PostgreSQL tables not rewritten: the connection is not in autocommit mode"
        done = []
        for table in tables:
            if _exists(c, table):
                c.execute(f"VACUUM FULL {table}")
                done.append(table)
    return f"PostgreSQL: {', '.join(done) or 'no tables'} rewritten (VACUUM FULL): deleted rows left the heap"


def _exists(c: Any, table: str) -> bool:
    row = c.execute("SELECT to_regclass(%s) IS NOT NULL AS found", (table,)).fetchone()
    return bool(row["found"] if isinstance(row, dict) else row[0])
