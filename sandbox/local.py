"""Local backend: a workspace directory on the host.

The embedded default when no Docker daemon is reachable. Commands run with
``subprocess`` in the workspace (``cwd``), in their own process group so a
timeout kills the whole tree. Snapshots are full copies of the workspace
(``shutil.copytree`` preserving modes and symlinks) under ``<root>/snapshots``.

This backend is *not* a security boundary: commands run as the calling user
with the host's network. Use it for trusted tools and tests; use docker for
untrusted ones.
"""

from __future__ import annotations

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
from .errors import ExecFailed, ExecTimeout, PathNotFound, PathOutsideSandbox, SnapshotNotFound

__all__ = ["LocalEnvironment"]


class LocalEnvironment(Environment):
    backend = "local"
    capabilities = ALL_CAPABILITIES
    OPTIONS = frozenset({"root", "env", "keep", "env_id"})

    def __init__(
        self,
        root: str | os.PathLike[str] | None = None,
        *,
        env: dict[str, str] | None = None,
        keep: bool | None = None,
        env_id: str | None = None,
        _seed: Path | None = None,
    ):
        """``root`` holds ``workspace/`` and ``snapshots/``; a temp dir when None.

        ``keep`` keeps ``root`` on close (default: keep a caller-given root,
        delete a temp one). ``env`` is the environment of commands (default:
        the caller's, with HOME pointing at the workspace).
        """
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
        return SnapshotId(self.backend, self.env_id, seq, str(dest))

    def restore(self, snapshot: SnapshotId) -> None:
        self._require("snapshot")
        src = self._resolve(snapshot)
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

    def shadow(self) -> "LocalEnvironment":
        self._require("shadow")
        # A shadow keeps its snapshots when its parent does: a committed replay makes the
        # shadow the session's environment, and its snapshots are on the new checkpoints.
        root = self.root.parent / f"{self.root.name}-shadow-{uuid.uuid4().hex[:8]}" if self._keep else None
        child = LocalEnvironment(root, env=self._env, keep=self._keep, _seed=self.workspace)
        self._children.append(child)
        return child

    def discard(self) -> None:
        self.close()
        shutil.rmtree(self.root, ignore_errors=True)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for child in self._children:
            child.close()
        if not self._keep:
            shutil.rmtree(self.root, ignore_errors=True)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
