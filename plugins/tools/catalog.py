"""The catalog of session environments: which snapshots exist, whose they are, where they live.

:class:`~unsee.plugins.tools.environments.SessionEnvironments` keeps its view of
it in a :class:`CatalogState` (snapshots by key, each session's initial and
latest snapshot, the owner session and the place of every environment, and the
home each snapshot was made at) and writes every change through a
:class:`Catalog`, one entry at a time:

- :class:`JsonCatalog`: ``<home>/sandboxes/registry.json``, the embedded
  default (SQLite homes). The whole file is rewritten on each change, as
  before; it is read once, when the process opens it.
- :class:`StoreCatalog`: three tables of unsee's PostgreSQL schema, a row per
  entry (``env_snapshots``, ``env_sessions``, ``env_owners``), so concurrent
  workers on several machines never overwrite each other's entries; a
  session's rows are read again whenever the process asks about that session
  (``refresh``), so a worker sees what another one recorded since.

Each snapshot records the home it was made at (``socket.gethostname():<home
path>``): a forget that cannot restore it names that machine
(:class:`~unsee.plugins.tools.errors.SnapshotElsewhere`). Entries hold ids,
references and paths, never sandbox content.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from unsee.sandbox import SnapshotId

__all__ = ["Catalog", "CatalogState", "JsonCatalog", "StoreCatalog", "home_label"]


def home_label(home: str | os.PathLike) -> str:
    """``<host name>:<absolute home path>``: where a snapshot was made."""
    return f"{socket.gethostname()}:{Path(home).resolve()}"


@dataclass
class CatalogState:
    """One process's view of the catalog (``SessionEnvironments`` reads these dicts)."""

    snapshots: dict[str, SnapshotId] = field(default_factory=dict)
    #: snapshot key -> the home it was made at ("" when not recorded: older catalogs)
    made_at: dict[str, str] = field(default_factory=dict)
    initial: dict[str, str] = field(default_factory=dict)  # session -> snapshot key
    latest: dict[str, str] = field(default_factory=dict)  # session -> snapshot key
    owners: dict[str, str] = field(default_factory=dict)  # env id -> session
    places: dict[str, list[str]] = field(default_factory=dict)  # env id -> [backend, local root or ""]


class Catalog(Protocol):
    """Where the catalog is kept. Writers update ``state`` and persist the one entry."""

    state: CatalogState
    #: what the catalog is, in words (logs, docs)
    where: str

    def refresh(self, session: str | None = None) -> None:
        """Read again what other processes recorded (about ``session``; all when None)."""

    def lookup(self, key: str) -> SnapshotId | None:
        """A snapshot by key, read from where the catalog is kept when this view lacks it."""

    def put_snapshot(self, key: str, snap: SnapshotId, home: str) -> None: ...
    def set_initial(self, session: str, key: str) -> None: ...
    def set_latest(self, session: str, key: str) -> None: ...
    def own(self, env_id: str, session: str, backend: str, root: str, home: str) -> None: ...
    def drop(self, keys: list[str]) -> None:
        """Forget snapshot entries (never a session's initial or latest: the caller checks)."""


def _snap(row: list | tuple) -> SnapshotId:
    backend, env_id, seq, ref, *rest = row
    return SnapshotId(backend, env_id, int(seq), ref, rest[0] if rest and rest[0] else "")


class JsonCatalog:
    """The catalog as one JSON file (``registry.json``), rewritten whole on each change.

    Format: ``snapshots`` (key -> ``[backend, env_id, seq, ref]``, the layout earlier
    versions wrote and read), ``remotes`` (key -> where the snapshot lives off the
    machine), ``made_at`` (key -> home), ``initial``, ``latest``, ``owners``, ``places``."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.where = str(self.path)
        self.state = CatalogState()
        self._load()

    def _load(self) -> None:
        if not self.path.exists():
            return
        data = json.loads(self.path.read_text())
        s = self.state
        remotes = data.get("remotes", {})
        for key, row in data.get("snapshots", {}).items():
            snap = _snap(row)
            if remotes.get(key):
                snap = SnapshotId(snap.backend, snap.env_id, snap.seq, snap.ref, remotes[key])
            s.snapshots[key] = snap
        s.made_at.update(data.get("made_at", {}))
        s.initial.update(data.get("initial", {}))
        s.latest.update(data.get("latest", {}))
        s.owners.update(data.get("owners", {}))
        s.places.update(data.get("places", {}))
        for session, key in [*s.initial.items(), *s.latest.items()]:  # registries without owners
            if key in s.snapshots:
                s.owners.setdefault(s.snapshots[key].env_id, session)

    def _save(self) -> None:
        s = self.state
        data = {
            "snapshots": {k: [x.backend, x.env_id, x.seq, x.ref] for k, x in s.snapshots.items()},
            "remotes": {k: x.remote for k, x in s.snapshots.items() if x.remote},
            "made_at": s.made_at,
            "initial": s.initial,
            "latest": s.latest,
            "owners": s.owners,
            "places": s.places,
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(json.dumps(data))
        os.replace(tmp, self.path)

    def refresh(self, session: str | None = None) -> None:
        pass  # one process per home writes it (read once, as before)

    def lookup(self, key: str) -> SnapshotId | None:
        return self.state.snapshots.get(key)

    def put_snapshot(self, key: str, snap: SnapshotId, home: str) -> None:
        self.state.snapshots[key] = snap
        self.state.made_at[key] = home
        self._save()

    def set_initial(self, session: str, key: str) -> None:
        self.state.initial[session] = key
        self._save()

    def set_latest(self, session: str, key: str) -> None:
        self.state.latest[session] = key
        self._save()

    def own(self, env_id: str, session: str, backend: str, root: str, home: str) -> None:
        self.state.owners[env_id] = session
        self.state.places[env_id] = [backend, root]
        self._save()

    def drop(self, keys: list[str]) -> None:
        for key in keys:
            self.state.snapshots.pop(key, None)
            self.state.made_at.pop(key, None)
        self._save()


#: the catalog's tables in unsee's PostgreSQL schema
CATALOG_SCHEMA = """
CREATE TABLE IF NOT EXISTS env_snapshots (
    key TEXT PRIMARY KEY,
    env_id TEXT NOT NULL,
    backend TEXT NOT NULL,
    seq INTEGER NOT NULL,
    ref TEXT NOT NULL,
    remote TEXT NOT NULL DEFAULT '',
    home TEXT NOT NULL DEFAULT '',
    made_ns INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS env_snapshots_env ON env_snapshots (env_id);
CREATE TABLE IF NOT EXISTS env_sessions (
    session TEXT PRIMARY KEY,
    initial TEXT,
    latest TEXT
);
CREATE TABLE IF NOT EXISTS env_owners (
    env_id TEXT PRIMARY KEY,
    session TEXT NOT NULL,
    backend TEXT NOT NULL,
    root TEXT NOT NULL DEFAULT '',
    home TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS env_owners_session ON env_owners (session)
"""
CATALOG_TABLES = frozenset({"env_snapshots", "env_sessions", "env_owners"})
CATALOG_VERSION = 1


class StoreCatalog:
    """The catalog in a shared PostgreSQL store (``db``: a ``middleware.sqldb`` Db on the
    store's pool): a row per snapshot, per session, per environment. Each change is one
    autocommitted upsert of its own row; a session's initial and latest are two columns
    of its row, each set by its own statement, so two workers never undo each other."""

    def __init__(self, db: Any):
        from unsee.middleware.sqldb import create_tables

        self.db = db
        self.where = "PostgreSQL store (unsee.env_snapshots, env_sessions, env_owners)"
        self.state = CatalogState()
        self._lock = threading.RLock()
        if not CATALOG_TABLES <= db.tables():
            create_tables(db, CATALOG_SCHEMA, CATALOG_TABLES, CATALOG_VERSION, what="environments")

    def has_entries(self) -> bool:
        return self.db.execute("SELECT 1 FROM env_owners LIMIT 1").fetchone() is not None

    def _add_rows(self, rows: list[tuple]) -> None:
        for key, env_id, backend, seq, ref, remote, home in rows:
            self.state.snapshots[key] = SnapshotId(backend, env_id, int(seq), ref, remote or "")
            self.state.made_at[key] = home or ""

    _SNAP_COLS = "s.key, s.env_id, s.backend, s.seq, s.ref, s.remote, s.home"

    def refresh(self, session: str | None = None) -> None:
        where, args = ("WHERE session=?", (session,)) if session is not None else ("", ())
        sessions = self.db.execute(f"SELECT session, initial, latest FROM env_sessions {where}", args).fetchall()
        owners = self.db.execute(f"SELECT env_id, session, backend, root FROM env_owners {where}", args).fetchall()
        snaps = self.db.execute(
            f"SELECT {self._SNAP_COLS} FROM env_snapshots s JOIN env_owners o ON o.env_id = s.env_id "
            f"{where.replace('session', 'o.session')}", args).fetchall()
        with self._lock:
            for s, initial, latest in sessions:
                if initial:
                    self.state.initial[s] = initial
                if latest:
                    self.state.latest[s] = latest
            for env_id, s, backend, root in owners:
                self.state.owners[env_id] = s
                self.state.places[env_id] = [backend, root]
            self._add_rows(snaps)

    def lookup(self, key: str) -> SnapshotId | None:
        with self._lock:
            if key in self.state.snapshots:
                return self.state.snapshots[key]
        rows = self.db.execute(f"SELECT {self._SNAP_COLS} FROM env_snapshots s WHERE s.key=?", (key,)).fetchall()
        with self._lock:
            self._add_rows(rows)
            return self.state.snapshots.get(key)

    def put_snapshot(self, key: str, snap: SnapshotId, home: str) -> None:
        self.db.execute(
            "INSERT INTO env_snapshots (key, env_id, backend, seq, ref, remote, home, made_ns) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(key) DO UPDATE SET ref=excluded.ref, "
            "remote=excluded.remote, home=excluded.home",
            (key, snap.env_id, snap.backend, snap.seq, snap.ref, snap.remote, home, time.time_ns()))
        with self._lock:
            self.state.snapshots[key] = snap
            self.state.made_at[key] = home

    def set_initial(self, session: str, key: str) -> None:
        self.db.execute("INSERT INTO env_sessions (session, initial) VALUES (?, ?) "
                        "ON CONFLICT(session) DO UPDATE SET initial=excluded.initial", (session, key))
        with self._lock:
            self.state.initial[session] = key

    def set_latest(self, session: str, key: str) -> None:
        self.db.execute("INSERT INTO env_sessions (session, latest) VALUES (?, ?) "
                        "ON CONFLICT(session) DO UPDATE SET latest=excluded.latest", (session, key))
        with self._lock:
            self.state.latest[session] = key

    def own(self, env_id: str, session: str, backend: str, root: str, home: str) -> None:
        self.db.execute("INSERT INTO env_owners (env_id, session, backend, root, home) VALUES (?, ?, ?, ?, ?) "
                        "ON CONFLICT(env_id) DO UPDATE SET session=excluded.session", (env_id, session, backend,
                                                                                        root, home))
        with self._lock:
            self.state.owners[env_id] = session
            self.state.places[env_id] = [backend, root]

    def drop(self, keys: list[str]) -> None:
        if not keys:
            return
        # never a key some session (of any worker) still starts from or continues from
        for i in range(0, len(keys), 500):
            chunk = keys[i:i + 500]
            marks = ",".join("?" * len(chunk))
            self.db.execute(
                f"DELETE FROM env_snapshots WHERE key IN ({marks}) AND key NOT IN "
                "(SELECT initial FROM env_sessions WHERE initial IS NOT NULL UNION "
                "SELECT latest FROM env_sessions WHERE latest IS NOT NULL)", chunk)
        with self._lock:
            for key in keys:
                self.state.snapshots.pop(key, None)
                self.state.made_at.pop(key, None)
