"""Docker snapshots in an OCI registry: push a snapshot image through the engine, pull one back
by digest, and delete what an environment pushed (:mod:`.oci` speaks the registry's API,
:mod:`.remote` deletes manifests). Used by :class:`~.docker_env.DockerEnvironment` when it is
given ``registry=``; the docker SDK is imported inside the functions.
"""

from __future__ import annotations

import logging
from typing import Any

from .base import SnapshotId
from .docker_api import translate_errors
from .errors import BackendError, SandboxError, SnapshotNotFound
from .oci import RegistryClient, format_ref, host_of, parse_ref
from .remote import delete_manifests

__all__ = ["push_image", "pull_image", "delete_pushed", "registry_error"]

log = logging.getLogger(__name__)


def push_image(client: Any, registry: str, repository: str, image_id: str, tag: str) -> str:
    """Tag ``image_id`` in ``registry``'s ``repository`` and push it; its remote reference
    (``<registry>/<repository>@sha256:<manifest digest>``)."""
    target = f"{host_of(registry)}/{repository}"
    digest = ""
    with translate_errors(f"push {target}:{tag}"):
        client.api.tag(image_id, target, tag=tag)
        for line in client.images.push(target, tag=tag, stream=True, decode=True):
            # the engine reports failures as status lines, never as an HTTP error
            if not isinstance(line, dict):
                continue
            if line.get("error") or line.get("errorDetail"):
                detail = line.get("error") or (line.get("errorDetail") or {}).get("message")
                raise registry_error(registry, f"pushing {target}:{tag}: {detail}")
            aux = line.get("aux")
            if isinstance(aux, dict) and aux.get("Digest"):
                digest = aux["Digest"]
    if not digest:
        raise BackendError(f"pushing {target}:{tag}: the engine reported no digest")
    return format_ref(registry, repository, digest)


def pull_image(client: Any, snapshot: SnapshotId) -> Any:
    """Pull the snapshot's image from where it lives off the machine (by digest); the image.
    :class:`SnapshotNotFound` when the registry no longer has it."""
    import docker.errors

    try:
        ref = parse_ref(snapshot.remote)
    except ValueError:
        raise SnapshotNotFound(snapshot) from None
    name = f"{host_of(ref.registry)}/{ref.repository}"
    with translate_errors(f"pull {snapshot.remote}"):
        try:
            for line in client.api.pull(name, tag=ref.digest, stream=True, decode=True):
                if isinstance(line, dict) and (line.get("error") or line.get("errorDetail")):
                    detail = line.get("error") or (line.get("errorDetail") or {}).get("message") or ""
                    if "manifest unknown" in detail or "not found" in detail.lower():
                        raise SnapshotNotFound(snapshot)
                    raise registry_error(ref.registry, f"pulling {snapshot.remote}: {detail}")
        except docker.errors.NotFound:
            raise SnapshotNotFound(snapshot) from None
        except docker.errors.APIError as exc:
            if "manifest unknown" in str(exc) or "not found" in str(exc).lower():
                raise SnapshotNotFound(snapshot) from None
            raise registry_error(ref.registry, f"pulling {snapshot.remote}: {exc.explanation}") from exc
        try:
            return client.images.get(snapshot.ref)
        except docker.errors.ImageNotFound:
            raise BackendError(f"pulled {snapshot.remote} but it is not image {snapshot.ref}") from None


def delete_pushed(remotes: list[str], env_id: str) -> None:
    """Delete the pushed snapshots ``remotes`` (remote references) from their registries, one
    request a repository; a registry that refuses is logged, not raised (the environment is
    closing, and storage still finds them: their tags name ``env_id``)."""
    by_repo: dict[tuple[str, str], list[str]] = {}
    for r in map(parse_ref, remotes):
        by_repo.setdefault((r.registry, r.repository), []).append(r.digest)
    for (registry, repository), digests in by_repo.items():
        try:
            delete_manifests(RegistryClient(registry), repository, digests)
        except SandboxError as exc:
            # storage.environment_items(snap) still finds them (their tags name the env)
            log.warning("could not delete pushed snapshots of %s from %s: %s", env_id, registry, exc)


def registry_error(registry: str, message: str) -> SandboxError:
    """A push/pull failure: the registry unreachable, or another error."""
    from .errors import RegistryError, RegistryUnavailable

    low = message.lower()
    if any(s in low for s in ("connection refused", "no such host", "i/o timeout", "dial tcp",
                              "server gave http response", "connection reset")):
        return RegistryUnavailable(registry, message)
    return RegistryError(message, address=registry)
