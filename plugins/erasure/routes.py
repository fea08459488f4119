"""The route registry: every place the runtime writes, in one list.

A *route* is a place a recorded copy of a target can end up (the LangGraph
checkpoint history, the memory store, unsee's records, the call ledger,
sandbox snapshots, exported spans, ...). Each route says what it holds, how it
is erased and how it is audited, in one class:

- ``audit(scope)`` re-reads the route as it is *now*: byte copies in the files
  it owns (``-wal``/``-shm`` and free pages included) and value copies through
  the owner's own API (decompressed, decrypted);
- ``erase(scope)`` removes the copies of ``scope.session`` and returns notes
  (what was done); it is idempotent, so a rerun after a crash completes it;
- ``unreachable`` names copies the route cannot erase or even see (a
  PostgreSQL WAL archive, a remote trace backend), for the receipt.

A route is made by a factory ``(ErasureContext, agent) -> Route | None``
(None: the route does not apply, e.g. no sandbox). The built-in factories are
an explicit, ordered table (``routes_builtin.BUILTIN_ROUTES``; importing a
route module registers nothing); ``register_route`` adds a factory of a new
backend, erased after the built-ins, so the audit covers it. Every route
passes the conformance suite ``unsee.plugins.erasure.testing.RouteConformance``.
"""

from __future__ import annotations

import abc
import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .forms import Form, holds_target
from .ports import ErasureContext
from .isolated import is_sqlite_family, scan_isolated, start_scan
from .scan import scan_file, sqlite_files


@dataclass(frozen=True)
class Scope:
    """What one erasure or audit is about. ``target`` never leaves the process."""

    session: str
    target: str
    forms: tuple[Form, ...]
    event_id: str | None = None
    #: the erasure's journal: what is done, so a rerun after a crash completes the rest
    journal: Any = None
    #: SQLite files already read for this audit (path -> hit, None: no such file), filled in
    #: one child process for every route by :func:`prefetch_byte_scans`
    byte_scans: dict[str, dict | None] = field(default_factory=dict, compare=False, repr=False)
    #: that child process while it runs (:meth:`settle` waits for it)
    pending_scans: list[Callable[[], None]] = field(default_factory=list, compare=False, repr=False)

    def settle(self) -> None:
        """Wait for the byte scans :func:`prefetch_byte_scans` began, into ``byte_scans``."""
        while self.pending_scans:
            self.pending_scans.pop(0)()

    def holds(self, text: str) -> bool:
        return holds_target(text, self.target)


@dataclass(frozen=True)
class SubjectScope:
    """What a data subject's erasure deletes (``subject.py``): whole threads with their
    scratch/staging threads, their recorded sessions, memory-store namespaces (with every
    namespace under them). Routes delete in :meth:`Route.erase_subject`."""

    erasure_id: str
    threads: tuple[str, ...]
    #: the threads' recorded sessions, scratch sessions included
    sessions: tuple[str, ...]
    namespaces: tuple[tuple[str, ...], ...]
    #: the home's lease table (``middleware/leases.LeaseTable``; None: none) and keyed hasher
    leases: Any = None
    hasher: Any = None

    def owns(self, session_or_thread: str) -> bool:
        """Whether a thread/session id (a scratch one included) is the subject's."""
        from .owners import owner_of

        return owner_of(session_or_thread) in self.threads


@dataclass
class RouteAudit:
    """What an audit found on one route: byte copies per file, value copies, the rest."""

    route: str
    byte_copies: dict[str, int] = field(default_factory=dict)
    value_copies: int = 0
    #: copies present before the target was observed (the source, kept by design)
    source_copies: int = 0
    notes: list[str] = field(default_factory=list)
    #: copies other sessions own (session -> {where: copies}): listed, never counted in this
    #: scope's ``copies`` (``owners.py`` attributes them; docs/erasure.md "Many sessions in one home")
    other_sessions: dict[str, dict[str, int]] = field(default_factory=dict)
    #: what this route should have read and could not (a file it cannot open, a stored item it
    #: cannot read), each with how to make it readable: an audit with any is incomplete, never
    #: clean (``AuditReport.incomplete``; docs/erasure.md "Complete audits")
    incomplete: list[str] = field(default_factory=list)

    def cannot_read(self, what: str, why: str, remedy: str = "make it readable to this process and audit again"
                    ) -> None:
        """Record that ``what`` could not be read (``why``): a note, and the audit is incomplete."""
        self.notes.append(f"{what}: unreadable ({why})")
        self.incomplete.append(f"could not read {what} ({why}): {remedy}")

    @property
    def other_copies(self) -> dict[str, int]:
        """Copies per other session (only sessions that hold some)."""
        return {s: n for s, w in self.other_sessions.items() if (n := sum(w.values()))}

    def add_other(self, session: str, where: str, copies: int) -> None:
        """Count ``copies`` at ``where`` as ``session``'s (another session than the scope's)."""
        if copies:
            got = self.other_sessions.setdefault(session, {})
            got[where] = got.get(where, 0) + copies

    @property
    def copies(self) -> int:
        """Copies that count: byte copies, or value copies where no file was readable."""
        return max(sum(self.byte_copies.values()), self.value_copies)

    def add_files(self, paths: Sequence[Path], scope: "Scope") -> None:
        """Byte copies in ``paths`` (SQLite files read in a child process: ``isolated.py``)."""
        paths = [Path(p) for p in paths]
        lite = [str(p) for p in paths if is_sqlite_family(p)]
        scope.settle()
        known = scope.byte_scans
        hits = {p: known[p] for p in lite if known.get(p) is not None}
        hits.update(scan_isolated([p for p in lite if p not in known], scope.target))
        for path, hit in hits.items():
            self.byte_copies[path] = hit["copies"]
            if hit["error"]:
                self.cannot_read(path, hit["error"])
        for p in paths:
            if p.is_file() and str(p) not in lite:
                try:
                    self.byte_copies[str(p)] = scan_file(p, scope.forms).copies
                except FileNotFoundError:
                    continue  # removed since listed: no bytes left to hold a copy
                except OSError as exc:  # (permissions, I/O): its bytes were not read
                    self.cannot_read(str(p), exc.strerror or type(exc).__name__)


def prefetch_byte_scans(scope: Scope, routes: Sequence["Route"]) -> None:
    """Read every route's SQLite files for ``scope``'s target in one child process (a child
    per route costs tens of milliseconds each); clear ``scope.byte_scans`` after the audit.

    Returns once the child has started: it reads the files while the routes judge their
    values (a saver's rows, row_audit.py); :meth:`Scope.settle` (called by
    :meth:`RouteAudit.add_files`) waits for it. Call ``scope.settle()`` when no route reads files."""
    scope.settle()  # a scan an earlier audit began and no route waited for: reaped, then dropped
    scope.byte_scans.clear()
    lite = sorted({str(p) for r in routes for p in r.files(scope) if is_sqlite_family(p)})
    pending = start_scan(lite, scope.target)
    scope.pending_scans.append(lambda: scope.byte_scans.update({p: pending().get(p) for p in lite}))


class Route(abc.ABC):
    """One place the runtime writes. Subclasses set the three class attributes."""

    #: a short dotted name: "langgraph.checkpoints", "unsee.ledger", ...
    name: str
    #: what it holds, in words
    holds: str
    #: how it is erased, in words (the receipt's "method")
    method: str

    @abc.abstractmethod
    def audit(self, scope: Scope) -> RouteAudit: ...

    @abc.abstractmethod
    def erase(self, scope: Scope) -> list[str]: ...

    def files(self, scope: Scope | None = None) -> list[Path]:
        """Files this route owns (so the home scan does not count them twice)."""
        return []

    def erase_subject(self, subject: SubjectScope) -> list[str] | None:
        """Delete everything of a data subject this route holds (whole threads, sessions,
        namespaces: ``subject``); idempotent; notes for the receipt. None: this route has no
        subject erasure (it is still audited, and the receipt says so)."""
        return None

    def memory_changes(self) -> list[Any]:
        """The memory records this route's erase steps deleted (``middleware.memory.MemoryChange``:
        keyed hashes and counts), for the result and a forget's trace; [] for a route that
        deletes none (the memory store route's target erasure deletes none either: a forget's
        commit rolled the items back before)."""
        return []

    def unreachable(self) -> list[str]:
        return []

    def _audit(self) -> RouteAudit:
        return RouteAudit(self.name)


def sqlite_route_files(paths: Sequence[Path]) -> list[Path]:
    """Database files and their -wal/-shm/-journal siblings."""
    out: list[Path] = []
    for p in paths:
        out.extend(sqlite_files(Path(p)) or [Path(p)])
    return out


def scrub_note(result: Any) -> str:
    """What a SQLite scrub (``sqlite_scrub.ScrubResult``) did, for a receipt: an incomplete one
    is said, never hidden."""
    if result.complete:
        return f"{result.path.name if result.path else 'database'}: WAL truncated, free pages vacuumed"
    return f"{result.path.name if result.path else 'database'}: scrub incomplete: " + "; ".join(result.notes)


RouteFactory = Callable[[ErasureContext, Any], "Route | None"]
_lock = threading.Lock()
_registered: list[RouteFactory] = []  # the user's factories, in registration order


def register_route(factory: RouteFactory) -> RouteFactory:
    """Add a route factory (usable as a decorator); registering it again changes nothing.

    Its routes are erased after the built-in ones (``routes_builtin.BUILTIN_ROUTES``), in
    registration order. Returns ``factory``."""
    if not callable(factory):
        raise TypeError(f"a route factory is a callable (ctx, agent) -> Route | None, got {factory!r}")
    with _lock:
        if factory not in _registered:
            _registered.append(factory)
    return factory


def unregister_route(factory: RouteFactory) -> bool:
    """Remove a factory added with :func:`register_route`; False when it was not registered."""
    with _lock:
        if factory in _registered:
            _registered.remove(factory)
            return True
        return False


@contextlib.contextmanager
def registered_route(factory: RouteFactory) -> Iterator[RouteFactory]:
    """``register_route(factory)`` for the ``with`` block (e.g. a test's route): removed on exit
    unless it was registered before the block."""
    with _lock:
        already = factory in _registered
    register_route(factory)
    try:
        yield factory
    finally:
        if not already:
            unregister_route(factory)


def registered_factories() -> list[RouteFactory]:
    """The factories added with :func:`register_route`, in registration order (the built-in
    ones are not here: ``routes_builtin.route_factories`` gives the whole erasure order)."""
    with _lock:
        return list(_registered)
