"""The abstract sandbox environment and its records.

An :class:`Environment` is a place where tools run: a Docker container, a
local workspace directory, or an in-process Python object. It knows nothing
about agents. The interface is deliberately small:

=====================  ====================================================
``exec(cmd, timeout)``  run a command, get an :class:`ExecResult`
``read_file(path)``     bytes of a file (``PathNotFound`` if missing)
``write_file(path, data, mode=None)``  create/replace a file (parents made)
``remove_file(path)``   delete a file
``file_mode(path)``     permission bits of a file (``0o755`` ...)
``snapshot()``          capture the whole state, get a :class:`SnapshotId`
``restore(snap)``       put the state back exactly (deleted files included)
``shadow()``            a disposable clone of the current state
``close()``             release everything the environment owns (snapshots
                       it was asked to keep survive, its shadows' too)
``discard()``           close, and delete what it kept as well
=====================  ====================================================

Relative paths are relative to the environment's working directory.
Backends declare what they support in ``capabilities``; calling a missing
capability raises :class:`~unsee.sandbox.errors.NotSupported`. They declare
the options they accept in ``OPTIONS`` (else their constructor's keyword
parameters count); an undeclared option raises
:class:`~unsee.sandbox.errors.InvalidOption`. The self-check every backend
passes is :mod:`unsee.sandbox.testing`.
"""

from __future__ import annotations

import abc
import inspect
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Final, Mapping, Sequence, Union

from .errors import EnvironmentClosed, ExecFailed, InvalidOption, NotSupported

__all__ = [
    "Command",
    "ExecResult",
    "SnapshotId",
    "Environment",
    "EXEC",
    "FILES",
    "SNAPSHOT",
    "SHADOW",
    "ALL_CAPABILITIES",
    "options_of",
    "check_options",
]

#: A shell string (run with ``sh -c``) or an argv list.
Command = Union[str, Sequence[str]]

EXEC: Final = "exec"
FILES: Final = "files"
SNAPSHOT: Final = "snapshot"
SHADOW: Final = "shadow"
ALL_CAPABILITIES: Final = frozenset({EXEC, FILES, SNAPSHOT, SHADOW})


@dataclass(frozen=True, slots=True)
class ExecResult:
    """What a command did. Non-zero exit codes are results, not errors."""

    exit_code: int
    stdout: bytes = b""
    stderr: bytes = b""

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    @property
    def text(self) -> str:
        """stdout decoded as UTF-8 (replacing undecodable bytes)."""
        return self.stdout.decode("utf-8", "replace")

    def check(self) -> "ExecResult":
        """Return self, or raise :class:`ExecFailed` when the exit code is non-zero."""
        if self.exit_code != 0:
            raise ExecFailed(
                f"command exited with {self.exit_code}: "
                f"{self.stderr.decode('utf-8', 'replace').strip()[:500]}",
                result=self,
            )
        return self


@dataclass(frozen=True, slots=True)
class SnapshotId:
    """Opaque handle of a snapshot.

    ``backend`` names the backend that made it, ``env_id`` the environment,
    ``seq`` its position in that environment's snapshot sequence and ``ref`` the
    backend's own reference (an image id, a directory, a store key). A snapshot
    can be restored by any environment of the same backend (shadows included)
    while the environment that made it is open.

    ``remote`` says where the snapshot lives off the machine, when the
    environment pushed it (opened with ``registry=``/``snapshot_store=``): an
    OCI reference ``<registry>/<repository>@sha256:<digest>`` or a snapshot
    store's own reference; "" when it was not pushed. An environment of the same
    backend on any machine restores it from there when the local copy (``ref``)
    is missing. ``str()`` leaves it out.
    """

    backend: str
    env_id: str
    seq: int
    ref: str
    remote: str = ""

    def __str__(self) -> str:
        return f"{self.backend}:{self.env_id}:{self.seq}"


class Environment(abc.ABC):
    """A sandbox environment. Subclasses implement the ``_``-free methods below."""

    #: registry name of the backend ("docker", "local", "python")
    backend: str = ""
    #: what this environment supports; the conformance suite skips the rest
    capabilities: frozenset[str] = ALL_CAPABILITIES
    #: the keyword options ``open_environment(backend, **opts)`` may pass to the
    #: constructor; None: the constructor's keyword parameters (minus ``_``-ones).
    #: A subclass that adds options extends it (``OPTIONS = Base.OPTIONS | {...}``).
    OPTIONS: ClassVar[frozenset[str] | None] = None

    env_id: str
    _closed: bool = False

    # -- commands ---------------------------------------------------------
    @abc.abstractmethod
    def exec(self, cmd: Command, timeout: float | None = None) -> ExecResult:
        """Run ``cmd`` in the working directory.

        Raises ExecTimeout when it runs past ``timeout`` seconds (it is killed),
        ExecFailed when it cannot be started at all.
        """

    # -- files ------------------------------------------------------------
    @abc.abstractmethod
    def read_file(self, path: str) -> bytes: ...

    @abc.abstractmethod
    def write_file(self, path: str, data: bytes | str, *, mode: int | None = None) -> None:
        """Create or replace ``path`` (parents are created). ``mode`` defaults to 0o644."""

    @abc.abstractmethod
    def remove_file(self, path: str) -> None: ...

    @abc.abstractmethod
    def file_mode(self, path: str) -> int:
        """Permission bits (``stat.S_IMODE``) of ``path``."""

    # -- state ------------------------------------------------------------
    @abc.abstractmethod
    def snapshot(self) -> SnapshotId: ...

    @abc.abstractmethod
    def restore(self, snapshot: SnapshotId) -> None: ...

    @abc.abstractmethod
    def shadow(self) -> "Environment":
        """A disposable clone of the current state. Closing it never touches self."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release resources. Idempotent. Snapshots an environment was asked to keep
        (for later processes) survive it; so do those of its shadows."""

    def discard(self) -> None:
        """Close and also delete what this environment kept for later processes (its
        snapshots): for a shadow that will not be used after all. Idempotent."""
        self.close()

    # -- options ----------------------------------------------------------
    @classmethod
    def accepted_options(cls) -> frozenset[str] | None:
        """``OPTIONS``, else derived from the constructor (None: it takes ``**kwargs``)."""
        return cls.OPTIONS if cls.OPTIONS is not None else _signature_options(cls)

    @classmethod
    def check_options(cls, opts: Mapping[str, Any], *, backend: str | None = None) -> None:
        """Raise :class:`InvalidOption` for an option this backend does not declare."""
        check_options(backend or cls.backend or cls.__name__, cls.accepted_options(), opts)

    # -- helpers ----------------------------------------------------------
    @property
    def closed(self) -> bool:
        return self._closed

    def supports(self, capability: str) -> bool:
        return capability in self.capabilities

    def _require(self, capability: str) -> None:
        if self._closed:
            raise EnvironmentClosed(f"{self.backend} environment {self.env_id} is closed")
        if capability not in self.capabilities:
            raise NotSupported(
                f"the {self.backend!r} environment does not support {capability!r} "
                f"(capabilities: {', '.join(sorted(self.capabilities)) or 'none'})"
            )

    def __enter__(self) -> "Environment":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<{type(self).__name__} {self.backend}:{getattr(self, 'env_id', '?')} {state}>"


def as_bytes(data: bytes | str) -> bytes:
    return data.encode("utf-8") if isinstance(data, str) else bytes(data)


DEFAULT_FILE_MODE: Final = 0o644


def options_of(factory: Callable[..., Any]) -> frozenset[str] | None:
    """The options a backend factory accepts: an Environment subclass's
    ``accepted_options()``, else the factory's keyword parameters (None when it
    takes ``**kwargs`` or has no inspectable signature: anything goes)."""
    if isinstance(factory, type) and issubclass(factory, Environment):
        return factory.accepted_options()
    return _signature_options(factory)


def check_options(backend: str, accepted: frozenset[str] | None, opts: Mapping[str, Any]) -> None:
    """Raise :class:`InvalidOption` when ``opts`` has names outside ``accepted`` (None: any)."""
    if accepted is None:
        return
    unknown = sorted(set(opts) - accepted)
    if unknown:
        raise InvalidOption(backend, unknown, sorted(accepted))


def _signature_options(factory: Callable[..., Any]) -> frozenset[str] | None:
    try:
        params = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return None
    return frozenset(
        p.name
        for p in params
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and not p.name.startswith("_")
    )
