"""Attributing a SQLite file's copies to the sessions whose live rows hold them."""

from __future__ import annotations

import sqlite3

from unsee.plugins.erasure.owners import owner_of, row_copies

TARGET = "4417-2231-9904"


def _db(path, rows):
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE checkpoints (thread_id TEXT, checkpoint BLOB, note TEXT)")
    conn.execute("CREATE TABLE items (prefix TEXT, value TEXT)")  # no owner column: never attributed
    conn.executemany("INSERT INTO checkpoints VALUES (?, ?, ?)", rows)
    conn.execute("INSERT INTO items VALUES ('x', ?)", (f"card {TARGET}",))
    conn.commit()
    conn.close()


def test_other_sessions_rows_are_counted_and_the_scopes_are_not_read(tmp_path):
    db = str(tmp_path / "lg.sqlite")
    rows = [("a", f"card {TARGET}".encode(), None), ("a~cf-1", TARGET.encode(), TARGET),
            ("b", f"{TARGET} and {TARGET}".encode(), None), ("b~er-2", b"nothing", TARGET),
            (None, TARGET.encode(), None), ("c", b"clean", "clean")]
    _db(db, rows)
    everyone = row_copies([db], TARGET)[db]
    assert everyone == {"a": 1, "a~cf-1": 2, "b": 2, "b~er-2": 1, "None": 1}
    theirs = row_copies([db], TARGET, mine=["a"])[db]
    # the same counts for every other owner; the scope's rows (its scratch thread too) not read
    assert theirs == {k: v for k, v in everyone.items() if owner_of(k) != "a"}
    assert row_copies([db], TARGET, mine=["a", "b"])[db] == {"None": 1}


def test_many_owners_are_read_in_chunks(tmp_path):
    db = str(tmp_path / "lg.sqlite")
    _db(db, [(f"s{i}", TARGET.encode(), None) for i in range(1200)])
    got = row_copies([db], TARGET, mine=["s0"])[db]
    assert len(got) == 1199 and set(got.values()) == {1}
