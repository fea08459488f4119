"""Every error the sandbox package raises.

Each error subclasses :class:`SandboxError` *and* the nearest builtin, so
callers that know nothing about unsee can still catch them
(``except TimeoutError``, ``except FileNotFoundError``, ...).

An error may set a class attribute ``exit_code`` (the command line's scheme,
docs/cli.md: 1 the answer is "no", 2 bad usage or input, 3 an environment
problem such as no reachable daemon); one that does not is placed by its
builtin. The base class sets none, so that the builtins decide.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "SandboxError",
    "BackendNotFound",
    "InvalidOption",
    "SandboxUnavailable",
    "DaemonLost",
    "ExecTimeout",
    "ExecFailed",
    "SnapshotNotFound",
    "PathNotFound",
    "PathOutsideSandbox",
    "NotSupported",
    "EnvironmentClosed",
    "ImageBuildError",
    "BackendError",
    "LedgerError",
    "LedgerUnavailable",
    "CallInDoubt",
    "CallFailed",
    "ArgumentsNotCanonical",
    "StorageRefused",
    "StorageInUse",
    "StoredItemNotFound",
    "OwnerIdError",
    "InvalidCleanup",
    "CleanupNotConfirmed",
    "RegistryError",
    "RegistryUnavailable",
    "RegistryCannotDelete",
]


class SandboxError(Exception):
    """Base class of every error raised by ``unsee.sandbox``."""


class BackendNotFound(SandboxError, LookupError):
    """``open_environment`` was given a backend name nobody registered."""

    def __init__(self, name: str, known: list[str]):
        self.name = name
        self.known = known
        super().__init__(
            f"unknown sandbox backend {name!r}; known backends: {', '.join(known)} "
            "(a third-party backend must be imported so it can call register_backend())"
        )


class InvalidOption(SandboxError, TypeError):
    """``open_environment`` was given an option the backend does not declare.

    ``accepted`` is what the backend declares (its ``OPTIONS``); ``unknown`` the
    offending names. A ``TypeError``, like any unexpected keyword argument.
    """

    def __init__(self, backend: str, unknown: list[str], accepted: list[str]):
        self.backend = backend
        self.unknown = unknown
        self.accepted = accepted
        super().__init__(
            f"sandbox backend {backend!r} does not accept option(s) {', '.join(map(repr, unknown))}; "
            f"it accepts: {', '.join(accepted) or 'none'}"
        )


class SandboxUnavailable(SandboxError, RuntimeError):
    """A known backend cannot be used here; ``hint`` says what to install/start."""

    exit_code = 3  # an environment problem (no daemon, no image), not the user's input

    def __init__(self, message: str, *, backend: str = "", hint: str = ""):
        self.backend = backend
        self.hint = hint
        super().__init__(f"{message}. {hint}".strip() if hint else message)


class DaemonLost(SandboxError, ConnectionError):
    """The Docker daemon went away during a call (or before it)."""

    exit_code = 3


class ExecTimeout(SandboxError, TimeoutError):
    """A command ran longer than its timeout and was killed."""

    def __init__(self, cmd: Any, timeout: float, stdout: bytes = b"", stderr: bytes = b""):
        self.cmd = cmd
        self.timeout = timeout
        self.stdout = stdout
        self.stderr = stderr
        super().__init__(f"command {cmd!r} timed out after {timeout:g} s")


class ExecFailed(SandboxError, RuntimeError):
    """A command could not be run, or (via ``ExecResult.check()``) exited non-zero."""

    def __init__(self, message: str, *, cmd: Any = None, result: Any = None):
        self.cmd = cmd
        self.result = result
        super().__init__(message)


class SnapshotNotFound(SandboxError, LookupError):
    """``restore``/``shadow`` was given a snapshot this backend cannot find."""

    def __init__(self, snapshot: Any):
        self.snapshot = snapshot
        super().__init__(f"snapshot not found: {snapshot}")


class PathNotFound(SandboxError, FileNotFoundError):
    """``read_file``/``file_mode``/``remove_file`` on a path that does not exist."""

    def __init__(self, path: str):
        self.path = path
        super().__init__(2, "no such file in sandbox", path)


class PathOutsideSandbox(SandboxError, PermissionError):
    """A path escapes the environment's root (local backend)."""

    def __init__(self, path: str):
        self.path = path
        super().__init__(13, "path escapes the sandbox workspace", path)


class NotSupported(SandboxError, NotImplementedError):
    """The backend lacks this capability (see ``Environment.capabilities``)."""


class EnvironmentClosed(SandboxError, RuntimeError):
    """The environment was closed."""


class ImageBuildError(SandboxError, RuntimeError):
    """Building the sandbox image failed; the message says what is missing."""

    exit_code = 3  # host material is missing (a package, root): an environment problem


# --- call ledger ----------------------------------------------------------


class LedgerError(SandboxError, RuntimeError):
    """Base class for call-ledger errors."""


class CallInDoubt(LedgerError):
    """An external call was started (status ``fired``) but never recorded a result.

    The ledger cannot know whether the side effect happened, so it refuses to
    fire it again; an operator resolves it with ``Ledger.resolve()``.
    """

    def __init__(self, call_id: str, tool: str):
        self.call_id = call_id
        self.tool = tool
        super().__init__(
            f"external call {tool!r} ({call_id}) was fired but has no recorded result; "
            "not firing it again (resolve it with Ledger.resolve())"
        )


class CallFailed(LedgerError):
    """The recorded execution of a call raised; the error text is kept."""

    def __init__(self, call_id: str, tool: str, error: str):
        self.call_id = call_id
        self.tool = tool
        self.error = error
        super().__init__(f"call {tool!r} ({call_id}) failed: {error}")


class LedgerUnavailable(LedgerError, ConnectionError):
    """The ledger's database server cannot be reached (PostgreSQL down, a connection lost,
    no free connection in the pool within its timeout). Raised before a call is claimed,
    nothing fired; raised while its outcome was being recorded, the call stays ``fired``
    (in doubt) unless a fresh connection recorded it."""

    exit_code = 3

    def __init__(self, where: str, reason: str):
        self.where = where
        self.reason = reason
        super().__init__(f"call ledger {where} is unreachable: {reason}")


class ArgumentsNotCanonical(LedgerError, TypeError):
    """Tool arguments cannot be turned into canonical JSON (so no call id)."""


# --- stored copies (unsee.sandbox.storage) ---------------------------------


class StorageRefused(SandboxError, ValueError):
    """``delete_item`` was given a reference that is not one of unsee's stored copies
    (e.g. a directory that is not ``<env root>/snapshots/NNNNNN`` or ``<env root>/workspace``)."""


class StorageInUse(SandboxError, RuntimeError):
    """A stored copy cannot be deleted yet: the daemon still needs it (a snapshot image
    that a kept child image was committed on top of, or that a running container uses)."""


class StoredItemNotFound(SandboxError, LookupError):
    """``read_item`` was given a stored copy that no longer exists."""

    def __init__(self, item: Any):
        self.item = item
        super().__init__(f"stored item not found: {getattr(item, 'describe', lambda: item)()}")


class OwnerIdError(SandboxError, ValueError):
    """A home's id (``<home>/home_id``, :mod:`unsee.sandbox.owner`) cannot be read or made:
    the home is not a folder, or the file holds something else than an id."""

    exit_code = 2


class InvalidCleanup(SandboxError, ValueError):
    """``cleanup()`` was asked for a scope it refuses: none given (whose objects?), or the
    shared base images without ``everything=True``."""

    exit_code = 2


class CleanupNotConfirmed(SandboxError):
    """``unsee sandbox cleanup --all`` asked and got no "yes": nothing was removed."""

    exit_code = 1


# --- the OCI registry (unsee.sandbox.oci) -----------------------------------


class RegistryError(SandboxError, RuntimeError):
    """The OCI registry answered a request with an error not covered below (``status``: the
    HTTP status, 0 when none; ``address``: the registry's address)."""

    def __init__(self, message: str, *, address: str = "", status: int = 0):
        self.address = address
        self.status = status
        super().__init__(message)


class RegistryUnavailable(SandboxUnavailable):
    """The OCI registry at ``address`` cannot be reached (refused, timed out, not a registry);
    ``reason`` says why."""

    def __init__(self, address: str, reason: str):
        self.address = address
        self.reason = reason
        super().__init__(f"OCI registry {address} is unreachable: {reason}", backend="oci",
                         hint="start it (scripts/registry-up.sh) or fix the address")


class RegistryCannotDelete(RegistryError, PermissionError):
    """The registry refuses deletes (HTTP 405: ``storage.delete.enabled`` is off): nothing it
    holds can be erased through it. Erasure names such a registry as unreachable."""

    exit_code = 3

    def __init__(self, address: str, what: str):
        super().__init__(
            f"OCI registry {address} refuses to delete {what} (HTTP 405: deletes are disabled; "
            "set storage.delete.enabled: true in its config)", address=address, status=405)


class BackendError(SandboxError, RuntimeError):
    """The backend (e.g. the Docker daemon) reported an error not covered above."""
