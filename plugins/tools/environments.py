"""One sandbox environment per session, snapshotted at checkpoints.

The recorder asks ``snapshot_for_thread`` at session start, turn boundaries
and before consequential tool calls; the snapshot id lands on the checkpoint.
With a catalog (``registry.json`` under the home, or the shared PostgreSQL
store: :mod:`.catalog`), snapshot ids and each session's latest state outlive
the process (environments are opened so that their snapshots are kept): a
later process, e.g. ``unsee forget --agent ...``, can restore them, and with a
shared store a process on another machine too, from where the snapshot lives
off the machine (``SnapshotId.remote``: an OCI registry, or the store itself for
the local backend: :mod:`.snapshot_store`). A snapshot that cannot be had here
is :class:`~unsee.plugins.tools.errors.SnapshotElsewhere`, naming the home
(``host:path``) that made it.

Sandboxed tools find their environment with ``current()``: the session's own,
or during a replay the restored shadow the replay runs against. A committed
replay makes that shadow the session's environment; an aborted one throws it
away. Environments are kept open until ``close()`` so that every recorded
snapshot id stays restorable.

The catalog also records which session owns each environment (``owners``:
env id -> session; a replay's shadow belongs to the session, not to its scratch
thread), so that erasure can find every stored copy of a session's sandbox
(``snapshots_of``) in a later process.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from unsee.middleware.context import current_session, logical_session
from unsee.sandbox import Environment, SnapshotId, SnapshotNotFound

from .catalog import Catalog, JsonCatalog, StoreCatalog, home_label
from .errors import SnapshotElsewhere

log = logging.getLogger("unsee.environments")


class SessionEnvironments:
    """``factory``: makes an environment (called with no argument), or, when it has a
    ``per_session`` attribute set, with the session's id (e.g. to push its snapshots to a
    repository of its own). ``registry``: the JSON catalog's path (kept name: older callers);
    ``catalog``: any :class:`~unsee.plugins.tools.catalog.Catalog` instead. ``home``: the label
    of where snapshots are made (``host:path``; default: the home the JSON catalog is under).
    ``snapshot_store``: where the local backend's snapshots go off the machine (erasure reads
    and deletes them there)."""

    def __init__(self, factory: Callable[..., Environment],
                 setup: Callable[[str, Environment], None] | None = None,
                 registry: Path | None = None, *, catalog: Catalog | None = None, home: str | None = None,
                 snapshot_store: Any = None):
        self.factory = factory
        self.setup = setup
        self.registry = Path(registry) if registry else None
        self.catalog: Catalog | None = catalog or (JsonCatalog(self.registry) if self.registry else None)
        if home is None:
            home = home_label(self.registry.parent.parent) if self.registry else ""
        #: where this process makes its snapshots (``host:path``), recorded with each one
        self.home = home
        self.snapshot_store = snapshot_store
        self._envs: dict[str, Environment] = {}
        self._replays: dict[str, tuple[str, Environment]] = {}  # scratch thread -> (session, shadow)
        self._settled: dict[str, str] = {}  # scratch thread -> its shadow's settled snapshot key
        self._retired: list[Environment] = []
        self._lock = threading.RLock()
        if self.catalog is None:  # (in memory only: nothing outlives the process)
            from .catalog import CatalogState

            self._state = CatalogState()
        else:
            self._state = self.catalog.state

    # the process's view of the catalog (names kept: tests and older code read them)
    @property
    def _snaps(self) -> dict[str, SnapshotId]:
        return self._state.snapshots

    @property
    def _initial(self) -> dict[str, str]:
        return self._state.initial

    @property
    def _latest(self) -> dict[str, str]:
        return self._state.latest

    @property
    def _owners(self) -> dict[str, str]:
        return self._state.owners

    @property
    def _places(self) -> dict[str, list[str]]:
        return self._state.places

    # -- the environments of an unsee home ------------------------------------
    @classmethod
    def under_home(cls, home: str | os.PathLike, sandbox: str | Callable[[], Environment],
                   setup: Callable[[str, Environment], None] | None = None, *, db: Any = None,
                   registry: str | None = None, hasher: Any = None) -> "SessionEnvironments":
        """One environment per session for the home's sessions: ``sandbox`` is a backend name
        (``"auto"``: Docker when a daemon and the image are there, else local) or a factory.
        A named backend keeps its roots/images and snapshots under ``<home>/sandboxes`` so they
        outlive this process; the catalog says whose they are.

        ``db`` (a ``middleware.sqldb`` Db on a shared PostgreSQL store): the catalog lives in
        the store, and (without a registry) the local backend's snapshots too. ``registry``
        (``host:port``): every snapshot of a named backend is pushed there, to the session's
        own repository ``unsee/s-<keyed hash of the session id>`` (``hasher``: the home's
        ``ContentHasher``; the shared key on PostgreSQL, so every worker names it alike)."""
        folder = Path(home) / "sandboxes"
        label = home_label(home)
        catalog: Catalog = StoreCatalog(db) if db is not None else JsonCatalog(folder / "registry.json")
        store = None
        if db is not None and registry is None:
            from .snapshot_store import StoreSnapshotStore

            store = StoreSnapshotStore(db)
        if callable(sandbox):
            factory = sandbox
        else:
            factory = _KeptEnvironments(folder, sandbox, registry=registry, hasher=hasher, snapshot_store=store,
                                        shared=db is not None)
        return cls(factory, setup, catalog=catalog, home=label, snapshot_store=store,
                   registry=None if db is not None else folder / "registry.json")

    @classmethod
    def stored(cls, home: str | os.PathLike, *, db: Any = None) -> "SessionEnvironments | None":
        """The sandboxes the home's sessions stored, read through its catalog, for a process
        that runs no sandbox (e.g. ``unsee erase`` without ``--agent``); None if there are none.
        ``db``: a shared PostgreSQL store's (its catalog, and the local snapshots kept there)."""
        if db is not None:
            from .catalog import CATALOG_TABLES

            if not CATALOG_TABLES <= db.tables():  # (never made just to be read)
                return None
            catalog = StoreCatalog(db)
            if not catalog.has_entries():
                return None
            from .snapshot_store import StoreSnapshotStore

            return cls(_no_sandbox, catalog=catalog, home=home_label(home), snapshot_store=StoreSnapshotStore(db))
        registry = Path(home) / "sandboxes" / "registry.json"
        return cls(_no_sandbox, registry=registry) if registry.exists() else None

    # -- the catalog ---------------------------------------------------------
    def refresh(self, session: str | None = None) -> None:
        """Read again what other processes recorded about ``session`` (all sessions when None):
        a shared store's catalog changes under us; a JSON one is this home's alone."""
        if self.catalog is not None:
            self.catalog.refresh(session)

    def _lookup(self, key: str) -> SnapshotId | None:
        if key in self._snaps or self.catalog is None:
            return self._snaps.get(key)
        return self.catalog.lookup(key)

    def made_at(self, key: str) -> str:
        """The home (``host:path``) a snapshot was made at ("" when not recorded)."""
        return self._state.made_at.get(key, "")

    @property
    def backend(self) -> str:
        with self._lock:
            env = next(iter(self._envs.values()), None)
        return getattr(env, "backend", None) or type(env).__name__ if env else "unstarted"

    def _make(self, session: str) -> Environment:
        return self.factory(session) if getattr(self.factory, "per_session", False) else self.factory()

    def env(self, session: str) -> Environment:
        """The session's environment (created, and snapshotted as 'initial', on first use)."""
        with self._lock:
            env = self._envs.get(session)
            if env is None:
                self.refresh(session)  # another worker may have run the session since
                env = self._make(session)
                try:
                    self._own(env, session)
                    latest_key = self._latest.get(session, "")
                    latest = self._lookup(latest_key) if latest_key else None
                    if latest is not None:
                        self._restore(env, latest)  # continue where an earlier process left the session
                    else:
                        if self.setup is not None:
                            self.setup(session, env)  # e.g. the files a session starts with
                        key = self._remember(env.snapshot())
                        self._set_initial(session, key)
                        self._set_latest(session, key)
                except BaseException:
                    env.close()
                    raise
                self._envs[session] = env
            return env

    def _restore(self, env: Environment, snap: SnapshotId) -> None:
        """Restore ``snap`` into ``env``; a snapshot this machine cannot have (made elsewhere,
        never pushed off its machine) is ``SnapshotElsewhere``, naming where it was made."""
        try:
            env.restore(snap)
        except SnapshotNotFound:
            made = self.made_at(str(snap))
            if not snap.remote and made and made != self.home:
                raise SnapshotElsewhere(str(snap), made, self.home) from None
            raise  # made here and deleted since (e.g. erased), or gone from where it was pushed

    def current(self) -> Environment:
        """The environment a tool call of the current run must use."""
        thread, _ = current_session()
        with self._lock:
            if thread in self._replays:
                return self._replays[thread][1]
        return self.env(logical_session())

    def _remember(self, snap: SnapshotId, session: str | None = None) -> str:
        key = str(snap)
        if self.catalog is not None:
            self.catalog.put_snapshot(key, snap, self.home)
        else:
            self._snaps[key] = snap
            self._state.made_at[key] = self.home
        if session is not None:
            self._set_latest(session, key)
        return key

    def _set_initial(self, session: str, key: str) -> None:
        if self.catalog is not None:
            self.catalog.set_initial(session, key)
        else:
            self._initial[session] = key

    def _set_latest(self, session: str, key: str) -> None:
        if self.catalog is not None:
            self.catalog.set_latest(session, key)
        else:
            self._latest[session] = key

    def snapshot_for_thread(self, thread: str) -> str | None:
        """Snapshot what ``thread`` runs against (its replay shadow if it is a scratch thread)."""
        with self._lock:
            if thread in self._replays:
                return self._remember(self._replays[thread][1].snapshot())
            return self._remember(self.env(thread).snapshot(), thread)

    # -- what a session stored (for erasure) --------------------------------
    def snapshots_of(self, session: str) -> list[SnapshotId]:
        """Every registered snapshot of an environment the session owned (its shadows included)."""
        with self._lock:
            return [s for s in self._snaps.values() if self._owners.get(s.env_id) == session]

    def _own(self, env: Environment, session: str) -> None:
        """Note that ``env`` belongs to ``session`` and where it stores its state: erasure must
        find every environment, even one never snapshotted."""
        root = getattr(env, "root", None)
        backend, where = getattr(env, "backend", "?"), str(root) if root is not None else ""
        if self.catalog is not None:
            self.catalog.own(env.env_id, session, backend, where, self.home)
        else:
            self._owners[env.env_id] = session
            self._places[env.env_id] = [backend, where]

    def environments_of(self, session: str) -> list[SnapshotId]:
        """One locator per environment the session owned: a registered snapshot of it (one
        that was pushed off the machine when there is one), else (an environment never
        snapshotted) a handle ``unsee.sandbox.environment_items`` accepts."""
        with self._lock:
            found: dict[str, SnapshotId] = {}
            for snap in self._snaps.values():
                if self._owners.get(snap.env_id) == session:
                    had = found.get(snap.env_id)
                    if had is None or (snap.remote and not had.remote):
                        found[snap.env_id] = snap
            for env_id, owner in self._owners.items():
                if owner == session and env_id not in found and env_id in self._places:
                    backend, root = self._places[env_id]
                    ref = str(Path(root) / "snapshots" / "000000") if root else ""
                    found[env_id] = SnapshotId(backend, env_id, 0, ref)
            return list(found.values())

    def places_of(self, session: str) -> dict[str, tuple[str, str]]:
        """env id -> (backend, local root or "") of every environment the session owned (on
        whichever machine: a root names a directory there)."""
        with self._lock:
            return {env_id: (self._places[env_id][0], self._places[env_id][1])
                    for env_id, owner in self._owners.items() if owner == session and env_id in self._places}

    def live_env_id(self, session: str) -> str | None:
        """The environment holding the session's current state: its open one, else (in a
        later process) the one its latest snapshot came from."""
        with self._lock:
            env = self._envs.get(session)
            if env is not None:
                return env.env_id
            latest = self.latest_snapshot(session)
            return latest.env_id if latest is not None else None

    def initial_snapshot(self, session: str) -> SnapshotId | None:
        with self._lock:
            return self._lookup(self._initial.get(session, "")) if session in self._initial else None

    def latest_snapshot(self, session: str) -> SnapshotId | None:
        with self._lock:
            return self._lookup(self._latest.get(session, "")) if session in self._latest else None

    def drop_snapshots(self, keys: list[str]) -> None:
        """Forget catalog entries (never a session's initial or latest snapshot)."""
        with self._lock:
            protected = {*self._initial.values(), *self._latest.values()}
            keys = [k for k in keys if k not in protected]
            if self.catalog is not None:
                self.catalog.drop(keys)
            else:
                for key in keys:
                    self._snaps.pop(key, None)

    # -- replay ------------------------------------------------------------
    def begin_replay(self, scratch: str, session: str, snapshot_id: str | None) -> Environment:
        """A shadow of the session's environment restored to ``snapshot_id`` (or to its start).
        ``SnapshotElsewhere`` (a ``LookupError``) when that snapshot cannot be had here."""
        with self._lock:
            self.refresh(session)
            key = snapshot_id or self._initial.get(session)
            snap = self._lookup(key) if key else None
            if snap is None:
                raise SnapshotElsewhere(key or f"(the initial snapshot of session {session!r})", "", self.home)
            base = self.env(session)
            shadow = base.shadow()
            self._own(shadow, session)
            try:
                self._restore(shadow, snap)
            except BaseException:
                shadow.discard()
                raise
            old = self._replays.pop(scratch, None)
            if old is not None:
                old[1].discard()
            self._settled.pop(scratch, None)
            self._replays[scratch] = (session, shadow)
            return shadow

    def settle_replay(self, scratch: str) -> str | None:
        """Snapshot the replay's shadow as the session's next state (off the machine when a
        registry or shared store is configured) and return its key, for the commit's journal
        row: any process that rolls the commit forward makes it the session's sandbox. None
        when ``scratch`` runs no replay here. A failure (e.g. the daemon gone) begins nothing."""
        with self._lock:
            entry = self._replays.get(scratch)
            if entry is None:
                return None
            key = self._remember(entry[1].snapshot())
            self._settled[scratch] = key
            return key

    def end_replay(self, scratch: str, commit: bool, *, session: str | None = None,
                   final: str | None = None) -> None:
        """Keep (``commit``) or drop the replay's shadow. ``final``: the key ``settle_replay``
        returned; a process that never ran the replay (a roll-forward elsewhere, after the
        replaying one died) makes it ``session``'s latest, and its sandbox opens from there."""
        with self._lock:
            entry = self._replays.get(scratch)
            if entry is None:
                if commit and final and session:
                    self._set_latest(session, final)
                    old = self._envs.pop(session, None)
                    if old is not None:
                        self._retired.append(old)  # stale: the next use restores ``final``
                return
            session, shadow = entry
            if commit:
                # Snapshot first, swap after: if the snapshot fails (e.g. the Docker daemon is
                # gone), the replay stays pending and the commit's roll-forward calls this again.
                # Popping it first left the catalog's latest snapshot of the session at the
                # pre-forget state, which a later process would restore.
                key = self._settled.get(scratch) or final
                if key is None or self._lookup(key) is None:
                    key = self._remember(shadow.snapshot())
                del self._replays[scratch]
                self._settled.pop(scratch, None)
                old = self._envs.get(session)
                if old is not None:
                    self._retired.append(old)  # its snapshots stay restorable
                self._envs[session] = shadow
                self._set_latest(session, key)
            else:
                del self._replays[scratch]
                self._settled.pop(scratch, None)
                shadow.discard()  # its snapshots are on no committed checkpoint

    def close(self) -> None:
        with self._lock:
            for session, env in list(self._envs.items()):
                try:  # the state a later process continues from
                    self._remember(env.snapshot(), session)
                except Exception:
                    log.debug("final snapshot of %s failed", session, exc_info=True)
            for env in [*self._envs.values(), *(s for _, s in self._replays.values()), *self._retired]:
                try:
                    env.close()
                except Exception:
                    log.debug("closing an environment failed", exc_info=True)
            self._envs.clear()
            self._replays.clear()
            self._retired.clear()


def _no_sandbox() -> Environment:
    from unsee.middleware.errors import InvalidArgument

    raise InvalidArgument("this Unsee has no sandbox: give Unsee(sandbox=...) to run sandboxed tools")


def session_repository(hasher: Any, session: str) -> str:
    """The OCI repository of a session's snapshots: ``unsee/s-<24 hex>``, a keyed hash of the
    session id (the id itself never reaches the registry)."""
    digest = hasher.hash(session).rpartition(":")[2]
    return f"unsee/s-{digest[:24]}"


class _KeptEnvironments:
    """A factory of ``backend`` environments whose roots and snapshots are kept under
    ``folder``, called per session: with a ``registry``, each session's snapshots go to its
    own repository there; with a ``snapshot_store`` (the local backend on a shared store),
    into that store."""

    per_session = True

    def __init__(self, folder: Path, backend: str, *, registry: str | None = None, hasher: Any = None,
                 snapshot_store: Any = None, shared: bool = False):
        from unsee.middleware.errors import InvalidArgument
        from unsee.sandbox import backend_options

        self.folder = folder
        self.backend = backend
        self.registry = registry
        self.hasher = hasher
        self.snapshot_store = snapshot_store
        self.shared = shared
        self._warned = False
        # (the backend is looked up when the first environment is made, as before: a name nothing
        # ever opens is no error; with a registry it must be one that can push, said now)
        accepted = backend_options(backend) if registry is not None else None  # BackendNotFound
        if registry is not None and accepted is not None and not {"registry", "repository"} <= accepted:
            raise InvalidArgument(f"the {backend!r} sandbox backend cannot push snapshots to an OCI registry "
                                  f"(registry={registry!r}): use 'docker' or 'local'")
        if registry is not None and hasher is None:
            raise InvalidArgument("a registry needs the home's hasher to name each session's repository")
        if backend == "docker":
            self._warn_if_stuck("docker")

    def _warn_if_stuck(self, backend: str) -> None:
        """Docker snapshots on a shared store without a registry stay on this machine: said once."""
        if self.shared and self.registry is None and backend == "docker" and not self._warned:
            self._warned = True
            log.warning("sandbox snapshots stay on this machine's Docker daemon: a shared store is configured but "
                        "no OCI registry (Unsee(registry='host:port'), $UNSEE_REGISTRY or --registry), so a "
                        "forget on another worker cannot restore them (SnapshotElsewhere)")

    def __call__(self, session: str | None = None) -> Environment:
        import uuid

        from unsee.sandbox import backend_options, open_environment, owner_id

        wanted: dict[str, Any] = {"root": self.folder / uuid.uuid4().hex[:12], "keep": True, "keep_snapshots": True}
        accepted = backend_options(self.backend)
        if accepted is None or "owner" in accepted:  # docker: label what it makes with the home's id
            wanted["owner"] = owner_id(self.folder.parent)  # so `unsee sandbox cleanup` removes only this home's
        if self.registry is not None:
            wanted["registry"] = self.registry
            if session is not None:
                wanted["repository"] = session_repository(self.hasher, session)
        elif self.snapshot_store is not None:
            wanted["snapshot_store"] = self.snapshot_store
        env = open_environment(self.backend, **{k: v for k, v in wanted.items() if accepted is None or k in accepted})
        self._warn_if_stuck(getattr(env, "backend", ""))  # (auto: known once it chose)
        return env
