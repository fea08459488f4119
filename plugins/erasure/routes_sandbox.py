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
environments (the registry says whose each is), audits them all and lists
other sessions' copies apart (``RouteAudit.other_sessions``: theirs, not in
this erasure's scope); it erases only the scope's own.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from unsee.sandbox import (NotSupported, SandboxError, delete_item, deletion_order, environment_items, read_item,
                           snapshot_item)

from .forms import count_forms
from .owners import owner_of
from .routes import Route, RouteAudit, Scope, SubjectScope

log = logging.getLogger("unsee.erasure")


class SandboxRoute(Route):
    name = "sandbox"
    holds = "sandbox snapshots, environments' workspaces/containers and Docker images"
    method = "unreferenced snapshots, retired environments and their images deleted (pre-tau snapshots kept)"

    def __init__(self, environments: Any, records: Any, home: Any):
        self.envs = environments
        self.records = records
        self.home = Path(home).resolve()

    def _outside(self, item: Any) -> bool:
        """A local directory outside this home (e.g. a copied home's registry still names the
        original's): never deleted from here."""
        return item.backend == "local" and not Path(item.ref).resolve().is_relative_to(self.home)

    def files(self, scope: Scope | None = None) -> list:
        """Local directories of every session's environments (the home scan leaves them to this
        route: another session's are attributed to it here, not counted as a writer without a
        route)."""
        if scope is None:
            return []
        return [Path(item.ref) for s in self._sessions(scope) for item, _ in self._items(s)
                if item.backend == "local"]

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
        """(stored item, kept?) for every item of every environment the session owned."""
        snaps = self.envs.snapshots_of(session)
        keep = self._keep(session)
        kept_refs = {s.ref for s in snaps if str(s) in keep}
        live = self.envs.live_env_id(session)
        seen: dict[tuple[str, str], tuple[Any, bool]] = {}
        for any_snap in self.envs.environments_of(session):
            env_id = any_snap.env_id
            try:
                items = environment_items(any_snap)
            except NotSupported:
                continue  # a backend that stores nothing (the python one keeps snapshots in memory)
            for item in items:
                if item.kind in ("snapshot", "image"):
                    kept = item.ref in kept_refs
                else:  # a workspace or container: the live environment's stays
                    kept = env_id == live
                seen[(item.kind, item.ref)] = (item, kept)
        return list(seen.values())

    def _source(self, session: str) -> dict[str, bytes]:
        snap = self.envs.initial_snapshot(session)
        if snap is None:
            return {}
        try:
            return dict(read_item(snapshot_item(snap)))
        except (SandboxError, OSError):  # NotSupported included: nothing stored, no source to keep
            return {}

    def audit(self, scope: Scope) -> RouteAudit:
        out = self._audit()
        for session in self._sessions(scope):
            mine = session == scope.session
            source = self._source(session)
            for item, _ in self._items(session):
                copies = sources = 0
                try:
                    for path, data in read_item(item):
                        n = sum(count_forms(data, scope.forms).values()) if data else 0
                        if n and source.get(path) == data:
                            sources += n  # present before the agent ran: the source
                        else:
                            copies += n
                except (SandboxError, OSError) as exc:
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
        doomed = [item for item in doomed if item not in outside]
        gone, failed = 0, [f"{item.describe()}: outside this home, not deleted" for item in outside]
        # containers first, then images children before parents (the daemon refuses otherwise);
        # one failure does not stop the rest, and the count is what was really deleted
        for item in deletion_order(doomed) if doomed else []:
            try:
                gone += delete_item(item)
            except (SandboxError, OSError) as exc:
                failed.append(f"{item.describe()}: {exc}")
        return [f"{gone} stored sandbox items deleted"] + [f"could not delete {f}" for f in failed]


def sandbox_route(ctx, agent):
    """The session's sandboxes (None: no environments in this context); listed in
    ``routes_builtin.BUILTIN_ROUTES``."""
    return SandboxRoute(ctx.environments, ctx.records, ctx.home) if ctx.environments is not None else None
