"""``unsee sandbox cleanup``'s work: remove the containers and images unsee made on a Docker
daemon, found by label, one home's at a time (the daemon is shared), and report what was
removed and what stays (:class:`CleanupReport`). The CLI (:mod:`.cli`) prints the report.

The docker SDK is imported inside the functions, so importing this module needs no daemon.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .docker_api import docker_client, translate_errors
from .docker_labels import LABEL_ENV, LABEL_HOME, LABEL_PARENT, LABEL_ROLE, LABEL_SANDBOX
from .errors import InvalidCleanup

__all__ = ["CleanupReport", "cleanup", "count_unowned"]


@dataclass(frozen=True)
class CleanupReport:
    """What :func:`cleanup` removed.

    ``failed``: one line per object the daemon refused to remove (it stays).
    ``unowned``: with an ``owner``, how many unsee containers and images (base
    images aside) on the daemon carry no owner label at all — made before
    owners were labelled, or by an environment opened without one — and were
    therefore kept; only ``everything=True`` removes them. None otherwise.
    """

    containers: int
    images: int
    failed: tuple[str, ...] = ()
    unowned: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"containers": self.containers, "images": self.images, "failed": list(self.failed),
                "unowned": self.unowned}


def cleanup(
    client: Any = None,
    *,
    owner: str | None = None,
    env_id: str | None = None,
    everything: bool = False,
    include_base: bool = False,
) -> CleanupReport:
    """Remove the containers and images unsee made, found by label; say whose.

    - ``owner``: only what carries ``unsee.home=<owner>`` (one home's; other
      homes on the same daemon keep theirs). The report counts what carries no
      owner label (``unowned``), which this leaves alone.
    - ``env_id``: only that environment and its shadows (of ``owner`` when
      given, else of any owner: env ids are random, so this is one env).
    - ``everything=True``: every owner's and the unowned ones (the whole daemon);
      ``include_base`` also removes the base images, which every home shares,
      and is refused without it.

    Raises InvalidCleanup for a call that names no scope, SandboxUnavailable /
    DaemonLost when the daemon cannot be reached.
    """
    import docker.errors

    if include_base and not everything:
        raise InvalidCleanup("the base images are shared by every home: removing them needs everything=True (--all)")
    if not (owner or env_id or everything):
        raise InvalidCleanup("cleanup needs a scope: owner=<home id>, env_id=... or everything=True")
    client = client or docker_client()
    base = [f"{LABEL_SANDBOX}=1"] + ([f"{LABEL_HOME}={owner}"] if owner and not everything else [])
    if env_id:
        selections = [base + [f"{LABEL_ENV}={env_id}"], base + [f"{LABEL_PARENT}={env_id}"]]
    else:
        selections = [base]
    failed: list[str] = []
    n_c = n_i = 0
    with translate_errors("cleanup"):
        containers = {c.id: c for sel in selections for c in client.containers.list(all=True, filters={"label": sel})}
        for c in containers.values():
            try:
                c.remove(force=True)
                n_c += 1
            except docker.errors.NotFound:
                pass  # removed meanwhile (e.g. by its own process closing)
            except docker.errors.APIError as exc:
                failed.append(f"container {c.id[:12]}: {exc.explanation}")
        images = list({i.id: i for sel in selections for i in client.images.list(all=True, filters={"label": sel})}.values())
        # newest first: a snapshot committed on top of another goes before it
        images.sort(key=lambda i: i.attrs.get("Created", ""), reverse=True)
        for img in images:
            if not include_base and (img.labels or {}).get(LABEL_ROLE) == "base":
                continue
            try:
                client.images.remove(img.id, force=True)
                n_i += 1
            except docker.errors.ImageNotFound:
                pass
            except docker.errors.APIError as exc:
                failed.append(f"image {img.id[:19]}: {exc.explanation}")
        unowned = count_unowned(client) if owner and not everything else None
    return CleanupReport(n_c, n_i, tuple(failed), unowned)


def count_unowned(client: Any = None) -> int:
    """How many unsee containers and images (base images aside) carry no owner label."""
    client = client or docker_client()
    sel = {"label": [f"{LABEL_SANDBOX}=1"]}
    with translate_errors("cleanup"):
        objs = [*client.containers.list(all=True, filters=sel), *client.images.list(all=True, filters=sel)]
    return sum(1 for o in objs if LABEL_HOME not in (o.labels or {}) and (o.labels or {}).get(LABEL_ROLE) != "base")
