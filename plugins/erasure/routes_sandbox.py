"""The sandbox route: snapshots, retired environments, Docker images and containers.

What is kept is decided by reachability, not by time: a snapshot stays if a
checkpoint the session still has refers to it (the clean prefix keeps its
snapshots before tau, restorable), or if it is the session's initial or latest
state; every other stored item of the session's environments goes — snapshots
taken at or after tau in the pre-forget environment, that environment's
workspace or container (retired when the replay's shadow became the
session's sandbox), the shadow's base image (the parent's state when the
replay began).

Files that were in the session's sandbox before the agent ran (its initial
snapshot, e.g. the ticket a read tool returns) are the *source* of an
observation, not a record of it: the audit counts them apart (``source``)
and erasure leaves them.

Many sessions share ``<home>/sandboxes``: this route claims every session's
environments (the catalog says whose each is), audits them all and lists
other sessions' copies apart (``RouteAudit.other_sessions``: theirs, not in
this erasure's scope); it erases only the scope's own.

Copies off the machine are items like the others: snapshots pushed to an OCI
registry (kind ``remote``: read through the registry's API, deleted by digest;
then the registry's garbage collection runs where its config is known, and the
receipt says which), and local-backend snapshots kept in the shared PostgreSQL
store (:class:`StoreKept`: the tarball read, the row deleted, the table
rewritten). A registry that refuses deletes is named unreachable.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any

from unsee.sandbox import (NotSupported, SandboxError, StoredItem, delete_item, delete_items, deletion_order,
                           environment_items, read_item, snapshot_item)
from unsee.sandbox.errors import RegistryCannotDelete, RegistryError, RegistryUnavailable

from .forms import count_forms
from .owners import owner_of
from .routes import Route, RouteAudit, Scope, SubjectScope

log = logging.getLogger("unsee.erasure")


@dataclasses.dataclass(frozen=True)
class StoreKept:
    """A local-backend snapshot kept in the shared store (``ref``: its ``store:`` reference)."""

    backend: str
    env_id: str
    ref: str
    kind: str = "stored"

    def describe(self) -> str:
        return (f"{self.backend} snapshot {self.ref} in the shared store (unsee.env_snapshot_blobs) "
                f"of environment {self.env_id}")


def _is_store_ref(ref: str) -> bool:
    from unsee.plugins.tools import is_store_ref

    return is_store_ref(ref)


class SandboxRoute(Route):
    name = "sandbox"
    holds = "sandbox snapshots, environments' workspaces/containers and Docker images"
    method = "unreferenced snapshots, retired environments and their images deleted (pre-tau snapshots kept)"

    def __init__(self, environments: Any, records: Any, home: Any):
        self.envs = environments
        self.records = records
        self.home = Path(home).resolve()
        self._cannot_delete: set[str] = set()  # registries that refused a delete (HTTP 405)

    @staticmethod
    def _local_dir(item: Any) -> bool:
        """A directory of this machine (not a copy in a registry or in the shared store)."""
        return item.backend == "local" and item.kind in ("snapshot", "workspace", "pulled")

    def _outside(self, item: Any) -> bool:
        """A local directory outside this home (e.g. a copied home's catalog still names the
        original's): never deleted from here. Copies off the machine are never outside."""
        return self._local_dir(item) and not Path(item.ref).resolve().is_relative_to(self.home)

    @property
    def _store(self) -> Any:
        """Where the local backend's snapshots are kept in the shared store (None: nowhere)."""
        return getattr(self.envs, "snapshot_store", None)

    def unreachable(self) -> list[str]:
        out = [f"OCI registry {r}: it refuses deletes (HTTP 405), so the snapshots pushed there stay"
               for r in sorted(self._cannot_delete)]
        if self._store is not None:
            from .pg_compact import UNREACHABLE

            out.append(UNREACHABLE.format(what="sandbox snapshot (unsee.env_snapshot_blobs)"))
        return out

    def files(self, scope: Scope | None = None) -> list:
        """Local directories of every session's environments (the home scan leaves them to this
        route: another session's are attributed to it here, not counted as a writer without a
        route)."""
        if scope is None:
            return []
        return [Path(item.ref) for s in self._sessions(scope) for item, _ in self._items(s)
                if self._local_dir(item)]

    def _sessions(self, scope: Scope) -> list[str]:
        """The scope's session first, then every other recorded session (not scratch ones: a
        replay's shadow is registered to its session)."""
        others = [s for s in self.records.sessions_like("") if s != scope.session and owner_of(s) == s]
        return [scope.session, *sorted(others)]

    def _keep(self, session: str) -> set[str]:
        """Snapshot keys the session still needs."""
        keep = {c.env_snapshot_id for c in self.records.checkpoints(session) if c.env_snapshot_id}
        for snap in (self.envs.initial_snapshot(session), self.envs.latest_snapshot(session)):
            if snap is not None:
                keep.add(str(snap))
        return keep

    def _items(self, session: str) -> list[tuple[Any, bool]]:
        """(stored item, kept?) for every item of every environment the session owned: on
        this machine, in an OCI registry (``remote``), in the shared store (``StoreKept``)."""
        refresh = getattr(self.envs, "refresh", None)
        if refresh is not None:
            refresh(session)  # a shared catalog: what other workers recorded since
        snaps = self.envs.snapshots_of(session)
        keep = self._keep(session)
        kept_refs = {s.ref for s in snaps if str(s) in keep}
        kept_remotes = {s.remote for s in snaps if str(s) in keep and s.remote}
        live = self.envs.live_env_id(session)
        seen: dict[tuple[str, str], tuple[Any, bool]] = {}
        # the shared store's copies: the catalog names each one (and keeps the ids of deleted ones)
        in_store = [s for s in snaps if s.remote and _is_store_ref(s.remote)]
        held = self._store.present([s.remote for s in in_store]) if in_store and self._store is not None else {
            s.remote for s in in_store}  # (no store to ask: listed, and said unreadable)
        for s in in_store:
            if s.remote in held:
                seen[("stored", s.remote)] = (StoreKept(s.backend, s.env_id, s.remote), s.remote in kept_remotes)
        if hasattr(self._store, "refs_of"):  # tarballs the catalog never heard of (a crash between the two
            # writes): found by the environment's name, never kept (no checkpoint refers to them)
            for env in self.envs.environments_of(session):
                for ref in self._store.refs_of(env.env_id):
                    seen.setdefault(("stored", ref), (StoreKept(env.backend, env.env_id, ref), False))
        for item in self._pulled(session):  # caches of copies off the machine: never kept
            seen[("pulled", item.ref)] = (item, False)
        for any_snap in self.envs.environments_of(session):
            env_id = any_snap.env_id
            if any_snap.remote and _is_store_ref(any_snap.remote):
                any_snap = dataclasses.replace(any_snap, remote="")  # (listed above; no registry to ask)
            try:
                items = environment_items(any_snap)
            except NotSupported:
                continue  # a backend that stores nothing (the python one keeps snapshots in memory)
            except (RegistryError, RegistryUnavailable) as exc:  # said (audit notes, erase failures)
                seen[("unlisted", str(any_snap))] = (_Unlisted(any_snap, exc), False)
                continue
            for item in items:
                if item.kind in ("snapshot", "image"):
                    kept = item.ref in kept_refs
                elif item.kind == "remote":
                    kept = item.ref in kept_remotes
                else:  # a workspace or container: the live environment's stays
                    kept = env_id == live
                seen[(item.kind, item.ref)] = (item, kept)
        return list(seen.values())

    def _pulled(self, session: str) -> list[StoredItem]:
        """Snapshots a local environment of the session fetched from off the machine to restore
        them (``<env root>/pulled/<key>``): a cache (the environment drops it at close, a later
        restore fetches again), read and deleted like a snapshot directory."""
        out = []
        places_of = getattr(self.envs, "places_of", None)
        for env_id, (backend, root) in (places_of(session) if places_of is not None else {}).items():
            if backend != "local" or not root:
                continue
            folder = Path(root) / "pulled"
            if folder.is_dir() and not folder.is_symlink():
                out += [StoredItem("local", "pulled", env_id, str(d)) for d in sorted(folder.iterdir())
                        if d.is_dir() and not d.is_symlink()]
        return out

    def _read(self, item: Any):
        """``(path, bytes)`` of the files one stored item holds (wherever it is)."""
        if isinstance(item, _Unlisted):
            raise item.error
        if isinstance(item, StoreKept):
            if self._store is None:
                raise NotSupported(f"{item.describe()}: this process has no shared store to read it from")
            return self._store.files(item.ref, item)
        if item.kind == "pulled":  # (a directory like a snapshot's)
            return read_item(dataclasses.replace(item, kind="snapshot"))
        return read_item(item)

    def _source(self, session: str) -> dict[str, bytes]:
        snap = self.envs.initial_snapshot(session)
        if snap is None:
            return {}
        try:
            return dict(read_item(snapshot_item(snap)))
        except (SandboxError, OSError):  # NotSupported included: nothing stored here
            pass
        if not snap.remote:  # made on a machine that kept it: no source to keep
            return {}
        try:  # the initial state as pushed off the machine it was made on
            item = (StoreKept(snap.backend, snap.env_id, snap.remote) if _is_store_ref(snap.remote)
                    else StoredItem(snap.backend, "remote", snap.env_id, snap.remote))
            return dict(self._read(item))
        except (SandboxError, OSError, LookupError):
            return {}

    def audit(self, scope: Scope) -> RouteAudit:
        out = self._audit()
        for session in self._sessions(scope):
            mine = session == scope.session
            source = self._source(session)
            for item, _ in self._items(session):
                copies = sources = 0
                try:
                    for path, data in self._read(item):
                        n = sum(count_forms(data, scope.forms).values()) if data else 0
                        if n and source.get(path) == data:
                            sources += n  # present before the agent ran: the source
                        else:
                            copies += n
                except (SandboxError, OSError, LookupError) as exc:
                    if mine:  # the scope's own item, not read: the audit is incomplete
                        out.cannot_read(item.describe(), str(exc) or type(exc).__name__,
                                        "make it reachable (the Docker daemon, the registry, the shared store) "
                                        "and audit again")
                    else:  # (another session's: its copies would be its own, listed, never counted)
                        out.notes.append(f"{item.describe()}: unreadable ({exc})")
                if mine:
                    out.source_copies += sources
                    if copies:
                        out.byte_copies[item.describe()] = copies
                else:  # another session's sandbox: its copies are listed as its own
                    out.add_other(session, item.describe(), copies)
                    out.add_other(session, f"{item.describe()} (source: there before the agent ran)", sources)
        return out

    def erase(self, scope: Scope) -> list[str]:
        # The registry keeps the ids of deleted snapshots (ids hold no content): the audit
        # after erasure still finds every environment the session owned, and restoring a
        # deleted snapshot is a clear SnapshotNotFound.
        return self._delete([item for item, kept in self._items(scope.session) if not kept])

    def erase_subject(self, subject: SubjectScope) -> list[str]:
        """Every stored item of every environment the subject's sessions owned (snapshots,
        workspaces, containers, images), none kept; local directories outside this home are
        reported, never deleted."""
        return self._delete([item for session in subject.threads for item, _ in self._items(session)])

    def _delete(self, doomed: list) -> list[str]:
        """Delete ``doomed`` stored items (never one outside this home: reported); notes."""
        outside = [item for item in doomed if self._outside(item)]
        failed = [f"{item.describe()}: outside this home, not deleted" for item in outside]
        failed += [f"{item.describe()}: {item.error}" for item in doomed if isinstance(item, _Unlisted)]
        stored = [item for item in doomed if isinstance(item, StoreKept)]
        remote = [item for item in doomed if getattr(item, "kind", "") == "remote"]
        doomed = [item for item in doomed if item not in outside and item not in stored and item not in remote
                  and not isinstance(item, _Unlisted)]
        gone, notes = 0, []
        # containers first, then images children before parents (the daemon refuses otherwise);
        # one failure does not stop the rest, and the count is what was really deleted
        pulled = [item for item in doomed if item.kind == "pulled"]
        doomed = [item for item in doomed if item not in pulled]
        for item in deletion_order(doomed) if doomed else []:
            try:
                gone += delete_item(item)
            except (SandboxError, OSError) as exc:
                failed.append(f"{item.describe()}: {exc}")
        for item in pulled:
            try:
                gone += _delete_pulled(item)
            except OSError as exc:
                failed.append(f"{item.describe()}: {exc}")
        if remote:
            # together first: delete_items also unlinks the blobs no remaining manifest of the
            # repository references; one by one (past a failure) if that fails
            try:
                gone += len(delete_items(remote))
            except (SandboxError, OSError):
                for item in remote:
                    try:
                        gone += delete_item(item)
                    except RegistryCannotDelete as exc:
                        self._cannot_delete.add(getattr(exc, "address", "") or item.ref.rpartition("/")[0])
                        failed.append(f"{item.describe()}: {exc}")
                    except (SandboxError, OSError) as exc:
                        failed.append(f"{item.describe()}: {exc}")
            notes += self._collect_garbage(remote)
        if stored:
            store = self._store
            for item in stored:
                try:
                    if store is None:
                        raise NotSupported("this process has no shared store")
                    gone += store.delete(item.ref)
                except (SandboxError, OSError, LookupError) as exc:
                    failed.append(f"{item.describe()}: {exc}")
                except Exception as exc:  # the store's driver (e.g. StoreUnavailable): said, not fatal
                    failed.append(f"{item.describe()}: {exc}")
            if store is not None:
                try:
                    notes.append(store.compact())
                except Exception as exc:
                    notes.append(f"unsee.env_snapshot_blobs not rewritten ({exc}): deleted rows stay in its heap "
                                 "until the next VACUUM FULL")
        return [f"{gone} stored sandbox items deleted"] + notes + [f"could not delete {f}" for f in failed]

    @staticmethod
    def _collect_garbage(remote: list) -> list[str]:
        """Run each registry's garbage collection (where its config is known): a sentence each."""
        from unsee.sandbox import collect_registry_garbage
        from unsee.sandbox.oci import parse_ref

        registries = set()
        for item in remote:
            try:
                registries.add(parse_ref(item.ref).registry)
            except ValueError:
                continue
        notes = []
        for registry in sorted(registries):
            try:
                notes.append(f"OCI registry {registry}: {collect_registry_garbage(registry)}")
            except (SandboxError, OSError) as exc:
                notes.append(f"OCI registry {registry}: garbage collection failed ({exc}): blob data stays "
                             "until the registry's garbage-collect runs")
        return notes


def _delete_pulled(item: StoredItem) -> bool:
    """Delete one ``<env root>/pulled/<key>`` directory (refused for any other shape)."""
    import shutil

    p = Path(item.ref)
    if p.parent.name != "pulled" or not (p.parent.parent / "snapshots").is_dir() or p.is_symlink():
        raise OSError(f"refusing to delete {item.ref!r}: not an <env root>/pulled/<key> directory")
    if not p.exists():
        return False
    shutil.rmtree(p)
    return True


class _Unlisted:
    """An environment whose items could not be listed (e.g. its registry unreachable): the
    audit says so (a note), the erasure reports it not deleted."""

    kind = "unlisted"

    def __init__(self, snap: Any, error: Exception):
        self.backend = snap.backend
        self.env_id = snap.env_id
        self.ref = str(snap)
        self.error = error

    def describe(self) -> str:
        return f"{self.backend} environment {self.env_id}: its stored items could not be listed"


def sandbox_route(ctx, agent):
    """The session's sandboxes (None: no environments in this context); listed in
    ``routes_builtin.BUILTIN_ROUTES``."""
    return SandboxRoute(ctx.environments, ctx.records, ctx.home) if ctx.environments is not None else None
