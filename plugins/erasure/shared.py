"""Erasure state in a shared PostgreSQL store: journals, receipts, the receipt signing key.

On a SQLite home these are files of the home (``<home>/erasures/``, ``<home>/receipts/``,
``<home>/receipt.key``). With ``Unsee(store="postgresql://...")`` every worker of the store
sees the same ones, in unsee's schema (tables made on first use, like the leases'):

- ``erasure_journals(name, value, updated_ns)``: one row per journal (``journal.Journal``),
  ``name`` the journal's name (an event id, ``history-<hash>``, ``retention-<hash>``),
  ``value`` its JSON; written in one autocommit statement (durable once it returns, as the
  fsync'd file is), so a run interrupted on one machine is finished by a rerun on another;
- ``erasure_receipts(event_id, sessions, receipt, created_ns)``: the signed receipt JSON
  (``sessions``: the JSON list of the receipt's sessions), also written as a file on the
  machine that erased;
- ``unsee_meta`` row ``receipt_key``: the store's Ed25519 signing key (PEM), made by whichever
  worker signs first (``receipt.SigningKey.resolve``).

This module reads and writes rows (text); ``journal.py`` and ``receipt.py`` give them meaning.
"""

from __future__ import annotations

import threading
import time
import weakref
from typing import Any

from unsee.middleware.sqldb import Db, PostgresDb, create_tables

SCHEMA = """
CREATE TABLE IF NOT EXISTS erasure_journals (
    name TEXT PRIMARY KEY, value TEXT NOT NULL, updated_ns INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS erasure_receipts (
    event_id TEXT PRIMARY KEY, sessions TEXT NOT NULL, receipt TEXT NOT NULL, created_ns INTEGER NOT NULL);
"""
TABLES = frozenset({"erasure_journals", "erasure_receipts"})
#: the ``unsee_meta`` key of the store's receipt signing key (PEM, PKCS#8)
KEY_NAME = "receipt_key"

#: pools whose erasure tables are made (checked once per pool, not per journal)
_made: weakref.WeakSet = weakref.WeakSet()
_made_lock = threading.Lock()


def shared_db(records: Any) -> Db | None:
    """The shared store of ``records`` (a ``ProvenanceStore`` on PostgreSQL) with the erasure
    tables made; None on SQLite (and for records without a pool), whose state is files."""
    pool = getattr(records, "pool", None)
    if pool is None:
        return None
    db = PostgresDb(pool)
    with _made_lock:
        if pool not in _made:
            create_tables(db, SCHEMA, TABLES, 1, what="erasure")
            _made.add(pool)
    return db


def has_tables(db: Db) -> bool:
    """Whether the store has the erasure tables (a reader that must not make them asks first)."""
    return TABLES <= db.tables()


# -- journals -------------------------------------------------------------------------------
def read_journal(db: Db, name: str) -> str | None:
    row = db.execute("SELECT value FROM erasure_journals WHERE name=?", (name,)).fetchone()
    return row[0] if row else None


def write_journal(db: Db, name: str, value: str) -> None:
    """Insert or replace journal ``name`` in one statement (committed when it returns)."""
    db.execute("INSERT INTO erasure_journals(name, value, updated_ns) VALUES (?, ?, ?)"
               " ON CONFLICT(name) DO UPDATE SET value=excluded.value, updated_ns=excluded.updated_ns",
               (name, value, time.time_ns()))


# -- receipts -------------------------------------------------------------------------------
def write_receipt_row(db: Db, event_id: str, sessions: str, receipt: str, created_ns: int) -> None:
    """Insert or replace the receipt of ``event_id`` (a rerun of an event signs it again)."""
    db.execute("INSERT INTO erasure_receipts(event_id, sessions, receipt, created_ns) VALUES (?, ?, ?, ?)"
               " ON CONFLICT(event_id) DO UPDATE SET sessions=excluded.sessions, receipt=excluded.receipt,"
               " created_ns=excluded.created_ns", (event_id, sessions, receipt, created_ns))


def read_receipt_row(db: Db, event_id: str) -> str | None:
    row = db.execute("SELECT receipt FROM erasure_receipts WHERE event_id=?", (event_id,)).fetchone()
    return row[0] if row else None


def receipt_rows(db: Db, sessions: str | None = None) -> list[tuple[str, str]]:
    """(event id, receipt JSON) of every stored receipt (of exactly ``sessions``, a JSON list,
    when given), newest first."""
    if sessions is None:
        rows = db.execute("SELECT event_id, receipt FROM erasure_receipts ORDER BY created_ns DESC")
    else:
        rows = db.execute("SELECT event_id, receipt FROM erasure_receipts WHERE sessions=?"
                          " ORDER BY created_ns DESC", (sessions,))
    return [(r[0], r[1]) for r in rows]


# -- the signing key ------------------------------------------------------------------------
def stored_key(db: Db, make: Any = None) -> str | None:
    """The store's signing key (PEM). ``make``: a zero-argument function returning a new PEM,
    stored when none is (the first asker's wins: ``ON CONFLICT DO NOTHING``, then read back);
    without it, None when the store holds none (a reader never makes one)."""
    if make is not None:
        db.execute("INSERT INTO unsee_meta VALUES (?, ?) ON CONFLICT(key) DO NOTHING", (KEY_NAME, make()))
    elif "unsee_meta" not in db.tables():
        return None
    row = db.execute("SELECT value FROM unsee_meta WHERE key=?", (KEY_NAME,)).fetchone()
    return row[0] if row else None
