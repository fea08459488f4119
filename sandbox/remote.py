"""Where snapshots live off the machine: the :class:`SnapshotStore` contract and its OCI
implementation.

The local backend keeps its snapshots as directories under its root; opened with
``snapshot_store=`` (any :class:`SnapshotStore`) or ``registry=`` (an
:class:`OciSnapshotStore` on that registry) it also puts every snapshot, packed
as a deterministic gzipped tar (:func:`pack_dir`), into the store, and a restore
on a machine that lacks the directory fetches it from there (:func:`unpack_to`).

A store's reference is opaque to the backend: it goes into
``SnapshotId.remote`` and comes back to ``get``/``delete``. The OCI store's
references are ``<registry>/<repository>@sha256:<manifest digest>``: one OCI
image manifest per snapshot, tagged ``<name>`` (the backend names snapshots
``<env_id>-<seq>``), with a small JSON config
(:data:`~unsee.sandbox.oci.SNAPSHOT_CONFIG_TYPE`) and one layer
(:data:`~unsee.sandbox.oci.SNAPSHOT_LAYER_TYPE`, the tar.gz). Docker's registry
2.8 accepts these media types as they are.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import shutil
import stat
import tarfile
import uuid
from pathlib import Path
from typing import Protocol, runtime_checkable

from .errors import StoredItemNotFound
from .oci import (
    OCI_MANIFEST,
    SNAPSHOT_CONFIG_TYPE,
    SNAPSHOT_LAYER_TYPE,
    RegistryClient,
    check_repository,
    check_tag,
    format_ref,
    parse_ref,
    referenced_blobs,
)

__all__ = [
    "SnapshotStore",
    "OciSnapshotStore",
    "pack_dir",
    "unpack_to",
    "delete_manifests",
    "DEFAULT_REPOSITORY",
]

#: the repository snapshots go to when ``registry=`` is given without ``repository=``
DEFAULT_REPOSITORY = "unsee/snapshots"


@runtime_checkable
class SnapshotStore(Protocol):
    """Somewhere off the machine that keeps snapshot archives (bytes) under a name.

    - ``put(name, data)`` stores ``data`` and returns a reference (a string that
      ``get``/``delete`` understand, e.g. an OCI reference or a database key);
      storing under a name again stores a new version (a new reference).
    - ``get(ref)`` returns the bytes; raises a ``LookupError`` (e.g.
      :class:`~unsee.sandbox.errors.StoredItemNotFound`) when it holds nothing under ``ref``.
    - ``delete(ref)`` deletes them; True when something was deleted, False when
      it was already gone.

    Unreachable stores raise :class:`~unsee.sandbox.errors.SandboxUnavailable`
    (or a subclass), not LookupError: "gone" and "cannot ask" differ.
    """

    def put(self, name: str, data: bytes) -> str: ...

    def get(self, ref: str) -> bytes: ...

    def delete(self, ref: str) -> bool: ...


class OciSnapshotStore:
    """A :class:`SnapshotStore` in an OCI registry (``registry``: ``host:port`` or with a
    scheme), one repository per store (``repository``, e.g. ``unsee/s-<home id>``)."""

    def __init__(self, registry: str, repository: str = DEFAULT_REPOSITORY, *,
                 client: RegistryClient | None = None):
        self.registry = registry.rstrip("/")
        self.repository = check_repository(repository)
        self.client = client or RegistryClient(self.registry)

    def __repr__(self) -> str:
        return f"OciSnapshotStore({self.registry!r}, {self.repository!r})"

    def put(self, name: str, data: bytes) -> str:
        """Push ``data`` as the layer of a manifest tagged ``name``; returns its reference."""
        check_tag(name)
        config = json.dumps({"unsee": "sandbox-snapshot", "name": name, "size": len(data)},
                            sort_keys=True, separators=(",", ":")).encode()
        config_digest = self.client.push_blob(self.repository, config)
        layer_digest = self.client.push_blob(self.repository, data)
        manifest = {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {"mediaType": SNAPSHOT_CONFIG_TYPE, "digest": config_digest, "size": len(config)},
            "layers": [{"mediaType": SNAPSHOT_LAYER_TYPE, "digest": layer_digest, "size": len(data)}],
        }
        digest = self.client.push_manifest(self.repository, name, manifest)
        return format_ref(self.registry, self.repository, digest)

    def _client_for(self, registry: str) -> RegistryClient:
        return self.client if registry == self.registry else RegistryClient(registry)

    def get(self, ref: str) -> bytes:
        """The archive behind ``ref`` (any registry's OCI reference of such an artifact)."""
        r = parse_ref(ref)
        client = self._client_for(r.registry)
        found = client.manifest(r.repository, r.digest)
        if found is None:
            raise StoredItemNotFound(ref)
        _, _, manifest = found
        layers = manifest.get("layers") or []
        if len(layers) != 1 or layers[0].get("mediaType") != SNAPSHOT_LAYER_TYPE:
            raise StoredItemNotFound(f"{ref} (not an unsee snapshot artifact)")
        data = client.blob_bytes(r.repository, layers[0]["digest"])
        if data is None:
            raise StoredItemNotFound(ref)
        return data

    def delete(self, ref: str) -> bool:
        """Delete the manifest behind ``ref`` and the repository's links to blobs that no other
        manifest still tagged there references (their data leaves at garbage-collect)."""
        return bool(self.delete_many([ref]))

    def delete_many(self, refs: list[str]) -> list[str]:
        """:meth:`delete` for several references, one scan of each repository's tags for
        the blob links; returns the references deleted."""
        by_repo: dict[tuple[str, str], list[str]] = {}
        for ref in refs:
            r = parse_ref(ref)
            by_repo.setdefault((r.registry, r.repository), []).append(r.digest)
        done: list[str] = []
        for (registry, repository), digests in by_repo.items():
            deleted, _ = delete_manifests(self._client_for(registry), repository, digests)
            done += [format_ref(registry, repository, d) for d in deleted]
        return done


def delete_manifests(client: RegistryClient, repository: str, digests: list[str]) -> tuple[list[str], list[str]]:
    """Delete manifests of ``repository`` by digest, then the repository's links to the blobs
    they referenced that no remaining tagged manifest references. Returns ``(manifests
    deleted, blob links deleted)``; manifests already gone are skipped."""
    blobs: set[str] = set()
    deleted: list[str] = []
    for digest in digests:
        found = client.manifest(repository, digest)
        if found is None:
            continue
        blobs |= referenced_blobs(found[2])
        if client.delete_manifest(repository, digest):
            deleted.append(digest)
    unlinked: list[str] = []
    if blobs:
        keep: set[str] = set()
        seen: set[str] = set()
        for tag in client.tags(repository):  # one GET per tag: its digest and what it references
            found = client.manifest(repository, tag)
            if found is not None and found[0] not in seen:
                seen.add(found[0])
                keep |= referenced_blobs(found[2])
        for blob in sorted(blobs - keep):
            if client.delete_blob(repository, blob):
                unlinked.append(blob)
    return deleted, unlinked


# -- archives ---------------------------------------------------------------------------


def pack_dir(root: str | os.PathLike[str], *, compresslevel: int = 1) -> bytes:
    """A deterministic gzipped tar of the tree under ``root`` (the root itself as ``.``):
    entries sorted, modes and mtimes kept, owners zeroed, symlinks as links, the gzip
    header without a time. The same tree gives the same bytes (and so the same digest)."""
    root = Path(root)
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tf:
        def add(path: Path, arcname: str) -> None:
            ti = tf.gettarinfo(str(path), arcname)
            ti.uid = ti.gid = 0
            ti.uname = ti.gname = ""
            if ti.isreg():
                with open(path, "rb") as f:
                    tf.addfile(ti, f)
            elif ti.isdir() or ti.issym() or ti.islnk():
                tf.addfile(ti)
            # sockets, fifos, devices: copytree-made snapshots hold none worth keeping

        add(root, ".")
        for dirpath, dirs, files in os.walk(root):
            dirs.sort()
            rel = Path(dirpath).relative_to(root)
            for name in sorted(dirs + files):
                p = Path(dirpath) / name
                add(p, (rel / name).as_posix())
    return gzip.compress(raw.getvalue(), compresslevel=compresslevel, mtime=0)


def _keep_mode(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo | None:
    """tarfile's ``tar`` filter (no absolute names, nothing outside ``dest``, no devices) but
    with the member's mode kept: a snapshot comes back with the bits it had."""
    if member.ischr() or member.isblk() or member.isfifo():
        return None
    checked = tarfile.tar_filter(member, dest)
    return checked.replace(mode=stat.S_IMODE(member.mode), uid=None, gid=None, uname=None, gname=None,
                           deep=False)


def unpack_to(data: bytes, dest: str | os.PathLike[str]) -> Path:
    """Unpack an archive made by :func:`pack_dir` into the new directory ``dest`` (made
    beside it under a temp name, then renamed: a failed unpack leaves nothing)."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = dest.with_name(f".{dest.name}.unpack-{uuid.uuid4().hex[:8]}")
    staging.mkdir()
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tf:
            tf.extractall(staging, filter=_keep_mode)
        os.rename(staging, dest)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return dest
