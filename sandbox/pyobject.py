"""Python-object backend: an in-process environment snapshotted by deep copy.

For tool environments that are Python objects (e.g. AgentDojo's pydantic
environment models): the environment wraps ``obj`` plus an optional virtual
file system (a dict ``path -> (bytes, mode)``).

- ``snapshot()`` stores a deep copy of (obj, files); ``restore()`` deep-copies
  it back. When the restored value has the same type, ``obj`` is updated *in
  place* (dicts, lists, pydantic models and plain objects), so references the
  caller holds stay valid.
- ``exec`` is supported only when ``commands`` are given: ``cmd`` is split
  with ``shlex`` and ``commands[argv[0]](obj, *argv[1:])`` runs. A return value
  that is an ``ExecResult`` is used as is, an ``int`` is the exit code,
  ``str``/``bytes`` is stdout, ``None`` means success. An exception becomes
  exit code 1 with the error on stderr. Timeouts run the callable in a worker
  thread: past the timeout ``ExecTimeout`` is raised, but Python cannot kill
  the thread, so the callable finishes in the background (callables must
  be written to be abandonable).
- ``shadow()`` is a deep copy that shares the snapshot store (read-only).
"""

from __future__ import annotations

import concurrent.futures
import copy
import posixpath
import shlex
import threading
import uuid
from typing import Any, Callable, Mapping

from .base import (
    DEFAULT_FILE_MODE,
    EXEC,
    FILES,
    SHADOW,
    SNAPSHOT,
    Command,
    Environment,
    ExecResult,
    SnapshotId,
    as_bytes,
)
from .errors import ExecFailed, ExecTimeout, PathNotFound, SnapshotNotFound

__all__ = ["PythonObjectEnvironment"]

ExecCallable = Callable[..., Any]


class PythonObjectEnvironment(Environment):
    backend = "python"
    OPTIONS = frozenset({"obj", "files", "commands", "env_id"})

    def __init__(
        self,
        obj: Any = None,
        *,
        files: Mapping[str, bytes | str] | None = None,
        commands: Mapping[str, ExecCallable] | None = None,
        env_id: str | None = None,
        _store: dict[str, tuple[Any, dict[str, tuple[bytes, int]]]] | None = None,
    ):
        self.env_id = env_id or uuid.uuid4().hex[:12]
        self.obj = obj
        self._files: dict[str, tuple[bytes, int]] = {
            self._norm(p): (as_bytes(d), DEFAULT_FILE_MODE) for p, d in (files or {}).items()
        }
        self._commands = dict(commands or {})
        caps = {FILES, SNAPSHOT, SHADOW}
        if self._commands:
            caps.add(EXEC)
        self.capabilities = frozenset(caps)
        self._store = {} if _store is None else _store
        self._seq = 0
        self._lock = threading.RLock()

    # -- paths ------------------------------------------------------------
    @staticmethod
    def _norm(path: str) -> str:
        return posixpath.normpath(posixpath.join("/", path))

    @property
    def files(self) -> dict[str, bytes]:
        """A copy of the virtual file system (path -> bytes)."""
        with self._lock:
            return {p: d for p, (d, _) in self._files.items()}

    # -- exec -------------------------------------------------------------
    def exec(self, cmd: Command, timeout: float | None = None) -> ExecResult:
        self._require(EXEC)
        argv = shlex.split(cmd) if isinstance(cmd, str) else list(cmd)
        if not argv:
            raise ExecFailed("empty command", cmd=cmd)
        fn = self._commands.get(argv[0])
        if fn is None:
            raise ExecFailed(
                f"unknown command {argv[0]!r}; known: {', '.join(sorted(self._commands))}", cmd=cmd
            )
        if timeout is None:
            return _run(fn, self.obj, argv[1:])
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="unsee-pyexec")
        try:
            fut = pool.submit(_run, fn, self.obj, argv[1:])
            try:
                return fut.result(timeout=timeout)
            except concurrent.futures.TimeoutError:
                raise ExecTimeout(cmd, timeout) from None
        finally:
            pool.shutdown(wait=False)

    # -- files ------------------------------------------------------------
    def read_file(self, path: str) -> bytes:
        self._require(FILES)
        with self._lock:
            try:
                return self._files[self._norm(path)][0]
            except KeyError:
                raise PathNotFound(path) from None

    def write_file(self, path: str, data: bytes | str, *, mode: int | None = None) -> None:
        self._require(FILES)
        with self._lock:
            self._files[self._norm(path)] = (as_bytes(data), DEFAULT_FILE_MODE if mode is None else mode)

    def remove_file(self, path: str) -> None:
        self._require(FILES)
        with self._lock:
            if self._files.pop(self._norm(path), None) is None:
                raise PathNotFound(path)

    def file_mode(self, path: str) -> int:
        self._require(FILES)
        with self._lock:
            try:
                return self._files[self._norm(path)][1]
            except KeyError:
                raise PathNotFound(path) from None

    def chmod(self, path: str, mode: int) -> None:
        with self._lock:
            data, _ = self._files.get(self._norm(path)) or (None, 0)
            if data is None:
                raise PathNotFound(path)
            self._files[self._norm(path)] = (data, mode)

    # -- state ------------------------------------------------------------
    def snapshot(self) -> SnapshotId:
        self._require(SNAPSHOT)
        with self._lock:
            self._seq += 1
            state = copy.deepcopy((self.obj, self._files))
            key = f"{self.env_id}/{self._seq}"
            self._store[key] = state
            return SnapshotId(self.backend, self.env_id, self._seq, key)

    def restore(self, snapshot: SnapshotId) -> None:
        self._require(SNAPSHOT)
        if not isinstance(snapshot, SnapshotId) or snapshot.backend != self.backend:
            raise SnapshotNotFound(snapshot)
        with self._lock:
            try:
                state = self._store[snapshot.ref]
            except KeyError:
                raise SnapshotNotFound(snapshot) from None
            obj, files = copy.deepcopy(state)
            self.obj = _assign_in_place(self.obj, obj)
            self._files = files

    def shadow(self) -> "PythonObjectEnvironment":
        self._require(SHADOW)
        with self._lock:
            obj, files = copy.deepcopy((self.obj, self._files))
            child = PythonObjectEnvironment(obj, commands=self._commands, _store=self._store)
            child._files = files
            return child

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with self._lock:
            for key in [k for k in self._store if k.startswith(self.env_id + "/")]:
                del self._store[key]


def _run(fn: ExecCallable, obj: Any, args: list[str]) -> ExecResult:
    try:
        out = fn(obj, *args)
    except Exception as exc:  # the command's failure is its result
        return ExecResult(1, b"", f"{type(exc).__name__}: {exc}".encode())
    if isinstance(out, ExecResult):
        return out
    if out is None:
        return ExecResult(0)
    if isinstance(out, bool):
        return ExecResult(0 if out else 1)
    if isinstance(out, int):
        return ExecResult(out)
    return ExecResult(0, as_bytes(out if isinstance(out, (str, bytes)) else str(out)))


def _assign_in_place(current: Any, new: Any) -> Any:
    """Make ``current`` equal to ``new`` keeping its identity when possible."""
    if current is None or type(current) is not type(new):
        return new
    if isinstance(current, dict):
        current.clear()
        current.update(new)
        return current
    if isinstance(current, list):
        current[:] = new
        return current
    if isinstance(current, set):
        current.clear()
        current.update(new)
        return current
    if hasattr(current, "__dict__"):
        try:
            current.__dict__.clear()
            current.__dict__.update(new.__dict__)
            for slot in ("__pydantic_fields_set__", "__pydantic_extra__", "__pydantic_private__"):
                if hasattr(new, slot):
                    object.__setattr__(current, slot, getattr(new, slot))
            return current
        except (AttributeError, TypeError):
            return new
    return new
