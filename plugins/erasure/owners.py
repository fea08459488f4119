"""Whose copy is it? Attributing an audit's copies to the session that owns them.

Many sessions share one home: unsee's records, the call ledger and a
``SqliteSaver`` file hold every session's rows, and ``<home>/sandboxes`` every
session's environments. An erasure is about *its* event's sessions; a copy of
the same text another session still holds is that session's business (it is
erased by that session's forget), so it must neither make this erasure
unclean nor be hidden. This module tells them apart:

- a row of a shared SQLite file belongs to the session named in its owner
  column (``thread_id`` in LangGraph's tables, ``session_id`` in unsee's,
  ``session`` in the ledger's); a replay's scratch thread (``s~cf-…``) and an
  erasure's staging thread (``s~er-…``) belong to ``s``. The file's bytes are
  counted as before; the copies inside other sessions' live rows are taken
  out of the scope's count and listed as theirs. Whatever no live row of
  another session explains (the scope's own rows, free pages, the WAL, a row
  with no owner column, e.g. the memory store's items) stays in scope: bytes
  nobody can attribute never make an erasure look clean.
- a sandbox directory belongs to the session the environments registry
  names (``SandboxRoute`` does that itself).
- a home file nothing claims stays in ``home.other-files``: unowned, and it
  counts (a writer without a route).

Rows are read in a child process, like every byte scan of a SQLite file
(``isolated.py``: closing a descriptor of a database this process has open
would drop its locks); the target goes on stdin.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

#: a replay's scratch thread and an erasure's staging thread: ``<session><mark><id>``
MARKS = ("~cf-", "~er-")
#: columns that name a row's session, in the order they are looked for
OWNER_COLUMNS = ("thread_id", "session_id", "session")
from .scan import SQLITE_SIBLINGS as SIBLINGS  # noqa: E402


def owner_of(name: str) -> str:
    """The session a thread or session id belongs to (its scratch/staging threads are its own)."""
    for mark in MARKS:
        if mark in name:
            name = name.split(mark, 1)[0]
    return name


def main_file(path: str | Path) -> str:
    """The database file of a SQLite file or of one of its ``-wal``/``-shm``/``-journal``."""
    p = str(path)
    for suffix in SIBLINGS:
        if p.endswith(suffix):
            return p[: -len(suffix)]
    return p


def row_copies(databases: Sequence[str], target: str, timeout: float = 600,
               mine: Iterable[str] = ()) -> dict[str, dict[str, int]]:
    """``{database: {owner session: copies}}``: copies of ``target`` (every form) in the live rows
    of each database, per owner (rows of tables without an owner column are left out). Rows that
    ``mine``'s sessions own (their scratch and staging threads included) are not read: their
    copies stay in scope whatever they count, so a home that holds only the scope's sessions costs
    a read of the owner columns, not of every row. Read in a child process; a database that cannot
    be read is left out (its bytes then stay in scope)."""
    databases = [d for d in databases if Path(d).is_file()]
    if not databases:
        return {}
    req = json.dumps({"paths": list(databases), "target": target, "mine": sorted(set(mine))})
    res = subprocess.run([sys.executable, "-I", "-m", "unsee.plugins.erasure.owners"], input=req,
                         capture_output=True, text=True, timeout=timeout)
    if res.returncode != 0:
        raise OSError(f"the isolated row scan failed: {res.stderr.strip()[-500:]}")
    return json.loads(res.stdout)


def attribute_sqlite(audits: Iterable, session: str | Iterable[str], target: str) -> None:
    """Move the copies other sessions' live rows explain out of each audit's ``byte_copies`` of
    SQLite files into its ``other_sessions`` (in place). ``session``: the scope's session(s)."""
    mine = {session} if isinstance(session, str) else set(session)
    audits = list(audits)
    dbs = sorted({main_file(p) for a in audits for p, n in a.byte_copies.items() if n and _is_sqlite(p)})
    if not dbs:
        return
    rows = row_copies(dbs, target, mine=mine)
    for a in audits:
        families: dict[str, list[str]] = {}
        for p, n in a.byte_copies.items():
            if n and _is_sqlite(p):
                families.setdefault(main_file(p), []).append(p)
        for db, members in families.items():
            theirs = {s: n for s, n in rows.get(db, {}).items() if owner_of(s) not in mine and n}
            left = sum(a.byte_copies[p] for p in members)
            for s, n in sorted(theirs.items()):
                taken = min(n, left)  # never more than the file's bytes hold
                if not taken:
                    continue
                left -= taken
                a.add_other(owner_of(s), db, taken)
                for p in sorted(members, key=lambda m: m != db):  # the database file first, then the WAL
                    cut = min(taken, a.byte_copies[p])
                    a.byte_copies[p] -= cut
                    taken -= cut
            for p in members:
                if not a.byte_copies[p]:
                    del a.byte_copies[p]


def _is_sqlite(path: str) -> bool:
    from .isolated import is_sqlite_family

    return is_sqlite_family(path)


def _child() -> None:
    import sqlite3

    from .forms import count_forms, target_forms

    req = json.loads(sys.stdin.read())
    forms = tuple(target_forms(req["target"]))
    mine = set(req.get("mine", ()))
    out: dict[str, dict[str, int]] = {}
    for p in req["paths"]:
        try:
            conn = sqlite3.connect(f"{Path(p).resolve().as_uri()}?mode=ro", uri=True, timeout=30)
        except sqlite3.Error:
            continue
        try:
            per: dict[str, int] = {}
            tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
            for table in tables:
                cols = [r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')]
                owner = next((c for c in OWNER_COLUMNS if c in cols), None)
                if owner is None:
                    continue
                others = [c for c in cols if c != owner]
                if not others:
                    continue
                # the owners first (a read of one column): only other sessions' rows are read whole
                theirs = [o for (o,) in conn.execute(f'SELECT DISTINCT "{owner}" FROM "{table}"')
                          if o is None or owner_of(str(o)) not in mine]
                sel = ", ".join(f'"{c}"' for c in [owner, *others])
                for row in _rows_of(conn, table, owner, sel, theirs):
                    n = 0
                    for v in row[1:]:
                        if isinstance(v, str):
                            v = v.encode("utf-8", "surrogatepass")
                        if isinstance(v, (bytes, memoryview)):
                            n += sum(count_forms(bytes(v), forms).values())
                    if n:
                        key = str(row[0])
                        per[key] = per.get(key, 0) + n
            out[p] = per
        except sqlite3.Error:
            continue
        finally:
            conn.close()
    sys.stdout.write(json.dumps(out))


def _rows_of(conn, table: str, owner: str, sel: str, owners: list) -> Iterable[tuple]:
    """The rows of ``table`` whose owner column is one of ``owners`` (NULL included)."""
    if None in owners:
        yield from conn.execute(f'SELECT {sel} FROM "{table}" WHERE "{owner}" IS NULL')
    named = [o for o in owners if o is not None]
    for i in range(0, len(named), 500):  # under SQLite's bound-parameter limit
        chunk = named[i:i + 500]
        marks = ", ".join("?" * len(chunk))
        yield from conn.execute(f'SELECT {sel} FROM "{table}" WHERE "{owner}" IN ({marks})', chunk)


if __name__ == "__main__":
    _child()
