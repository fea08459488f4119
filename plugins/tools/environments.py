"""One sandbox environment per session, snapshotted at checkpoints.

The recorder asks ``snapshot_for_thread`` at session start, turn boundaries
and before consequential tool calls; the snapshot id lands on the checkpoint.
With a ``registry`` file, snapshot ids and each session's latest state
outlive the process (environments are opened so that their snapshots are
kept): a later process, e.g. ``unsee forget --agent ...``, can restore them.
Sandboxed tools find their environment with ``current()``: the session's own,
or during a replay the restored shadow the replay runs against. A committed
replay makes that shadow the session's environment; an aborted one throws it
away. Environments are kept open until ``close()`` so that every recorded
snapshot id stays restorable.

The registry also records which session owns each environment (``owners``:
env id -> session; a replay's shadow belongs to the session, not to its scratch
thread), so that erasure can find every stored copy of a session's sandbox
(``snapshots_of``) in a later process.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path

from unsee.middleware.context import current_session, logical_session
from unsee.sandbox import Environment, SnapshotId

log = logging.getLogger("unsee.environments")


class SessionEnvironments:
    def __init__(self, factory: Callable[[], Environment],
                 setup: Callable[[str, Environment], None] | None = None,
                 registry: Path | None = None):
        self.factory = factory
        self.setup = setup
        self.registry = Path(registry) if registry else None
        self._envs: dict[str, Environment] = {}
        self._initial: dict[str, str] = {}
        self._snaps: dict[str, SnapshotId] = {}
        self._replays: dict[str, tuple[str, Environment]] = {}  # scratch thread -> (session, shadow)
        self._retired: list[Environment] = []
        self._lock = threading.RLock()
        self._latest: dict[str, str] = {}
        self._owners: dict[str, str] = {}  # env id -> session
        self._places: dict[str, list[str]] = {}  # env id -> [backend, local root or ""]
        self._load()

    # -- the environments of an unsee home ------------------------------------
    @classmethod
    def under_home(cls, home: str | os.PathLike, sandbox: str | Callable[[], Environment],
                   setup: Callable[[str, Environment], None] | None = None) -> "SessionEnvironments":
        """One environment per session for the home's sessions: ``sandbox`` is a backend name
        (``"auto"``: Docker when a daemon and the image are there, else local) or a factory.
        A named backend keeps its roots/images and snapshots under ``<home>/sandboxes`` so they
        outlive this process; the registry there says whose they are."""
        folder = Path(home) / "sandboxes"
        factory = sandbox if callable(sandbox) else _kept_environments(folder, sandbox)
        return cls(factory, setup, registry=folder / "registry.json")

    @classmethod
    def stored(cls, home: str | os.PathLike) -> "SessionEnvironments | None":
        """The sandboxes the home's sessions stored, read through its registry, for a process
        that runs no sandbox (e.g. ``unsee erase`` without ``--agent``); None if there are none."""
        registry = Path(home) / "sandboxes" / "registry.json"
        return cls(_no_sandbox, registry=registry) if registry.exists() else None

    # -- persistence -------------------------------------------------------
    def _load(self) -> None:
        if self.registry is None or not self.registry.exists():
            return
        data = json.loads(self.registry.read_text())
        for key, (backend, env_id, seq, ref) in data.get("snapshots", {}).items():
            self._snaps[key] = SnapshotId(backend, env_id, seq, ref)
        self._initial.update(data.get("initial", {}))
        self._latest.update(data.get("latest", {}))
        self._owners.update(data.get("owners", {}))
        self._places.update(data.get("places", {}))
        for session, key in [*self._initial.items(), *self._latest.items()]:  # registries without owners
            if key in self._snaps:
                self._owners.setdefault(self._snaps[key].env_id, session)

    def _save(self) -> None:
        if self.registry is None:
            return
        data = {
            "snapshots": {k: [s.backend, s.env_id, s.seq, s.ref] for k, s in self._snaps.items()},
            "initial": self._initial,
            "latest": self._latest,
            "owners": self._owners,
            "places": self._places,
        }
        self.registry.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.registry.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data))
        os.replace(tmp, self.registry)

    @property
    def backend(self) -> str:
        with self._lock:
            env = next(iter(self._envs.values()), None)
        return getattr(env, "backend", None) or type(env).__name__ if env else "unstarted"

    def env(self, session: str) -> Environment:
        """The session's environment (created, and snapshotted as 'initial', on first use)."""
        with self._lock:
            env = self._envs.get(session)
            if env is None:
                env = self.factory()
                self._own(env, session)
                latest = self._snaps.get(self._latest.get(session, ""))
                if latest is not None:
                    env.restore(latest)  # continue where an earlier process left the session
                    self._save()
                else:
                    if self.setup is not None:
                        self.setup(session, env)  # e.g. the files a session starts with
                    self._initial[session] = self._remember(env.snapshot(), session)
                self._envs[session] = env
            return env

    def current(self) -> Environment:
        """The environment a tool call of the current run must use."""
        thread, _ = current_session()
        with self._lock:
            if thread in self._replays:
                return self._replays[thread][1]
        return self.env(logical_session())

    def _remember(self, snap: SnapshotId, session: str | None = None) -> str:
        key = str(snap)
        self._snaps[key] = snap
        if session is not None:
            self._latest[session] = key
        self._save()
        return key

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
        """Note that ``env`` belongs to ``session`` and where it stores its state (saved by
        the caller): erasure must find every environment, even one never snapshotted."""
        self._owners[env.env_id] = session
        root = getattr(env, "root", None)
        self._places[env.env_id] = [getattr(env, "backend", "?"), str(root) if root is not None else ""]

    def environments_of(self, session: str) -> list[SnapshotId]:
        """One locator per environment the session owned: a registered snapshot of it, else
        (an environment never snapshotted) a handle ``unsee.sandbox.environment_items`` accepts."""
        with self._lock:
            found: dict[str, SnapshotId] = {}
            for snap in self._snaps.values():
                if self._owners.get(snap.env_id) == session:
                    found.setdefault(snap.env_id, snap)
            for env_id, owner in self._owners.items():
                if owner == session and env_id not in found and env_id in self._places:
                    backend, root = self._places[env_id]
                    ref = str(Path(root) / "snapshots" / "000000") if root else ""
                    found[env_id] = SnapshotId(backend, env_id, 0, ref)
            return list(found.values())

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
            return self._snaps.get(self._initial.get(session, ""))

    def latest_snapshot(self, session: str) -> SnapshotId | None:
        with self._lock:
            return self._snaps.get(self._latest.get(session, ""))

    def drop_snapshots(self, keys: list[str]) -> None:
        """Forget registry entries (never a session's initial or latest snapshot)."""
        with self._lock:
            protected = {*self._initial.values(), *self._latest.values()}
            for key in keys:
                if key not in protected:
                    self._snaps.pop(key, None)
            self._save()

    # -- replay ------------------------------------------------------------
    def begin_replay(self, scratch: str, session: str, snapshot_id: str | None) -> Environment:
        """A shadow of the session's environment restored to ``snapshot_id`` (or to its start)."""
        with self._lock:
            base = self.env(session)
            key = snapshot_id or self._initial[session]
            snap = self._snaps.get(key)
            if snap is None:
                raise LookupError(f"snapshot {key!r} is not known to this process; cannot restore the sandbox")
            shadow = base.shadow()
            self._own(shadow, session)
            self._save()
            shadow.restore(snap)
            old = self._replays.pop(scratch, None)
            if old is not None:
                old[1].discard()
            self._replays[scratch] = (session, shadow)
            return shadow

    def end_replay(self, scratch: str, commit: bool) -> None:
        with self._lock:
            entry = self._replays.get(scratch)
            if entry is None:
                return
            session, shadow = entry
            if commit:
                # Snapshot first, swap after: if the snapshot fails (e.g. the Docker daemon is
                # gone), the replay stays pending and the commit's roll-forward calls this again.
                # Popping it first left the registry's latest snapshot of the session at the
                # pre-forget state, which a later process would restore.
                snap = shadow.snapshot()
                del self._replays[scratch]
                old = self._envs.get(session)
                if old is not None:
                    self._retired.append(old)  # its snapshots stay restorable
                self._envs[session] = shadow
                self._remember(snap, session)
            else:
                del self._replays[scratch]
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


def _kept_environments(folder: Path, backend: str) -> Callable[[], Environment]:
    """A factory of ``backend`` environments whose roots and snapshots are kept under ``folder``."""
    import uuid

    from unsee.sandbox import backend_options, open_environment, owner_id

    def make() -> Environment:
        wanted = {"root": folder / uuid.uuid4().hex[:12], "keep": True, "keep_snapshots": True}
        accepted = backend_options(backend)  # what the backend declares (auto: either of its two)
        if accepted is None or "owner" in accepted:  # docker: label what it makes with the home's id
            wanted["owner"] = owner_id(folder.parent)  # so `unsee sandbox cleanup` removes only this home's
        return open_environment(backend, **{k: v for k, v in wanted.items() if accepted is None or k in accepted})

    return make
