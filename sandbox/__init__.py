"""unsee.sandbox: environments where tools run, with snapshot/restore.

Knows nothing about agents. Open one with :func:`open_environment`::

    from unsee.sandbox import open_environment
    env = open_environment("auto")          # docker if a daemon is reachable, else local
    env.write_file("notes.txt", b"hello")
    snap = env.snapshot()
    env.exec("rm notes.txt")
    env.restore(snap)                       # notes.txt is back

The call ledger (:mod:`unsee.sandbox.ledger`) records every real tool
execution and makes external side effects fire at most once. The conformance
suite every backend passes, third-party ones included, is
:mod:`unsee.sandbox.testing` (needs pytest; not imported here).
:mod:`unsee.sandbox.storage` finds, reads and deletes what environments
stored (snapshots, workspaces, images, containers) without opening them.
:func:`owner_id` is the id of a home (``<home>/home_id``) that the docker
backend labels its objects with (``owner=``), so cleanup stays in one home.
Opened with ``registry=`` (docker, local) or ``snapshot_store=`` (local), an
environment pushes every snapshot off the machine (``SnapshotId.remote``) and
restores from there where the local copy is missing: :mod:`unsee.sandbox.oci`
(the registry's API), :mod:`unsee.sandbox.remote` (the store contract).
"""

from .base import (
    ALL_CAPABILITIES,
    EXEC,
    FILES,
    SHADOW,
    SNAPSHOT,
    Command,
    Environment,
    ExecResult,
    SnapshotId,
)
from .errors import (
    BackendError,
    BackendNotFound,
    CallFailed,
    CallInDoubt,
    DaemonLost,
    EnvironmentClosed,
    ExecFailed,
    ExecTimeout,
    ImageBuildError,
    InvalidCleanup,
    InvalidOption,
    LedgerError,
    LedgerUnavailable,
    NotSupported,
    OwnerIdError,
    PathNotFound,
    PathOutsideSandbox,
    RegistryCannotDelete,
    RegistryError,
    RegistryUnavailable,
    SandboxError,
    SandboxUnavailable,
    SnapshotNotFound,
    StorageInUse,
    StorageRefused,
    StoredItemNotFound,
)
from .ledger import EFFECTS, Effect, Ledger
from .oci import RegistryClient
from .owner import owner_id
from .remote import OciSnapshotStore, SnapshotStore
from .storage import (
    StoredItem,
    collect_registry_garbage,
    delete_item,
    delete_items,
    deletion_order,
    environment_items,
    read_item,
    remote_item,
    snapshot_item,
    snapshot_items,
)
from .registry import (
    available_backends,
    backend_names,
    backend_options,
    open_environment,
    register_backend,
)

__all__ = [
    "ALL_CAPABILITIES",
    "EXEC",
    "FILES",
    "SHADOW",
    "SNAPSHOT",
    "Command",
    "Environment",
    "ExecResult",
    "SnapshotId",
    "EFFECTS",
    "Effect",
    "Ledger",
    "owner_id",
    "BackendError",
    "BackendNotFound",
    "CallFailed",
    "CallInDoubt",
    "DaemonLost",
    "EnvironmentClosed",
    "ExecFailed",
    "ExecTimeout",
    "ImageBuildError",
    "InvalidCleanup",
    "InvalidOption",
    "LedgerError",
    "LedgerUnavailable",
    "NotSupported",
    "OwnerIdError",
    "PathNotFound",
    "PathOutsideSandbox",
    "RegistryCannotDelete",
    "RegistryError",
    "RegistryUnavailable",
    "RegistryClient",
    "OciSnapshotStore",
    "SnapshotStore",
    "SandboxError",
    "SandboxUnavailable",
    "SnapshotNotFound",
    "StorageInUse",
    "StorageRefused",
    "StoredItemNotFound",
    "StoredItem",
    "delete_item",
    "delete_items",
    "deletion_order",
    "environment_items",
    "read_item",
    "snapshot_item",
    "snapshot_items",
    "remote_item",
    "collect_registry_garbage",
    "available_backends",
    "backend_names",
    "backend_options",
    "open_environment",
    "register_backend",
]
