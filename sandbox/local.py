"""Local backend: a workspace directory on the host.

The embedded default when no Docker daemon is reachable. Commands run with
``subprocess`` in the workspace (``cwd``), in their own process group so a
timeout kills the whole tree. Snapshots are full copies of the workspace
(``shutil.copytree`` preserving modes and symlinks) under ``<root>/snapshots``.

Off the machine: with ``registry="host:port"`` (and ``repository=``) or
``snapshot_store=`` (any :class:`~unsee.sandbox.remote.SnapshotStore`) every
snapshot is also packed as a deterministic tar.gz and put into the store before
``snapshot()`` returns (``SnapshotId.remote``); ``restore`` of a snapshot whose
directory is missing here (another machine, another root) fetches it and
unpacks it under this environment's own root (``<root>/pulled/``), where it
becomes the workspace (no pulled copy stays behind for erasure to miss).
Snapshots pushed by an environment that does not keep them are deleted from
the store at close, like their directories; ``discard()`` deletes them in
every case.

This backend is *not* a security boundary: commands run as the calling user
with the host's network. Use it for trusted tools and tests; use docker for
untrusted ones.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import uuid
from pathlib import Path

from .base import (
    ALL_CAPABILITIES,
    DEFAULT_FILE_MODE,
    Command,
    Environment,
    ExecResult,
    SnapshotId,
    as_bytes,
)
from .errors import (
    ExecFailed,
    ExecTimeout,
    PathNotFound,
    PathOutsideSandbox,
    SnapshotNotFound,
)
from .remote import DEFAULT_REPOSITORY, OciSnapshotStore, SnapshotStore, pack_dir, unpack_to

__all__ = ["LocalEnvironment"]

log = logging.getLogger(__name__)


class LocalEnvironment(Environment):
    backend = "local"
    capabilities = ALL_CAPABILITIES
    OPTIONS = frozenset({"root", "env", "keep", "env_id", "registry", "repository", "snapshot_store"})

    def __init__(
        self,
        root: str | os.PathLike[str] | None = None,
        *,
        env: dict[str, str] | None = None,
        keep: bool | None = None,
        env_id: str | None = None,
        registry: str | None = None,
        repository: str | None = None,
        snapshot_store: SnapshotStore | None = None,
        _seed: Path | None = None,
    ):
        """``root`` holds ``workspace/`` and ``snapshots/``; a temp dir when None.

        ``keep`` keeps ``root`` on close (default: keep a caller-given root,
        delete a temp one). ``env`` is the environment of commands (default:
        the caller's, with HOME pointing at the workspace).
        ``registry`` (``host:port``, or with a scheme) pushes every snapshot to
        that OCI registry, in ``repository`` (default ``unsee/snapshots``), as
        an artifact tagged ``<env_id>-<seq>``; ``snapshot_store`` puts them into
        any other :class:`~unsee.sandbox.remote.SnapshotStore` instead (not both:
        ValueError). Shadows inherit the store.
        """
        if registry is not None and snapshot_store is not None:
            raise ValueError("give the local backend registry= or snapshot_store=, not both")
        if repository is not None and registry is None:
            raise ValueError("repository= names a repository of registry=, which is missing")
        if snapshot_store is not None and not isinstance(snapshot_store, SnapshotStore):
            raise TypeError(f"snapshot_store must have put/get/delete, not {type(snapshot_store).__name__}")
        if registry is not None:
            # the OCI store checks the names now: bad input changes nothing
            snapshot_store = OciSnapshotStore(registry, repository or DEFAULT_REPOSITORY)
        self.registry = registry
        self.repository = (repository or DEFAULT_REPOSITORY) if registry is not None else None
        self.snapshot_store = snapshot_store
        self._remotes: list[str] = []  # what this environment pushed (deleted with its snapshots)
        self.env_id = env_id or uuid.uuid4().hex[:12]
        if root is None:
            self.root = Path(tempfile.mkdtemp(prefix=f"unsee-local-{self.env_id}-"))
            self._keep = bool(keep)
        else:
            self.root = Path(root).resolve()
            self.root.mkdir(parents=True, exist_ok=True)
            self._keep = True if keep is None else keep
        self.workspace = self.root / "workspace"
        self._snapdir = self.root / "snapshots"
        self._snapdir.mkdir(exist_ok=True)
        if _seed is not None:
            shutil.copytree(_seed, self.workspace, symlinks=True)
        else:
            self.workspace.mkdir(exist_ok=True)
        self._env = env
        self._seq = 0
        self._lock = threading.Lock()
        self._children: list[LocalEnvironment] = []

    # -- paths ------------------------------------------------------------
    def _path(self, path: str) -> Path:
        p = Path(path)
        full = p if p.is_absolute() else self.workspace / p
        # resolve '..' lexically (not symlinks: a link inside may point anywhere
        # but we only guard against escaping by name)
        norm = Path(os.path.normpath(full))
        if norm != self.workspace and self.workspace not in norm.parents:
            raise PathOutsideSandbox(path)
        return norm

    # -- exec -------------------------------------------------------------
    def exec(self, cmd: Command, timeout: float | None = None) -> ExecResult:
        self._require("exec")
        shell = isinstance(cmd, str)
        env = self._env
        if env is None:
            env = dict(os.environ)
            env["HOME"] = str(self.workspace)
        try:
            proc = subprocess.Popen(
                cmd if shell else list(cmd),
                shell=shell,
                cwd=self.workspace,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            raise ExecFailed(f"cannot start {cmd!r}: {exc}", cmd=cmd) from exc
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            out, err = proc.communicate()
            raise ExecTimeout(cmd, timeout or 0.0, out or b"", err or b"") from None
        except BaseException:
            _kill_group(proc)
            proc.wait()
            raise
        return ExecResult(proc.returncode, out, err)

    # -- files ------------------------------------------------------------
    def read_file(self, path: str) -> bytes:
        self._require("files")
        p = self._path(path)
        try:
            return p.read_bytes()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise PathNotFound(path) from None

    def write_file(self, path: str, data: bytes | str, *, mode: int | None = None) -> None:
        self._require("files")
        p = self._path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_name(f".{p.name}.unsee-{uuid.uuid4().hex[:8]}")
        tmp.write_bytes(as_bytes(data))
        os.chmod(tmp, DEFAULT_FILE_MODE if mode is None else mode)
        os.replace(tmp, p)

    def remove_file(self, path: str) -> None:
        self._require("files")
        p = self._path(path)
        try:
            p.unlink()
        except (FileNotFoundError, NotADirectoryError):
            raise PathNotFound(path) from None

    def file_mode(self, path: str) -> int:
        self._require("files")
        p = self._path(path)
        try:
            return p.lstat().st_mode & 0o7777
        except (FileNotFoundError, NotADirectoryError):
            raise PathNotFound(path) from None

    # -- state ------------------------------------------------------------
    def snapshot(self) -> SnapshotId:
        self._require("snapshot")
        with self._lock:
            self._seq += 1
            seq = self._seq
        dest = self._snapdir / f"{seq:06d}"
        shutil.copytree(self.workspace, dest, symlinks=True)
        remote = ""
        if self.snapshot_store is not None:
            try:
                # synchronously: a snapshot a forget needs must be off the machine once it exists
                remote = self.snapshot_store.put(f"{self.env_id}-{seq}", pack_dir(dest))
            except BaseException:
                shutil.rmtree(dest, ignore_errors=True)  # no snapshot, rather than one only here
                raise
            with self._lock:
                self._remotes.append(remote)
        return SnapshotId(self.backend, self.env_id, seq, str(dest), remote)

    def restore(self, snapshot: SnapshotId) -> None:
        self._require("snapshot")
        try:
            src = self._resolve(snapshot)
        except SnapshotNotFound:
            if not (isinstance(snapshot, SnapshotId) and snapshot.backend == self.backend and snapshot.remote):
                raise
            staging = self._pull(snapshot)  # becomes the workspace: no copy of it stays behind
        else:
            staging = self.root / f".restore-{uuid.uuid4().hex[:8]}"
            shutil.copytree(src, staging, symlinks=True)
        old = self.root / f".old-{uuid.uuid4().hex[:8]}"
        with self._lock:
            os.rename(self.workspace, old)
            os.rename(staging, self.workspace)
        shutil.rmtree(old, ignore_errors=True)

    def _resolve(self, snapshot: SnapshotId) -> Path:
        if not isinstance(snapshot, SnapshotId) or snapshot.backend != self.backend:
            raise SnapshotNotFound(snapshot)
        src = Path(snapshot.ref)
        if not src.is_dir() or src.parent.name != "snapshots":
            raise SnapshotNotFound(snapshot)
        return src

    def _pull(self, snapshot: SnapshotId) -> Path:
        """The snapshot fetched from where it lives off the machine, unpacked under our root
        (``<root>/pulled/<key>-<random>``) for the restore to move into place."""
        key = hashlib.sha256(snapshot.remote.encode()).hexdigest()[:32]
        dest = self.root / "pulled" / f"{key}-{uuid.uuid4().hex[:8]}"
        from .oci import parse_ref

        store = self.snapshot_store
        try:  # an OCI reference is pulled from its registry, whatever store this environment pushes to
            ref = parse_ref(snapshot.remote)
        except ValueError:
            if store is None:
                raise SnapshotNotFound(snapshot) from None  # a store's reference, and we were given no store
        else:
            if not (isinstance(store, OciSnapshotStore) and store.registry == ref.registry
                    and store.repository == ref.repository):
                store = OciSnapshotStore(ref.registry, ref.repository)
        try:
            data = store.get(snapshot.remote)
        except LookupError:
            raise SnapshotNotFound(snapshot) from None
        except ValueError:  # not a reference this store understands
            raise SnapshotNotFound(snapshot) from None
        return unpack_to(data, dest)

    def shadow(self) -> "LocalEnvironment":
        self._require("shadow")
        # A shadow keeps its snapshots when its parent does: a committed replay makes the
        # shadow the session's environment, and its snapshots are on the new checkpoints.
        root = self.root.parent / f"{self.root.name}-shadow-{uuid.uuid4().hex[:8]}" if self._keep else None
        child = LocalEnvironment(root, env=self._env, keep=self._keep, _seed=self.workspace,
                                 snapshot_store=self.snapshot_store)
        child.registry, child.repository = self.registry, self.repository
        self._children.append(child)
        return child

    def discard(self) -> None:
        self.close()
        self._delete_remotes()
        shutil.rmtree(self.root, ignore_errors=True)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for child in self._children:
            child.close()
        shutil.rmtree(self.root / "pulled", ignore_errors=True)  # an unpack interrupted mid-way
        if not self._keep:
            self._delete_remotes()
            shutil.rmtree(self.root, ignore_errors=True)

    def _delete_remotes(self) -> None:
        with self._lock:
            remotes, self._remotes = self._remotes, []
        if not remotes:
            return
        try:
            if isinstance(self.snapshot_store, OciSnapshotStore):
                self.snapshot_store.delete_many(remotes)  # one scan of the repository for blob links
            else:
                for ref in remotes:
                    self.snapshot_store.delete(ref)
        except Exception as exc:  # any store's failure: close() must still release the rest
            # storage.environment_items(snap) still finds OCI ones (their tags name the env)
            log.warning("could not delete the snapshots %s pushed: %s", self.env_id, exc)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
