"""What erasure needs from its surroundings: small protocols, one context.

Like the forget operator, erasure never sees the ``Unsee`` facade: it is
handed an ``ErasureContext`` of narrow ports (the facade's provenance store,
call ledger, session environments and hasher satisfy them structurally) plus
the agent whose checkpointer and memory store it rewrites.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from unsee.middleware.records import Checkpoint


class RecordErasure(Protocol):
    """The store's erasure operations (``ProvenanceStore.erasure``)."""

    def session_texts(self, session_id: str) -> list[tuple[str, str, tuple, str]]: ...
    def rewrite_texts(self, session_id: str, fix: Callable[[str], str | None]) -> int: ...
    def erase_sessions(self, session_ids: Iterable[str],
                       namespaces: Iterable[Sequence[str]] = ()) -> tuple[int, int]: ...
    def retarget_checkpoints(self, session_id: str, thread_prefix: str) -> int: ...
    def compact(self) -> list[str]: ...


class ScratchSessions(Protocol):
    """Dropping a replay's scratch session (``ProvenanceStore.rewrites``)."""

    def drop_session(self, session_id: str) -> None: ...


class Commits(Protocol):
    """The forgets committed on a session (``ProvenanceStore.commits``)."""

    def of(self, session_id: str) -> list[tuple[str, str, str, str | None]]: ...


class Records(Protocol):
    """unsee's own records: provenance (artifacts, checkpoints, spans, commit journal) and vault."""

    erasure: RecordErasure
    rewrites: ScratchSessions
    commits: Commits

    def exclusive(self) -> AbstractContextManager[tuple[Any, Any]]: ...
    def files(self) -> list[Path]: ...
    def has_session(self, session_id: str, flush: bool = True) -> bool: ...
    def checkpoints(self, session_id: str) -> list[Checkpoint]: ...
    def contents(self, session_id: str) -> dict[str, str]: ...
    def sessions_like(self, prefix: str) -> list[str]: ...
    def count_artifacts(self, session_id: str, types: Collection[str]) -> int: ...


class CallLedger(Protocol):
    """The call ledger: records of real tool executions (the fact stays, the text can go)."""

    #: its SQLite file; None when it lives on a database server (PostgreSQL: ``unsee.calls``)
    path: Path | None

    def redact(self, select: Callable[[Any], bool], digest: Callable[[str], str],
               *, session: str | None = None) -> list[str]: ...
    def calls(self, *, session: str | None = None) -> list[Any]: ...
    def vacuum(self) -> bool: ...


class Environments(Protocol):
    """Per-session sandboxes and the registry of their snapshots."""

    def snapshots_of(self, session: str) -> list[Any]: ...
    def environments_of(self, session: str) -> list[Any]: ...
    def live_env_id(self, session: str) -> str | None: ...
    def drop_snapshots(self, keys: list[str]) -> None: ...
    def initial_snapshot(self, session: str) -> Any | None: ...
    def latest_snapshot(self, session: str) -> Any | None: ...


class Runs(Protocol):
    """The runs of the agent in this process: an erasure waits until none is on its session."""

    def exclusive(self, session_id: str, wait: bool = True) -> AbstractContextManager[None]: ...


class Hasher(Protocol):
    def hash(self, text: str) -> str: ...


@dataclass(frozen=True)
class ErasureContext:
    """Everything an erasure touches. Built by the facade."""

    home: Path
    records: Records
    hasher: Hasher
    #: the call ledger (None: no tool went through it)
    ledger: Callable[[], CallLedger | None]
    environments: Environments | None = None
    #: runs to wait for before rewriting a session (None: nothing runs here)
    runs: Runs | None = None
    #: whether spans carried payload text (``Unsee(content_in_spans=True)``)
    content_in_spans: bool = False
    version: str = "0"
