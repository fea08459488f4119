"""Docker backend: one container per environment, snapshots by ``commit``.

Every container runs with ``network_mode="none"``, memory/pids/CPU limits,
all capabilities dropped, ``no-new-privileges``, and the image's user (the
unsee images run as uid 1000). Containers and images carry labels
(``unsee.sandbox=1``, ``unsee.env=<env id>``, ``unsee.role=container|snapshot|
shadow|base``, and ``unsee.home=<owner id>`` when the caller names an owner:
the id of its unsee home, :mod:`.owner`) so :func:`cleanup` (:mod:`.docker_cleanup`)
can find and remove what unsee made, one home's at a time (the daemon is shared).

- ``snapshot()``: ``container.commit()`` (pauses the container; ~0.2 s for a
  container that wrote 10 MB). Every commit adds one image layer and Docker
  refuses chains deeper than ~125, so when the chain reaches ``flatten_every``
  (default 50) layers the snapshot is made by export + import instead (one
  layer, a few seconds).
- ``restore(snap)``: a fresh container from the snapshot image replaces the
  current one (processes are restarted: only the filesystem is restored).
- ``shadow()``: commit the current state to a private image and start a
  throwaway container from it; closing the shadow removes both.
- ``keep_snapshots=True``: snapshot images survive ``close()`` (for later
  processes; still labelled for cleanup()), and so do those of its shadows;
  ``discard()`` removes them too.
- ``registry="host:port"`` (+ ``repository=``, default ``unsee/snapshots``):
  ``snapshot()`` also tags the snapshot image ``<registry>/<repository>:<env_id>-<seq>``
  and pushes it through the engine before returning (``SnapshotId.remote`` =
  ``<registry>/<repository>@sha256:<manifest digest>``); ``restore`` of a
  snapshot whose image this daemon lacks pulls it by digest (the image id is
  kept by push and pull: :mod:`.docker_registry`). Pushed snapshots follow
  the local ones: deleted from the registry at close unless kept, and by
  ``discard()``. Shadows inherit both.
- Errors: a daemon that is missing raises SandboxUnavailable; one that goes
  away mid-call (the SDK raises ``requests.exceptions.ConnectionError``)
  raises DaemonLost; timeouts ExecTimeout; a command that cannot start
  ExecFailed; other daemon errors BackendError.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import posixpath
import shlex
import tarfile
import threading
import time
import uuid
from typing import Any

from .base import (
    ALL_CAPABILITIES,
    DEFAULT_FILE_MODE,
    Command,
    Environment,
    ExecResult,
    SnapshotId,
    as_bytes,
)
from .docker_api import (
    CLIENT_TIMEOUT,
    INSTALL_HINT,
    daemon_unavailable_reason,
    docker_client,
    translate_errors,
)
from .docker_api import is_not_found as _is_not_found
from .docker_cleanup import CleanupReport, cleanup, count_unowned
from .docker_labels import (
    LABEL_ENV,
    LABEL_HOME,
    LABEL_PARENT,
    LABEL_ROLE,
    LABEL_SANDBOX,
    OWN_LABELS,
    SNAPSHOT_REPO,
)
from .docker_registry import delete_pushed, pull_image, push_image
from .errors import (
    BackendError,
    DaemonLost,
    ExecFailed,
    ExecTimeout,
    PathNotFound,
    SandboxError,
    SandboxUnavailable,
    SnapshotNotFound,
)
from .image import DEFAULT_IMAGE
from .oci import RegistryClient, check_repository
from .remote import DEFAULT_REPOSITORY

__all__ = [
    "DockerEnvironment",
    "cleanup",
    "count_unowned",
    "CleanupReport",
    "LABEL_SANDBOX",
    "LABEL_ENV",
    "LABEL_ROLE",
    "LABEL_PARENT",
    "LABEL_HOME",
    "SNAPSHOT_REPO",
    # re-exported from .docker_api, .docker_labels and .docker_cleanup (their homes) for
    # existing importers (tests/conftest.py, benchmarks/bench_sandbox.py, the sandbox tests)
    "docker_client",
    "daemon_unavailable_reason",
    "translate_errors",
    "INSTALL_HINT",
    "CLIENT_TIMEOUT",
]

log = logging.getLogger(__name__)

# Runs "$2" in its own process group and kills the whole group after "$1"
# seconds (busybox `timeout` would only kill the top process, leaving
# children holding the exec's output pipes open).
_TIMEOUT_WRAPPER = (
    'setsid sh -c "$2" </dev/null & p=$!\n'
    'setsid sh -c "sleep $1; kill -9 -$p" </dev/null >/dev/null 2>&1 & w=$!\n'
    "wait $p; rc=$?\n"
    "kill -9 -$w 2>/dev/null\n"
    "exit $rc\n"
)


# -- the environment ----------------------------------------------------------


class DockerEnvironment(Environment):
    backend = "docker"
    capabilities = ALL_CAPABILITIES
    OPTIONS = frozenset({
        "image", "client", "user", "workdir", "environment", "mem_limit", "pids_limit",
        "nano_cpus", "flatten_every", "keep_snapshots", "env_id", "owner", "registry", "repository",
    })

    def __init__(
        self,
        image: str = DEFAULT_IMAGE,
        *,
        client: Any = None,
        user: str | None = None,
        workdir: str | None = None,
        environment: dict[str, str] | None = None,
        mem_limit: str = "1g",
        pids_limit: int = 256,
        nano_cpus: int = 1_000_000_000,
        flatten_every: int = 50,
        keep_snapshots: bool = False,
        env_id: str | None = None,
        owner: str | None = None,
        registry: str | None = None,
        repository: str | None = None,
        _role: str = "container",
        _parent: str | None = None,
        _owned_images: list[str] | None = None,
    ):
        """Start a container from ``image`` (a tag or image id).

        ``user`` defaults to the image's user (uid 1000 for the unsee images);
        ``workdir`` to the image's working directory. ``keep_snapshots`` keeps
        snapshot images after close (they stay labelled for cleanup()).
        ``owner`` (e.g. the id of the caller's unsee home) labels every container
        and image this environment and its shadows make, so that
        ``cleanup(owner=...)`` removes them and nothing of other owners; without
        one only a daemon-wide ``cleanup(everything=True)`` (or by env id) does.
        ``registry`` (``host:port``) and ``repository``: push every snapshot there
        (see the module docstring).
        """
        import docker.errors

        if repository is not None and registry is None:
            raise ValueError("repository= names a repository of registry=, which is missing")
        if registry is not None:
            RegistryClient(registry)  # checks the address's form (ValueError) before anything starts
            check_repository(repository or DEFAULT_REPOSITORY)
        self.registry = registry.rstrip("/") if registry else None
        self.repository = (repository or DEFAULT_REPOSITORY) if registry else None
        self._remotes: list[str] = []  # what this environment pushed
        self._pulled: list[str] = []  # images pulled to restore (a cache of the registry's)

        self.client = client or docker_client()
        self.env_id = env_id or uuid.uuid4().hex[:12]
        self.image = image
        self.flatten_every = flatten_every
        self.keep_snapshots = keep_snapshots
        self.owner = owner
        self._role = _role
        self._parent = _parent
        self._limits = dict(
            mem_limit=mem_limit, memswap_limit=mem_limit, pids_limit=pids_limit, nano_cpus=nano_cpus
        )
        self._environment = environment
        self._lock = threading.RLock()
        self._seq = 0
        self._owned_images: list[str] = list(_owned_images or [])
        self._snapshots: list[str] = []
        self._children: list[DockerEnvironment] = []
        self._reaper: list[threading.Thread] = []
        self._depths: dict[str, int] = {}  # image id -> layer count, for images we made
        with translate_errors("inspect image"):
            try:
                img = self.client.images.get(image)
            except docker.errors.ImageNotFound:
                raise SandboxUnavailable(
                    f"sandbox image {image!r} not found",
                    backend="docker",
                    hint="build it with `unsee sandbox build-image` "
                    "(or `--flavor busybox` for the small one without python3)",
                ) from None
        cfg = img.attrs.get("Config") or {}
        self.user = user if user is not None else (cfg.get("User") or "")
        self.workdir = workdir or cfg.get("WorkingDir") or "/"
        self._uid, self._gid = _numeric_ids(self.user)
        self._container = self._start(img.id, _depth(img))

    # -- container lifecycle ---------------------------------------------
    def _start(self, image_id: str, depth: int):
        from docker.models.containers import _create_container_args

        kwargs = dict(
            image=image_id,
            command=None,
            network_mode="none",
            user=self.user or None,
            working_dir=self.workdir,
            environment=self._environment,
            hostname="sandbox",
            labels=self._labels(self._role),
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            version=self.client.api._version,
            **self._limits,
        )
        with translate_errors("start container"):
            # create + start without the SDK's extra inspect round-trips (restore latency)
            resp = self.client.api.create_container(**_create_container_args(kwargs))
            try:
                self.client.api.start(resp["Id"])
            except BaseException:
                with contextlib.suppress(Exception):
                    self.client.api.remove_container(resp["Id"], force=True)
                raise
        self._depth = depth
        return self.client.containers.prepare_model({"Id": resp["Id"]})

    def _labels(self, role: str, env_id: str | None = None, parent: str | None = None) -> dict[str, str]:
        labels = {LABEL_SANDBOX: "1", LABEL_ENV: env_id or self.env_id, LABEL_ROLE: role}
        if parent or self._parent:
            labels[LABEL_PARENT] = parent or self._parent
        if self.owner:
            labels[LABEL_HOME] = self.owner
        return labels

    @property
    def container(self):
        return self._container

    def _remove_container_later(self, container) -> None:
        def reap() -> None:
            try:
                container.remove(force=True)
            except Exception as exc:  # cleanup() catches leftovers (labelled)
                log.debug("removing container %s failed: %s", container.id[:12], exc)

        t = threading.Thread(target=reap, name="unsee-docker-reap", daemon=True)
        t.start()
        self._reaper.append(t)

    # -- exec -------------------------------------------------------------
    def exec(self, cmd: Command, timeout: float | None = None) -> ExecResult:
        self._require("exec")
        if timeout is not None:
            shell = cmd if isinstance(cmd, str) else shlex.join(cmd)
            argv = ["sh", "-c", _TIMEOUT_WRAPPER, "unsee-timeout", f"{max(timeout, 0.001):g}", shell]
        else:
            argv = ["sh", "-c", cmd] if isinstance(cmd, str) else list(cmd)
        t0 = time.monotonic()
        code, out, err = self._exec_raw(argv, what=f"exec {cmd!r}")
        elapsed = time.monotonic() - t0
        if timeout is not None and code == 137 and elapsed >= timeout * 0.95:
            raise ExecTimeout(cmd, timeout, out, err)
        if code in (126, 127) and out.startswith(b"OCI runtime exec failed"):
            raise ExecFailed(f"cannot start {cmd!r}: {out.decode(errors='replace').strip()}", cmd=cmd)
        return ExecResult(code, out, err)

    def _exec_raw(self, argv: list[str], *, user: str | None = None, what: str = "exec"):
        with self._lock:
            container = self._container
        import docker.errors
        import requests.exceptions

        try:
            with translate_errors(what):
                res = container.exec_run(argv, demux=True, user=user or "", workdir=self.workdir)
        except DaemonLost as exc:
            if isinstance(exc.__cause__, requests.exceptions.ReadTimeout):
                raise ExecTimeout(argv, CLIENT_TIMEOUT) from exc
            raise
        except BackendError as exc:
            cause = exc.__cause__
            if isinstance(cause, docker.errors.APIError) and cause.status_code in (404, 409):
                raise ExecFailed(f"{what}: container unavailable ({cause.explanation})", cmd=argv) from exc
            raise ExecFailed(f"{what}: {exc}", cmd=argv) from exc
        out, err = res.output if res.output is not None else (None, None)
        if res.exit_code is None:
            raise DaemonLost(f"{what}: the exec ended without an exit code (daemon gone?)")
        return res.exit_code, out or b"", err or b""

    # -- files ------------------------------------------------------------
    def _abs(self, path: str) -> str:
        return posixpath.normpath(posixpath.join(self.workdir, path))

    def read_file(self, path: str) -> bytes:
        self._require("files")
        full = self._abs(path)
        with self._lock:
            container = self._container
        with translate_errors(f"read {path}"):
            try:
                stream, stat = container.get_archive(full)
            except Exception as exc:
                if _is_not_found(exc):
                    raise PathNotFound(path) from None
                raise
            data = b"".join(stream)
        with tarfile.open(fileobj=io.BytesIO(data)) as tf:
            member = tf.next()
            if member is None or not member.isfile():
                raise PathNotFound(path)
            f = tf.extractfile(member)
            return f.read() if f else b""

    def write_file(self, path: str, data: bytes | str, *, mode: int | None = None) -> None:
        self._require("files")
        full = self._abs(path)
        parent, name = posixpath.split(full)
        payload = as_bytes(data)
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tf:
            ti = tarfile.TarInfo(name)
            ti.size, ti.mtime = len(payload), int(time.time())
            ti.mode = DEFAULT_FILE_MODE if mode is None else mode
            ti.uid, ti.gid = self._uid, self._gid
            tf.addfile(ti, io.BytesIO(payload))
        archive = buf.getvalue()
        with self._lock:
            container = self._container
        with translate_errors(f"write {path}"):
            try:
                container.put_archive(parent, archive)
            except Exception as exc:
                if not _is_not_found(exc):
                    raise
                code, _, err = self._exec_raw(["mkdir", "-p", "--", parent], what=f"mkdir {parent}")
                if code != 0:
                    raise ExecFailed(f"cannot create {parent}: {err.decode(errors='replace')}") from None
                container.put_archive(parent, archive)

    def remove_file(self, path: str) -> None:
        self._require("files")
        script = '[ -e "$1" ] || [ -L "$1" ] || exit 3; [ -d "$1" ] && [ ! -L "$1" ] && exit 4; rm -f -- "$1"'
        code, _, err = self._exec_raw(["sh", "-c", script, "rm", self._abs(path)], what=f"remove {path}")
        if code in (3, 4):
            raise PathNotFound(path)
        if code != 0:
            raise ExecFailed(f"cannot remove {path}: {err.decode(errors='replace').strip()}")

    def file_mode(self, path: str) -> int:
        self._require("files")
        script = '[ -e "$1" ] || [ -L "$1" ] || exit 3; stat -c %a -- "$1"'
        code, out, err = self._exec_raw(["sh", "-c", script, "stat", self._abs(path)], what=f"stat {path}")
        if code == 3:
            raise PathNotFound(path)
        if code != 0:
            raise ExecFailed(f"cannot stat {path}: {err.decode(errors='replace').strip()}")
        return int(out.strip(), 8)

    # -- state ------------------------------------------------------------
    def snapshot(self) -> SnapshotId:
        self._require("snapshot")
        with self._lock:
            self._seq += 1
            seq = self._seq
            image_id = self._capture(f"{self.env_id}-{seq}", role="snapshot")
            remote = ""
            if self.registry:
                try:
                    # synchronously: a snapshot a forget needs must be off the machine once it exists
                    remote = self._push(image_id, f"{self.env_id}-{seq}")
                except BaseException:
                    _remove_images(self.client, [image_id])  # no snapshot, rather than one only here
                    raise
                self._remotes.append(remote)
            self._snapshots.append(image_id)
            return SnapshotId(self.backend, self.env_id, seq, image_id, remote)

    def _push(self, image_id: str, tag: str) -> str:
        """Tag ``image_id`` in the registry's repository and push it; its remote reference."""
        return push_image(self.client, self.registry, self.repository, image_id, tag)

    def _pull(self, snapshot: SnapshotId) -> Any:
        """Pull the snapshot's image from where it lives off the machine (by digest)."""
        img = pull_image(self.client, snapshot)
        self._pulled.append(img.id)
        return img

    def _capture(self, tag: str, *, role: str, labels_for: dict[str, str] | None = None) -> str:
        """Commit (or flatten) the current container to ``unsee-snap:<tag>``; returns the image id."""
        labels = [f"LABEL {k}={v}" for k, v in (labels_for or self._labels(role)).items()]
        if self._depth + 1 >= self.flatten_every:
            return self._flatten(tag, labels)
        with translate_errors("commit"):
            img = self._container.commit(repository=SNAPSHOT_REPO, tag=tag, changes=labels, pause=True)
        # we know a commit adds exactly one layer; avoids an inspect round-trip
        self._depth += 1
        self._depths[img.id] = self._depth
        return img.id

    def _flatten(self, tag: str, labels: list[str]) -> str:
        """Snapshot by export + import: a one-layer image (resets the depth)."""
        c = self._container
        with translate_errors("flatten"):
            c.reload()
            cfg = c.attrs.get("Config") or {}
            changes = list(labels)
            if cfg.get("User"):
                changes.append(f"USER {cfg['User']}")
            if cfg.get("WorkingDir"):
                changes.append(f"WORKDIR {cfg['WorkingDir']}")
            for kv in cfg.get("Env") or []:
                k, _, v = kv.partition("=")
                changes.append(f"ENV {k}={json.dumps(v)}")
            if cfg.get("Cmd"):
                changes.append(f"CMD {json.dumps(cfg['Cmd'])}")
            for k, v in (cfg.get("Labels") or {}).items():
                if k not in OWN_LABELS:
                    changes.append(f"LABEL {k}={json.dumps(v)}")
            c.pause()
            try:
                self.client.api.import_image(
                    src=c.export(), stream_src=True, repository=SNAPSHOT_REPO, tag=tag, changes=changes
                )
            finally:
                c.unpause()
            img = self.client.images.get(f"{SNAPSHOT_REPO}:{tag}")
        self._depth = 1
        self._depths[img.id] = 1
        log.info("flattened %s into a one-layer image %s", self.env_id, img.id[:19])
        return img.id

    def restore(self, snapshot: SnapshotId) -> None:
        self._require("snapshot")
        import docker.errors

        if not isinstance(snapshot, SnapshotId) or snapshot.backend != self.backend:
            raise SnapshotNotFound(snapshot)
        depth = self._depths.get(snapshot.ref)
        if depth is None:
            with translate_errors("inspect snapshot"):
                try:
                    depth = _depth(self.client.images.get(snapshot.ref))
                except docker.errors.ImageNotFound:
                    if not snapshot.remote:
                        raise SnapshotNotFound(snapshot) from None
                    depth = None
            if depth is None:  # not on this daemon: from the registry
                depth = _depth(self._pull(snapshot))
        with self._lock:
            old = self._container
            try:
                self._container = self._start(snapshot.ref, depth)
            except BackendError as exc:
                cause = exc.__cause__
                if not isinstance(cause, docker.errors.NotFound):
                    raise
                if not snapshot.remote:
                    raise SnapshotNotFound(snapshot) from exc
                # removed from this daemon since we made it (erased, cleaned up): from the registry
                self._container = self._start(snapshot.ref, _depth(self._pull(snapshot)))
        self._remove_container_later(old)

    def shadow(self) -> "DockerEnvironment":
        self._require("shadow")
        with self._lock:
            child_id = uuid.uuid4().hex[:12]
            labels = self._labels("shadow", env_id=child_id, parent=self.env_id)
            image_id = self._capture(f"{self.env_id}-shadow-{child_id}", role="shadow", labels_for=labels)
        child = DockerEnvironment(
            image_id,
            client=self.client,
            user=self.user,
            workdir=self.workdir,
            environment=self._environment,
            flatten_every=self.flatten_every,
            env_id=child_id,
            owner=self.owner,  # a shadow's container and images are its parent's owner's
            keep_snapshots=self.keep_snapshots,  # a committed replay's shadow becomes the session's
            registry=self.registry,
            repository=self.repository,
            _role="shadow",
            _parent=self.env_id,
            _owned_images=[image_id],
            **{k: v for k, v in self._limits.items() if k != "memswap_limit"},
        )
        self._children.append(child)
        return child

    def discard(self) -> None:
        self.keep_snapshots = False
        self.close()

    def delete_snapshot(self, snapshot: SnapshotId) -> None:
        """Remove a snapshot's image now (e.g. to erase what it holds)."""
        with self._lock:
            if snapshot.ref in self._snapshots:
                self._snapshots.remove(snapshot.ref)
        _remove_images(self.client, [snapshot.ref], strict=True, snapshot=snapshot)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for child in self._children:
            child.close()
        import docker.errors

        try:
            with translate_errors("remove container"):
                try:
                    self._container.remove(force=True)
                except docker.errors.NotFound:
                    pass  # already gone (e.g. erased): nothing left to remove
        except SandboxError as exc:
            log.warning("closing %s: %s (cleanup() removes leftovers)", self.env_id, exc)
        for t in self._reaper:
            t.join(timeout=30)
        images = list(self._owned_images) + self._pulled
        if not self.keep_snapshots:
            images += self._snapshots
            self._delete_remotes()
        _remove_images(self.client, list(reversed(images)))

    def _delete_remotes(self) -> None:
        remotes, self._remotes = self._remotes, []
        delete_pushed(remotes, self.env_id)


def _remove_images(client, refs: list[str], *, strict: bool = False, snapshot: Any = None) -> None:
    import docker.errors

    for ref in refs:
        try:
            with translate_errors("remove image"):
                try:
                    client.images.remove(ref, force=True, noprune=False)
                except docker.errors.ImageNotFound:
                    if strict:
                        raise SnapshotNotFound(snapshot or ref) from None
        except (BackendError, DaemonLost) as exc:
            if strict:
                raise
            log.warning("could not remove image %s: %s (cleanup() removes leftovers)", ref[:19], exc)


def _depth(image) -> int:
    return len(((image.attrs.get("RootFS") or {}).get("Layers")) or [])


def _numeric_ids(user: str) -> tuple[int, int]:
    u, _, g = (user or "0").partition(":")
    try:
        uid = int(u)
    except ValueError:
        uid = 0 if u in ("", "root") else 1000
    try:
        gid = int(g) if g else uid
    except ValueError:
        gid = uid
    return uid, gid

