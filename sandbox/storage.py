"""What a sandbox stores, without the environment that stored it.

Erasure and its audit need to find, read and delete every stored copy of an
environment's state in a process that never opened that environment (a later
``unsee forget``, an auditor). Everything here works from a
:class:`~unsee.sandbox.base.SnapshotId` or a :class:`StoredItem` alone and
dispatches on the backend:

===========  =================================  ==================================
backend      stored items (``kind``: ``ref``)   read / delete
===========  =================================  ==================================
``local``    ``snapshot``: ``<root>/snapshots/  walk the directory / ``rmtree``
             NNNNNN``; ``workspace``:           (refused unless the path has that
             ``<root>/workspace``               shape: :class:`StorageRefused`)
``docker``   ``snapshot``: a snapshot image id; the daemon's overlay2 layer directories
                                                in place when readable (a local daemon;
                                                the offline-built ``unsee-sandbox:*``
                                                layers skipped), else the layers of
                                                ``images.get().save()``
             ``image``: another image labelled  (classic ``<id>/layer.tar`` and OCI
             with the env (a shadow's base);    ``blobs/sha256/*``, plain or gzip) /
             ``container``: a container id      ``images.remove(force=True)``;
                                                ``container.export()`` /
                                                ``remove(force=True)``
===========  =================================  ==================================

Both backends' snapshots may also live in an OCI registry (``SnapshotId.remote``,
an environment opened with ``registry=``): items of kind ``remote`` whose ref is
``<registry>/<repository>@sha256:<manifest digest>``. Reading one fetches the
files of its layers through the distribution API (the offline-built
``unsee-sandbox:*`` base layers of a docker image skipped, as for the daemon's
images); deleting one deletes the manifest by digest, and ``delete_items``
then deletes the repository's links to the blobs no remaining manifest there
references. The blob *data* leaves the registry's disk when its
garbage-collect runs: :func:`collect_registry_garbage`.

The ``python`` backend keeps its snapshots in memory: nothing is stored, so
there is nothing here for it (:class:`NotSupported`).

Docker images share layers, which decides what deleting one frees (measured
with Docker 20.10, overlay2, classic image store):

- every ``snapshot()`` commits the container's *whole* writable layer on top of
  the image the container was started from: snapshots taken by one container
  are siblings (each one layer over the same parent), and only a snapshot
  taken after ``restore(s)`` is a *child* of ``s``;
- deleting an image nothing descends from (a later snapshot while the earlier
  ones are kept) removes it and frees its own layer: its bytes are gone from
  the daemon's data root; the earlier snapshots still restore;
- deleting an image that a kept image was committed on top of (an earlier
  snapshot while a later child is kept), or that a running container uses,
  is refused by the daemon even with ``force`` ("cannot be forced"; its tag
  stays): :func:`delete_item` raises :class:`StorageInUse`. The kept child needs
  those layers: whatever the parent holds, the child holds too. So delete
  later images first (``delete_items`` orders them), and containers before
  the images they run.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import tarfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from .base import SnapshotId
from .errors import NotSupported, StorageInUse, StorageRefused, StoredItemNotFound
from .oci import RegistryClient, format_ref, garbage_collect, is_remote_ref, parse_ref
from .remote import delete_manifests

__all__ = [
    "StoredItem",
    "snapshot_item",
    "snapshot_items",
    "remote_item",
    "environment_items",
    "read_item",
    "delete_item",
    "delete_items",
    "collect_registry_garbage",
]

Kind = Literal["snapshot", "workspace", "image", "container", "remote"]

_SNAPSHOT_DIR = re.compile(r"\d{6,}")


@dataclass(frozen=True)
class StoredItem:
    """One stored copy: a local directory, a docker image or a docker container, or a
    manifest in an OCI registry (kind ``remote``, of either backend)."""

    backend: str
    kind: Kind
    env_id: str
    #: a directory path (local), an image id or a container id (docker), an OCI
    #: reference ``<registry>/<repository>@sha256:...`` (remote)
    ref: str

    def describe(self) -> str:
        ref = self.ref if self.backend == "local" or self.kind == "remote" else _short(self.ref)
        return f"{self.backend} {self.kind} {ref} of environment {self.env_id}"


def _docker_client():
    """The docker SDK client the docker backend uses (per ``DOCKER_HOST``)."""
    from .docker_api import docker_client as client

    return client()


# -- finding ------------------------------------------------------------------


def snapshot_item(snap: SnapshotId) -> StoredItem:
    """The stored copy behind one snapshot."""
    _check_backend(snap.backend)
    return StoredItem(snap.backend, "snapshot", snap.env_id, snap.ref)


def remote_item(snap: SnapshotId) -> StoredItem | None:
    """The copy of ``snap`` in an OCI registry (kind ``remote``); None when it was not pushed
    (or was pushed to a snapshot store that is not a registry: that store's owner erases it)."""
    _check_backend(snap.backend)
    if not snap.remote or not is_remote_ref(snap.remote):
        return None
    return StoredItem(snap.backend, "remote", snap.env_id, snap.remote)


def snapshot_items(snap: SnapshotId) -> list[StoredItem]:
    """Every stored copy of one snapshot: the local one and, when it was pushed, the remote one."""
    remote = remote_item(snap)
    return [snapshot_item(snap), *([remote] if remote else [])]


def _remote_env_items(snap: SnapshotId) -> list[StoredItem]:
    """The manifests of ``snap``'s environment in its repository: every tag ``<env_id>-*``
    and the snap's own remote (by digest, once each)."""
    own = remote_item(snap)
    if own is None:
        return []
    r = parse_ref(own.ref)
    client = RegistryClient(r.registry)
    digests = dict.fromkeys(client.tagged_manifests(r.repository, prefix=f"{snap.env_id}-").values())
    if client.manifest_digest(r.repository, r.digest) is not None:
        digests.setdefault(r.digest)
    return [StoredItem(snap.backend, "remote", snap.env_id, format_ref(r.registry, r.repository, d))
            for d in digests]


def environment_items(snap: SnapshotId, *, client: Any = None) -> list[StoredItem]:
    """Everything stored for the environment that made ``snap`` (any of its snapshots).

    local: every snapshot directory beside ``snap`` and the environment's
    workspace (when they exist). docker: every image labelled with the env id
    (its snapshots and, for a shadow, the base image it was started from; untagged
    ones included) and every container labelled with it (running or not).
    Its shadows are environments of their own (their snapshots name them).
    When ``snap`` was pushed to an OCI registry: also the manifests of the
    environment there (kind ``remote``: the tags ``<env_id>-*`` of its
    repository, and ``snap.remote``). Raises RegistryUnavailable when that
    registry cannot be reached.
    """
    _check_backend(snap.backend)
    return _local_env_items(snap, client=client) + _remote_env_items(snap)


def _local_env_items(snap: SnapshotId, *, client: Any = None) -> list[StoredItem]:
    if snap.backend == "local":
        snapdir = Path(snap.ref).parent
        items = []
        if snapdir.is_dir():
            items = [StoredItem("local", "snapshot", snap.env_id, str(p))
                     for p in sorted(snapdir.iterdir())
                     if p.is_dir() and not p.is_symlink() and _SNAPSHOT_DIR.fullmatch(p.name)]
        workspace = snapdir.parent / "workspace"
        if workspace.is_dir():
            items.append(StoredItem("local", "workspace", snap.env_id, str(workspace)))
        return items
    from .docker_api import translate_errors
    from .docker_labels import LABEL_ENV, LABEL_ROLE

    client = client or _docker_client()
    label = {"label": [f"{LABEL_ENV}={snap.env_id}"]}
    with translate_errors("list stored items"):
        images = client.images.list(all=True, filters=label)
        containers = client.containers.list(all=True, filters=label)
    images.sort(key=lambda i: i.attrs.get("Created", ""))
    items = [StoredItem("docker", "snapshot" if (i.labels or {}).get(LABEL_ROLE) == "snapshot" else "image",
                        snap.env_id, i.id) for i in images]
    items += [StoredItem("docker", "container", snap.env_id, c.id) for c in containers]
    return items


# -- reading ------------------------------------------------------------------


def read_item(item: StoredItem, *, client: Any = None) -> Iterator[tuple[str, bytes]]:
    """``(path, content)`` of every regular file the item stores.

    local: the files under the directory (paths relative to it). docker image:
    the regular files of every layer, read from the ``save()`` stream one member
    at a time (so a path changed in several layers comes once per layer, and a
    file deleted in a later layer still shows: its bytes are stored). docker
    container: the files of ``export()`` (its whole filesystem). Symlinks,
    hard links (their content is their first occurrence) and whiteouts are not
    files. Raises :class:`StoredItemNotFound` when the item is gone.
    """
    _check_backend(item.backend)
    if item.kind == "remote":
        return _read_remote(item, client)
    if item.backend == "local":
        return _read_dir(item)
    return _read_docker(item, client or _docker_client())


def _read_remote(item: StoredItem, client: Any) -> Iterator[tuple[str, bytes]]:
    """The files of every layer of a manifest in a registry, fetched through its API (one
    layer in memory at a time; the docker base layers skipped)."""
    r = parse_ref(item.ref)
    reg = RegistryClient(r.registry)
    found = reg.manifest(r.repository, r.digest)
    if found is None:
        raise StoredItemNotFound(item)
    _, media_type, manifest = found
    if "layers" not in manifest:
        raise NotSupported(f"{item.describe()}: a {media_type or 'manifest'} without layers (an index?)")
    layers = list(manifest.get("layers") or [])
    skip: set[str] = set()
    if item.backend == "docker":
        skip = _base_layers_of(reg, r.repository, manifest, layers, client)

    def files() -> Iterator[tuple[str, bytes]]:
        for layer in layers:
            digest = layer.get("digest", "")
            if digest in skip:
                continue
            data = reg.blob_bytes(r.repository, digest)
            if data is None:
                raise StoredItemNotFound(item)
            if data[:4] == b"\x28\xb5\x2f\xfd":
                raise NotSupported(f"{item.describe()}: layer {digest} is zstd-compressed; cannot read it here")
            if data[:2] == b"\x1f\x8b":
                mode = "r|gz"
            elif len(data) >= 512 and data[257:262] == b"ustar":
                mode = "r|"
            else:
                continue  # an empty layer, or not a tar
            yield from _members(io.BytesIO(data), mode)

    return files()


def _base_layers_of(reg: RegistryClient, repository: str, manifest: dict, layers: list[dict],
                    client: Any) -> set[str]:
    """The layer blobs of a docker image's manifest that are layers of the offline-built
    ``unsee-sandbox:*`` images: compared by uncompressed digest (the config's ``diff_ids``)
    with the local base images' ``RootFS.Layers``. With no daemon to ask, none is skipped:
    every layer is read (more bytes, never fewer)."""
    try:
        client = client or _docker_client()
        base = {d for img in client.images.list(name="unsee-sandbox")
                for d in ((img.attrs.get("RootFS") or {}).get("Layers") or [])}
    except Exception:  # no daemon here: read them all
        return set()
    cfg = manifest.get("config") or {}
    raw = reg.blob_bytes(repository, cfg.get("digest", "")) if cfg.get("digest") else None
    if raw is None:
        return set()
    try:
        diff_ids = (json.loads(raw).get("rootfs") or {}).get("diff_ids") or []
    except ValueError:
        return set()
    if len(diff_ids) != len(layers):
        return set()
    return {layer.get("digest", "") for layer, diff in zip(layers, diff_ids) if diff in base}


def _read_dir(item: StoredItem) -> Iterator[tuple[str, bytes]]:
    root = Path(item.ref)
    if not root.is_dir() or root.is_symlink():
        raise StoredItemNotFound(item)

    def walk() -> Iterator[tuple[str, bytes]]:
        for dirpath, _dirs, files in os.walk(root):
            for name in sorted(files):
                p = Path(dirpath) / name
                if p.is_file() and not p.is_symlink():
                    yield p.relative_to(root).as_posix(), p.read_bytes()

    return walk()


def _read_docker(item: StoredItem, client: Any) -> Iterator[tuple[str, bytes]]:
    import docker.errors

    from .docker_api import translate_errors

    with translate_errors(f"read {item.describe()}"):
        try:
            obj = client.containers.get(item.ref) if item.kind == "container" else client.images.get(item.ref)
        except docker.errors.NotFound:
            raise StoredItemNotFound(item) from None
        dirs = _layer_dirs(getattr(obj, "attrs", None) or {})
        if dirs is not None:
            # The daemon's own overlay2 layer directories, read in place: the same bytes a
            # `docker save`/`export` would stream, without streaming the base image each time.
            base = _base_layer_dirs(client)
            return _read_layer_dirs([d for d in dirs if d not in base])
        try:
            if item.kind == "container":
                chunks = client.containers.get(item.ref).export()
                return _translated(_members(_ChunkReader(chunks)), f"read {item.describe()}")
            chunks = client.images.get(item.ref).save()
        except docker.errors.NotFound:
            raise StoredItemNotFound(item) from None
    return _translated(_image_files(_ChunkReader(chunks), item.describe()), f"read {item.describe()}")


def _layer_dirs(attrs: dict) -> list[Path] | None:
    """The overlay2 directories (upper first) of an image or container, when this process can
    read them (a local daemon, run as root); None otherwise (then the stream API is used)."""
    gd = attrs.get("GraphDriver") or {}
    if gd.get("Name") != "overlay2":
        return None
    data = gd.get("Data") or {}
    dirs = [Path(d) for d in [data.get("UpperDir"), *(data.get("LowerDir") or "").split(":")] if d]
    if not dirs or not all(d.is_dir() and os.access(d, os.R_OK | os.X_OK) for d in dirs):
        return None
    return dirs


def _base_layer_dirs(client: Any) -> set[Path]:
    """Layers of the sandbox images built offline (``unsee-sandbox:*``): no session wrote there."""
    out: set[Path] = set()
    for img in client.images.list(name="unsee-sandbox"):
        out.update(_layer_dirs(img.attrs) or [])
    return out


def _read_layer_dirs(dirs: list[Path]) -> Iterator[tuple[str, bytes]]:
    for d in dirs:
        for root, _, files in os.walk(d):
            for f in files:
                p = Path(root) / f
                if p.is_file() and not p.is_symlink() and not f.startswith(".wh."):
                    yield str(p.relative_to(d)), p.read_bytes()


def _translated(files: Iterator[tuple[str, bytes]], what: str) -> Iterator[tuple[str, bytes]]:
    from .docker_api import translate_errors

    with translate_errors(what):
        yield from files


def _image_files(stream: io.RawIOBase, what: str) -> Iterator[tuple[str, bytes]]:
    """The files of every layer tarball in a ``docker save`` stream."""
    with tarfile.open(fileobj=stream, mode="r|") as outer:
        for member in outer:
            if not member.isfile() or member.size == 0:
                continue  # symlinked layers (legacy <id>/layer.tar -> ...) come once as files
            f = outer.extractfile(member)
            if f is None:
                continue
            head = f.read(512)
            if head[:4] == b"\x28\xb5\x2f\xfd":
                raise NotSupported(f"{what}: layer {member.name} is zstd-compressed; cannot read it here")
            if head[:2] == b"\x1f\x8b":
                mode = "r|gz"
            elif len(head) == 512 and head[257:262] == b"ustar":
                mode = "r|"
            else:
                continue  # a config, manifest or index (JSON), or an empty layer
            yield from _members(_Prefixed(head, f), mode)


def _members(stream: Any, mode: str = "r|") -> Iterator[tuple[str, bytes]]:
    with tarfile.open(fileobj=stream, mode=mode) as tf:
        for m in tf:
            if not m.isfile():
                continue
            name = PurePosixPath(m.name.lstrip("/"))
            if name.name.startswith(".wh."):
                continue  # a whiteout marker (a deletion), not a file
            f = tf.extractfile(m)
            yield str(name).removeprefix("./"), f.read() if f else b""


class _ChunkReader(io.RawIOBase):
    """A readable stream over an iterator of byte chunks (docker's ``save()``/``export()``)."""

    def __init__(self, chunks: Iterable[bytes]):
        self._it = iter(chunks)
        self._buf = memoryview(b"")

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        while not len(self._buf):
            try:
                self._buf = memoryview(next(self._it))
            except StopIteration:
                return 0
        n = min(len(b), len(self._buf))
        b[:n] = self._buf[:n]
        self._buf = self._buf[n:]
        return n

    def close(self) -> None:
        close = getattr(self._it, "close", None)
        if close is not None:
            close()
        super().close()


class _Prefixed(io.RawIOBase):
    """``head`` (already read) followed by the rest of ``rest``."""

    def __init__(self, head: bytes, rest: Any):
        self._head = head
        self._rest = rest

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        if self._head:
            n = min(len(b), len(self._head))
            b[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        data = self._rest.read(len(b))
        b[:len(data)] = data
        return len(data)


# -- deleting -----------------------------------------------------------------


def delete_item(item: StoredItem, *, client: Any = None) -> bool:
    """Delete one stored copy; True if something was deleted, False if it was already gone.

    local: ``rmtree`` of a ``<root>/snapshots/NNNNNN`` or ``<root>/workspace``
    directory (the kind must match; anything else raises :class:`StorageRefused`,
    so a bad ref never removes another directory). docker: ``images.remove(id,
    force=True, noprune=False)`` (which frees the image's own layers) or
    ``containers.get(id).remove(force=True)``. An image the daemon still needs
    (a kept image committed on top of it, a running container) raises
    :class:`StorageInUse` (see the module docstring).
    """
    _check_backend(item.backend)
    if item.kind == "remote":
        return _delete_remote(item)
    if item.backend == "local":
        return _delete_dir(item)
    return _delete_docker(item, client or _docker_client())


def _delete_remote(item: StoredItem) -> bool:
    try:
        r = parse_ref(item.ref)
    except ValueError:
        raise StorageRefused(f"refusing to delete {item.ref!r} as a remote item: not "
                             "<registry>/<repository>@sha256:<digest>") from None
    return RegistryClient(r.registry).delete_manifest(r.repository, r.digest)


def deletion_order(items: Iterable[StoredItem], *, client: Any = None) -> list[StoredItem]:
    """``items`` in an order the daemon accepts deleting them in: containers, then images
    children before parents, then directories."""
    items = list(items)
    containers = [i for i in items if i.kind == "container"]
    images = [i for i in items if i.backend == "docker" and i.kind in ("snapshot", "image")]
    if containers or images:
        images = _newest_first(images, client or _docker_client())
    remote = [i for i in items if i.kind == "remote"]
    dirs = [i for i in items if i not in containers and i not in images and i not in remote]
    return [*containers, *images, *dirs, *remote]


def delete_items(items: Iterable[StoredItem], *, client: Any = None) -> list[StoredItem]:
    """Delete several items in :func:`deletion_order`; returns those that were deleted
    (the first failure raises: use ``deletion_order`` + ``delete_item`` to go on past one).

    Remote items are deleted per repository, and then the repository's links to the
    blobs they referenced that no remaining tagged manifest there references (the blob
    data stays until :func:`collect_registry_garbage`)."""
    items = list(items)
    if any(i.backend == "docker" and i.kind != "remote" for i in items):
        client = client or _docker_client()
    ordered = deletion_order(items, client=client)
    done = [i for i in ordered if i.kind != "remote" and delete_item(i, client=client)]
    by_repo: dict[tuple[str, str], list[tuple[StoredItem, str]]] = {}
    for i in ordered:
        if i.kind == "remote":
            try:
                r = parse_ref(i.ref)
            except ValueError:
                raise StorageRefused(f"refusing to delete {i.ref!r} as a remote item: not "
                                     "<registry>/<repository>@sha256:<digest>") from None
            by_repo.setdefault((r.registry, r.repository), []).append((i, r.digest))
    for (registry, repository), pairs in by_repo.items():
        deleted, _ = delete_manifests(RegistryClient(registry), repository, [d for _, d in pairs])
        done += [i for i, d in pairs if d in deleted]
    return done


def collect_registry_garbage(registry: str, config: str | os.PathLike[str] | None = None) -> str:
    """After remote items were deleted: run the registry's garbage-collect when its config
    is known here (``config``, else ``$UNSEE_REGISTRY_CONFIG``) and say what happened to the
    blob data, as a sentence for a receipt. RegistryError when the collect itself fails."""
    config = config or os.environ.get("UNSEE_REGISTRY_CONFIG")
    if not config:
        return (f"blob data in {registry} stays until the registry's garbage-collect runs "
                "(no UNSEE_REGISTRY_CONFIG here)")
    report = garbage_collect(config)
    n = sum(1 for line in report.splitlines() if "blob eligible for deletion" in line
            or "Deleting blob" in line)
    return f"blobs removed by garbage-collect on {registry} ({n} blob(s) deleted from its storage)"


def _newest_first(images: list[StoredItem], client: Any) -> list[StoredItem]:
    """Children before parents: a commit adds a layer, so more layers first."""
    import docker.errors

    from .docker_api import translate_errors

    order: dict[str, tuple[int, str]] = {}
    with translate_errors("inspect images"):
        for i in images:
            try:
                attrs = client.images.get(i.ref).attrs
            except docker.errors.NotFound:
                order[i.ref] = (0, "")
                continue
            order[i.ref] = (len((attrs.get("RootFS") or {}).get("Layers") or []), attrs.get("Created", ""))
    return sorted(images, key=lambda i: order[i.ref], reverse=True)


def _delete_dir(item: StoredItem) -> bool:
    p = Path(os.path.abspath(item.ref))
    if item.kind == "snapshot":
        ok = p.parent.name == "snapshots" and _SNAPSHOT_DIR.fullmatch(p.name) is not None
    elif item.kind == "workspace":
        ok = p.name == "workspace" and (p.parent / "snapshots").is_dir()
    else:
        ok = False
    if not ok:
        raise StorageRefused(
            f"refusing to delete {item.ref!r} as a local {item.kind}: not a <env root>/snapshots/NNNNNN "
            "or <env root>/workspace directory"
        )
    if not p.exists() and not p.is_symlink():
        return False
    if p.is_symlink() or not p.is_dir():
        raise StorageRefused(f"refusing to delete {item.ref!r}: not a directory")
    shutil.rmtree(p)
    return True


def _delete_docker(item: StoredItem, client: Any) -> bool:
    import docker.errors

    from .docker_api import translate_errors

    with translate_errors(f"delete {item.describe()}"):
        try:
            if item.kind == "container":
                try:
                    client.containers.get(item.ref).remove(force=True)
                except docker.errors.APIError as exc:
                    if exc.status_code != 409 or not _gone(client, item.ref):
                        raise
                    return False  # its removal was already under way (a restore's reaper)
                return True
            if item.kind not in ("snapshot", "image"):
                raise StorageRefused(f"a docker item has no kind {item.kind!r}")
            records = client.api.remove_image(item.ref, force=True, noprune=False) or []
        except docker.errors.NotFound:
            return False
        except docker.errors.APIError as exc:
            if exc.status_code == 409:
                raise StorageInUse(f"cannot delete {item.describe()} yet: {exc.explanation}") from exc
            raise
    if not any("Deleted" in r for r in records if isinstance(r, dict)):
        # a daemon that only untags an image it still needs (its layers stay)
        raise StorageInUse(f"{item.describe()} was only untagged: the daemon still needs it")
    return True


# -- helpers ------------------------------------------------------------------


def _gone(client: Any, container_id: str, timeout: float = 30.0) -> bool:
    """Wait for a container someone else is removing to be gone."""
    import docker.errors

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            client.containers.get(container_id)
        except docker.errors.NotFound:
            return True
        time.sleep(0.1)
    return False


def _check_backend(backend: str) -> None:
    if backend not in ("local", "docker"):
        raise NotSupported(f"the {backend!r} backend stores nothing unsee.sandbox.storage can find")


def _short(ref: str) -> str:
    return ref[:19] if ref.startswith("sha256:") else ref[:12]
