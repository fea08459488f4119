"""What a forget needs from its surroundings: small protocols, one context.

A forget never sees the ``Unsee`` facade. It is handed a
``ForgetContext`` that bundles narrow ports, each a ``typing.Protocol`` with
exactly the methods the operator calls (the facade's store, recorder, hasher,
environments and local model satisfy them structurally). Parts made after the
facade exists (the local model, the IFC interceptor) are zero-argument
callables, read when a forget runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from unsee.middleware.graph import ProvenanceGraph
from unsee.middleware.records import SessionInfo


class SessionRewrites(Protocol):
    """Forks of a session and the rewrites of its records (``ProvenanceStore.rewrites``)."""

    # content vault (the editing baselines)
    def set_content(self, session_id: str, artifact_id: str, content: str | None) -> None: ...
    # fork: a scratch session holding the clean prefix
    def clone_prefix(self, src: str, dst: str, before_seq: int) -> None: ...
    def drop_session(self, session_id: str) -> None: ...
    def fork_records(self, scratch_id: str) -> tuple[list[tuple[str, str]], list[str]]: ...
    # the replacement a commit finishes
    def replace_session(self, session_id: str, scratch_id: str, event_id: str, since_ns: int) -> None: ...


class CommitJournal(Protocol):
    """The commit journal: a commit is rolled forward once begun (``ProvenanceStore.commits``)."""

    def begin(self, event_id: str, session_id: str, scratch_id: str, since_ns: int,
              payload: str | None = None) -> None: ...
    def state(self, event_id: str) -> str | None: ...
    def pending(self, session_id: str) -> list[tuple[str, str, int, str | None]]: ...


class MemoryJournal(Protocol):
    """The memory-store write journal (``ProvenanceStore.memory_journal``)."""

    def replace(self, session_id: str, scratch_id: str, since_seq: int) -> None: ...


class RunMarks(Protocol):
    """Sessions a dead run left (``ProvenanceStore.run_marks``)."""

    def clear(self, session_id: str) -> None: ...


class RecordStore(Protocol):
    """The session records (provenance + content vault) a forget forks, edits, replaces and journals."""

    rewrites: SessionRewrites
    commits: CommitJournal
    memory_journal: MemoryJournal
    run_marks: RunMarks

    # content vault (the editing baselines)
    def content(self, session_id: str, artifact_id: str) -> str | None: ...
    def contents(self, session_id: str) -> dict[str, str]: ...


class SessionReader(Protocol):
    """Sessions as recorded now (flushed): their info and provenance graph."""

    def session(self, session_id: str) -> SessionInfo: ...
    def graph(self, session_id: str) -> ProvenanceGraph: ...
    def sessions(self) -> list[SessionInfo]: ...


class InterceptorSlots(Protocol):
    """Where a replay installs its interceptor for the scratch thread."""

    def install(self, session_id: str, interceptor: Any) -> None: ...
    def remove(self, session_id: str) -> None: ...


class Agents(Protocol):
    """The agents that ran in this process (a replay runs the session's own)."""

    def for_session(self, session_id: str | None) -> Any: ...


class Runs(Protocol):
    """The runs of the agent in this process: held off a session, their agents, their cached state."""

    agents: Agents
    interceptors: InterceptorSlots

    def exclusive(self, session_id: str, wait: bool = True) -> AbstractContextManager[None]: ...
    def forget_state(self, session_id: str) -> None: ...
    def seed_state(self, session_id: str, artifacts: list, checkpoints: list) -> None: ...


class CroppableCache(Protocol):
    """The local model's KV caches: restoring a checkpoint is cropping to its token offset."""

    def restore(self, session: str, offset: int) -> int: ...
    def session_counters(self, session: str) -> Mapping[str, int]: ...


class SnapshotEnvironments(Protocol):
    """Per-session sandboxes: a replay runs in a shadow restored to a snapshot; commit keeps it."""

    def begin_replay(self, scratch: str, session: str, snapshot_id: str | None) -> Any: ...

    def settle_replay(self, scratch: str) -> str | None:
        """Snapshot the replay's shadow as the session's next state (off the machine when a
        registry or shared store is configured); its key, written into the commit's journal row
        so that any process rolling the commit forward makes it the session's sandbox."""
        ...

    def end_replay(self, scratch: str, commit: bool, *, session: str | None = None,
                   final: str | None = None) -> None:
        """Keep (commit) or drop the replay's shadow. ``final``: the ``settle_replay`` key; a
        process that never ran the replay (a roll-forward elsewhere) makes it ``session``'s latest."""
        ...


class Revoker(Protocol):
    """The IFC plugin's side of B8/B9: label a closure revoked."""

    def revoke(self, session: str, artifact_ids: Iterable[str]) -> None: ...


class Hasher(Protocol):
    """The keyed hash reports carry instead of the target."""

    def hash(self, text: str) -> str: ...


def _absent() -> None:
    return None


@dataclass(frozen=True)
class SessionView:
    """A ``SessionReader`` made of three functions (what a facade hands over)."""

    session: Callable[[str], SessionInfo]
    graph: Callable[[str], ProvenanceGraph]
    sessions: Callable[[], list[SessionInfo]]


@dataclass(frozen=True)
class ForgetContext:
    """Everything a forget touches. Built by the facade; ``cache``/``revoker`` are read late."""

    records: RecordStore
    sessions: SessionReader
    runs: Runs
    hasher: Hasher
    environments: SnapshotEnvironments | None = None
    #: the local model whose cache is cropped (None: no local model)
    cache: Callable[[], CroppableCache | None] = _absent
    #: the IFC interceptor (None: IFC not enabled)
    revoker: Callable[[], Revoker | None] = _absent


class ForgetRecords(Protocol):
    """Where a forget that replayed leaves its ids-only record (the view plugin's
    ``ForgetRecordKeeper``: what ``unsee view --event`` shows). An observer: the pipeline
    logs its failures and never lets them fail the forget."""

    def keep(self, report: Any, graph: ProvenanceGraph, entry: Any, closure: Iterable[str],
             raised_by: str) -> None: ...


class AfterForget(Protocol):
    """What follows a committed forget once its trace is sent (the reconcile plugin: plan the
    world's reconciliation, and by the home's default run its compensations). It returns the
    report with what it did on it; an observer: the pipeline logs its failures and puts them on
    the report, never lets them fail the forget."""

    def after_forget(self, report: Any, agent: Any, span_context: Any, event: Any) -> Any: ...


def _nothing() -> None:
    return None


@dataclass(frozen=True)
class RevocationContext:
    """The ports of the revocation pipeline (``pipeline.RevocationPipeline``). Built by the facade.

    ``forget``: the operator's ports; ``erasure``: the erasure plugin's ``ErasureContext``
    (handed to that plugin's face as it is), read when an erasure runs (which sandboxes and
    ledger a home has can change); ``flush``: makes every recorded span a record (before an
    erasure reads them); ``records``: the view's record of each forget (None: none kept)."""

    forget: ForgetContext
    erasure: Callable[[], Any] = _nothing
    flush: Callable[[], None] = _nothing
    records: ForgetRecords | None = None
    #: where a forget's own trace goes (an OpenTelemetry ``Tracer``; None: not traced)
    tracer: Callable[[], Any] = _nothing
    #: what follows each committed forget (None: nothing; ``AfterForget``)
    after: Callable[[], AfterForget | None] = _nothing
