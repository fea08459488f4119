"""Deleted rows leave bytes in SQLite's file and WAL until a scrub removes them."""

from __future__ import annotations

import sqlite3
import threading

import pytest

from unsee.middleware.errors import InvalidArgument
from unsee.plugins.erasure.forms import target_forms
from unsee.plugins.erasure.scan import scan_file, sqlite_files
from unsee.plugins.erasure.sqlite_scrub import enable_secure_delete, scrub, scrub_file

SECRET = "4417-2231-CARD"
FORMS = target_forms(SECRET)


def on_disk(db) -> int:
    return sum(scan_file(p, FORMS).copies for p in sqlite_files(db))


def deleted_secret(db, isolation_level="", timeout=5.0):
    """A WAL database whose only row with the secret was deleted (and committed)."""
    conn = sqlite3.connect(db, isolation_level=isolation_level, timeout=timeout)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA wal_autocheckpoint=0")  # keep frames in the WAL, as a busy store would
    conn.execute("PRAGMA secure_delete=OFF")  # the usual default (some builds, Debian's among them, turn it on)
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
    conn.execute("INSERT INTO t (v) VALUES (?)", ("filler " * 50,))
    conn.execute("INSERT INTO t (v) VALUES (?)", (f"card {SECRET} on file",))
    conn.commit()
    conn.execute("DELETE FROM t WHERE v LIKE '%CARD%'")
    conn.commit()
    return conn


@pytest.mark.parametrize("isolation_level", [None, "", "DEFERRED", "IMMEDIATE"])
def test_deleted_row_survives_in_bytes_until_scrubbed(tmp_path, isolation_level):
    db = tmp_path / "store.db"
    conn = deleted_secret(db, isolation_level)
    try:
        assert conn.execute("SELECT count(*) FROM t WHERE v LIKE '%CARD%'").fetchone() == (0,)
        assert on_disk(db) >= 1  # the delete did not erase the bytes
        result = scrub(conn, lock=threading.RLock())
        assert result.complete and result.checkpoint_complete and result.vacuumed
        assert result.wal_bytes_after == 0 and result.path == db
        assert on_disk(db) == 0
        assert conn.execute("SELECT count(*) FROM t").fetchone() == (1,)  # other rows untouched
    finally:
        conn.close()


def test_scrub_never_commits_the_owners_open_transaction(tmp_path):
    db = tmp_path / "store.db"
    conn = deleted_secret(db)
    conn.execute("INSERT INTO t (v) VALUES ('pending')")
    assert conn.in_transaction
    result = scrub(conn)
    assert not result.complete and conn.in_transaction  # skipped, and says so
    assert "open transaction" in result.notes[0]
    conn.rollback()
    assert conn.execute("SELECT count(*) FROM t").fetchone() == (1,)
    assert scrub(conn).complete
    conn.close()


def test_a_reader_makes_the_checkpoint_incomplete(tmp_path):
    db = tmp_path / "store.db"
    conn = deleted_secret(db, timeout=0.1)  # the checkpoint waits for readers up to the busy timeout
    reader = sqlite3.connect(db, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM t").fetchone()  # holds a read snapshot (a WAL read lock)
    try:
        result = scrub(conn)
        assert not result.checkpoint_complete and not result.complete
        assert result.checkpoint.busy == 1
        assert any("incomplete" in n for n in result.notes), result.notes
        assert on_disk(db) >= 1  # the report is right: the bytes are still there
    finally:
        reader.execute("COMMIT")
        reader.close()
    assert scrub(conn).complete  # once the reader is gone
    assert on_disk(db) == 0
    conn.close()


def test_scrub_without_vacuum_is_not_complete(tmp_path):
    conn = deleted_secret(tmp_path / "store.db")
    result = scrub(conn, vacuum=False)
    assert result.checkpoint_complete and not result.vacuumed and not result.complete
    conn.close()


def test_rollback_journal_database(tmp_path):
    db = tmp_path / "plain.db"
    conn = sqlite3.connect(db)
    enable_secure_delete(conn)
    conn.execute("CREATE TABLE t (v TEXT)")
    conn.execute("INSERT INTO t VALUES (?)", (SECRET,))
    conn.commit()
    conn.execute("DELETE FROM t")
    conn.commit()
    result = scrub(conn)
    assert result.complete and result.wal_bytes_after == 0
    assert on_disk(db) == 0
    conn.close()


def test_in_memory_database():
    conn = sqlite3.connect(":memory:")
    result = scrub(conn)
    assert result.path is None and result.complete
    conn.close()


def test_scrub_file(tmp_path):
    db = tmp_path / "store.db"
    deleted_secret(db).close()  # closing the last connection checkpoints, but free pages keep the bytes
    assert on_disk(db) >= 1
    result = scrub_file(db)
    assert result.complete and on_disk(db) == 0


@pytest.mark.parametrize("make, error", [(None, FileNotFoundError), (b"not a database" * 100, InvalidArgument)])
def test_scrub_file_bad_input(tmp_path, make, error):
    path = tmp_path / "x.db"
    if make is not None:
        path.write_bytes(make)
    with pytest.raises(error):
        scrub_file(path)
    assert path.exists() is (make is not None)  # a missing database is never created


def test_scrub_refuses_non_connections():
    with pytest.raises(InvalidArgument):
        scrub("store.db")
