"""Erase a forgotten target from every route, audit every route, sign a receipt.

``Eraser(ctx).erase(session, event, agent=...)``:
1. checks its input (a recorded session whose live records no longer hold
   the target: erasure follows a committed forget, it never replaces one);
2. audits every route (the *before* column of the receipt);
3. erases route by route, in registry order, each step idempotent and the
   history rewrite journaled (``journal.py``), so a rerun after a crash at any
   step completes the job and the live state is never a tainted checkpoint;
4. audits every route again — what is *there now*, never what was attempted;
5. writes a receipt signed with the deployment's Ed25519 key (``receipt.SigningKey.resolve``,
   checked right after step 1: a bad key changes nothing) to
   ``<home>/receipts/<event id>.json``, and on a shared PostgreSQL store to its
   ``erasure_receipts`` table too (``shared.py``), where the journal lives as well: a run
   interrupted on one machine is finished by a rerun of the event on another.

An audit that could not read what it should (an agent without a checkpointer, a file it cannot
open: ``AuditReport.incomplete``) is never clean, whatever it counted; an erasure whose audit after
is incomplete is not clean either, and its receipt names what was not read (``Receipt.incomplete``).

Re-erasing is idempotent on the receipts folder: when the audit of step 2 finds
nothing and a receipt of this session and target already says so (the event's
own, else the forget's), that receipt is the result and nothing is written
(``ErasureResult.existing``; on a shared store, where another machine wrote it, a copy of
its file is put under this home's ``receipts/`` so the result's path exists here). When
something is found again under another event id, the new receipt names the forget it
belongs to (``Receipt.forget_event``).

``Eraser(ctx).audit(session, target, agent=...)`` is steps 1's lookup and 4.

Many sessions share one home: every copy an audit finds is attributed to the
session that owns it (``owners.py``). Clean or not is judged on the copies of
the audit's own session; other sessions' copies are listed apart
(``AuditReport.other_sessions``, the receipt's ``other_sessions`` per route),
never counted, never dropped. A copy no route and no session claims stays in
``home.other-files`` and counts.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from unsee.middleware.errors import InvalidArgument, SessionNotFound, UnseeError
from unsee.middleware.faults import fault_point

from .errors import ErasureInterrupted, NotForgotten, ReceiptInvalid
from .forms import target_forms
from .history import implemented
from .journal import Journal
from .owners import attribute_sqlite
from .ports import ErasureContext, Records
from .receipt import (Receipt, RouteReceipt, SigningKey, read_receipt, receipt_path, receipts_in, save_receipt,
                      sign_receipt, stored_receipt, stored_receipts, trusted_key, verify_signature, write_receipt)
from .shared import shared_db
from .routes import Route, RouteAudit, Scope, prefetch_byte_scans
from .routes_builtin import build_routes
from .isolated import is_sqlite_family, scan_isolated
from .scan import sha256_file

_FILE_SAFE = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}")
#: what no route of this project can reach, named in every receipt
OUTSIDE = [
    "copies outside the unsee home and the agent's stores: filesystem snapshots, backups, swap, "
    "disk sectors the filesystem remapped, other programs' copies",
]
#: the scope ``surface`` audits under: no session has this id, so every copy found is attributed
#: to the session owning it (or counts as no session's)
_SURFACE_SCOPE = "~surface~"
#: files of the home that hold no target by construction (keys, receipts, journals)
OWN_FILES = ("hash.key", "receipt.key", "receipt.pub", "receipts", "erasures")


class HomeRoute(Route):
    """Every file under the home that no other route claims: audited, never erased,
    so a new writer that forgot to register its route still shows up in the audit."""

    name = "home.other-files"
    holds = "files under the unsee home no route claims"
    method = "audited only (a copy here means a writer without a route)"

    def __init__(self, home: Path, claimed: list[Path]):
        self.home = Path(home)
        self.claimed = {p.resolve() for p in claimed}

    def _claimed(self, p: Path) -> bool:
        rp = p.resolve()
        return rp in self.claimed or any(c in rp.parents for c in self.claimed)

    def files(self, scope: Scope | None = None) -> list[Path]:
        """The home's files no other route claims (this route's own)."""
        todo = []
        for root, dirs, files in os.walk(self.home):
            rel = Path(root).relative_to(self.home)
            if rel.parts and rel.parts[0] in OWN_FILES:
                continue
            for f in files:
                p = Path(root) / f
                if (not rel.parts and f in OWN_FILES) or self._claimed(p) or not p.is_file():
                    continue
                todo.append(p)
        return todo

    def audit(self, scope: Scope) -> RouteAudit:
        out = self._audit()
        out.add_files(self.files(scope), scope)
        out.byte_copies = {k: v for k, v in out.byte_copies.items() if v}
        return out

    def erase(self, scope: Scope) -> list[str]:
        return []


@dataclass
class AuditReport:
    session: str
    routes: list[RouteAudit]
    unreachable: list[str] = field(default_factory=list)
    #: what the audit should have read and was not given the means to (the agent's checkpointer
    #: or memory store: :func:`agent_gaps`), each "route: what was not read: how to supply it";
    #: the routes' own (files, stored items they could not read) are in ``RouteAudit.incomplete``
    not_read: list[str] = field(default_factory=list)

    @property
    def copies(self) -> int:
        return sum(r.copies for r in self.routes)

    @property
    def incomplete(self) -> list[str]:
        """Everything this audit should have read and did not, each "route: what, why, how to
        supply it": ``not_read`` and every route's ``RouteAudit.incomplete``. Empty: complete."""
        return [*self.not_read, *(f"{r.route}: {x}" for r in self.routes for x in r.incomplete)]

    @property
    def complete(self) -> bool:
        """Every route read what it should (its files, its owner's values): ``copies`` is the
        whole count. What no route can reach (``unreachable``) is named, not read, by design."""
        return not self.incomplete

    @property
    def clean(self) -> bool:
        """A complete audit that found no copy in its scope (its session's records, files and rows,
        and every copy no session owns); other sessions' copies do not make it unclean. An
        incomplete audit is never clean, whatever it counted."""
        return self.complete and self.copies == 0

    @property
    def other_sessions(self) -> dict[str, int]:
        """Copies other sessions hold (session -> copies, every route): not in this scope."""
        out: dict[str, int] = {}
        for r in self.routes:
            for s, n in r.other_copies.items():
                out[s] = out.get(s, 0) + n
        return dict(sorted(out.items()))


@dataclass
class ErasureResult:
    receipt: Receipt
    path: Path
    before: AuditReport
    after: AuditReport
    notes: dict[str, list[str]]
    #: seconds each route's erase step took (the audits not included)
    timings: dict[str, float] = field(default_factory=dict)
    #: when each route's erase step ran (wall-clock ``time_ns`` start, end): a forget's trace
    times: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: the session was clean and ``receipt`` is the one an earlier erasure wrote (its own event id,
    #: maybe not the one asked with): nothing was erased or written this time
    existing: bool = False
    #: route name -> the memory records its erase step deleted (``middleware.memory.MemoryChange``,
    #: keyed hashes), for a forget's trace; routes that deleted none are absent
    memory: dict[str, list[Any]] = field(default_factory=dict)

    @property
    def clean(self) -> bool:
        return self.after.clean


#: the memory-store records of a session (``ArtifactType`` values): the session used a store
_MEMORY_ARTIFACTS = ("memory_read", "memory_write")


def _label(agent: Any) -> str:
    """``CompiledStateGraph 'worker_a'``: the agent's type and graph name, for messages."""
    name = getattr(agent, "name", None)
    return f"{type(agent).__name__} {name!r}" if isinstance(name, str) and name else type(agent).__name__


def memory_records(records: Records, sessions: list[str]) -> int:
    """How many memory reads/writes unsee recorded in ``sessions`` (a count in the store, not a read)."""
    return sum(records.count_artifacts(s, _MEMORY_ARTIFACTS) for s in sessions)


def agent_gaps(records: Any, sessions: list[str], agent: Any, memory: int | None = None) -> list[str]:
    """What an audit of ``sessions`` through ``agent`` should read and cannot, each "route: what
    was not read: how to supply it" (``AuditReport.not_read``):

    - the agent has no checkpointer (``None``, or the ``True``/``False`` markers LangGraph uses
      for subgraphs, e.g. a supervisor's or swarm's worker): the checkpoint history route cannot
      be read. The records cannot tell a session run without any checkpointer apart (LangGraph
      numbers checkpoints in memory too), so this is always said;
    - the agent has no memory store while unsee recorded memory reads or writes in the sessions.

    ``memory``: the sessions' memory records, counted before (None: counted now).

    No agent at all (``agent is None``) is not a gap here: the audit runs in a process that did
    not run the session, whose in-memory checkpointer and store are gone and whose files under
    the home are scanned byte by byte; it is named in ``unreachable`` (docs/erasure.md)."""
    if agent is None:
        return []
    threads = ", ".join(repr(s) for s in sessions)
    out = []
    saver = getattr(agent, "checkpointer", None)
    if saver is None or saver is True or saver is False:
        why = ("" if saver is None else
               " (checkpointer=True: a subgraph's marker; its checkpoints are kept by its parent graph's "
               "checkpointer)" if saver is True else
               " (checkpointer=False: a subgraph's marker; the parent graph's checkpointer holds the thread)")
        out.append(f"langgraph.checkpoints: the agent given ({_label(agent)}) has no checkpointer{why}, so the "
                   f"checkpoint history was not read: pass the graph compiled with the checkpointer that holds "
                   f"thread {threads} (agent= / --agent; for a supervisor or swarm, the compiled parent graph, "
                   "not a worker)")
    if getattr(agent, "store", None) is None and (
            n := memory_records(records, sessions) if memory is None else memory):
        out.append(f"langgraph.store: the session read or wrote a memory store ({n} memory "
                   f"{'record' if n == 1 else 'records'} in unsee's records) but the agent given "
                   f"({_label(agent)}) has no store, so its items were not read: pass the graph compiled "
                   "with store=<that store> (agent= / --agent)")
    return out


class Eraser:
    def __init__(self, ctx: ErasureContext):
        self.ctx = ctx

    def _scope(self, session: Any, target: Any, event_id: str | None = None,
               journal: Journal | None = None) -> Scope:
        if not isinstance(session, str) or not session.strip():
            raise InvalidArgument(f"thread_id must be a non-empty string, got {type(session).__name__} {session!r}")
        forms = target_forms(target)  # InvalidArgument for an empty or non-text target
        if not self.ctx.records.has_session(session):
            raise SessionNotFound(session)
        return Scope(session, target, forms, event_id, journal)

    def _routes(self, scope: Scope, agent: Any) -> list[Route]:
        routes = build_routes(self.ctx, agent)
        claimed = [p for r in routes for p in r.files(scope)]
        return [*routes, HomeRoute(self.ctx.home, claimed)]

    def _audit(self, scope: Scope, routes: list[Route], agent: Any, gaps: list[str] | None = None) -> AuditReport:
        """``gaps``: what the audit cannot read through ``agent`` (:func:`agent_gaps`; None: none
        asked, as for ``surface``)."""
        unreachable = [u for r in routes for u in r.unreachable()]
        if agent is None:
            unreachable.append("the agent's checkpointer and memory store through their API: no agent given "
                               "(u.erase(..., agent=...) / --agent); files of theirs under the home are scanned")
        prefetch_byte_scans(scope, routes)
        try:
            audits = [r.audit(scope) for r in routes]
            attribute_sqlite(audits, scope.session, scope.target)  # other sessions' rows are theirs
            return AuditReport(scope.session, audits, unreachable + OUTSIDE, list(gaps or []))
        finally:
            scope.byte_scans.clear()  # (the next audit reads the files as they are then)

    def audit(self, session: str, target: str, agent: Any = None) -> AuditReport:
        """Every route, byte level and value level, as it is now. Changes nothing. Incomplete
        (``AuditReport.incomplete``, never ``clean``) where a route could not read what it should."""
        scope = self._scope(session, target)
        gaps = agent_gaps(self.ctx.records, [session], agent)
        return self._audit(scope, self._routes(scope, agent), agent, gaps)

    def surface(self, agent: Any = None, marker: str | None = None, *,
                offered: dict[str, str | None] | None = None):
        """The rollback surface (``surface.py``): the routes this home and ``agent`` write, each
        one's side of LangGraph's recovery boundary, what every deletion primitive mutates there,
        and with ``marker`` each route's copies of it now (every session's: a byte-level and
        value-level audit of the whole home, attributed per session). ``offered``: the facade's
        own primitives (name -> None, or why not). Changes nothing."""
        from .surface import build_report

        scope = Scope(_SURFACE_SCOPE, marker, target_forms(marker)) if marker is not None else None
        routes = self._routes(scope or Scope(_SURFACE_SCOPE, "", ()), agent)
        saver = getattr(agent, "checkpointer", None) if agent is not None else None
        saver = saver if saver not in (None, True, False) else None
        available: dict[str, str | None] = {
            "delete_thread": None if saver is not None and implemented(type(saver), "delete_thread")
            else "no checkpointer" if saver is None else f"{type(saver).__name__} has no delete_thread",
            "RemoveMessage": None if saver is not None else "no checkpointer",
            "store.delete": None if getattr(agent, "store", None) is not None else "no memory store",
            **(offered or {})}
        copies = unreachable = None
        if scope is not None:
            report = self._audit(scope, routes, agent)
            unreachable = report.unreachable
            copies = {r.route: {**r.other_copies, **({"(no session)": r.copies} if r.copies else {})}
                      for r in report.routes}
        else:
            unreachable = [u for r in routes for u in r.unreachable()] + OUTSIDE
        return build_report(home=str(self.ctx.home), agent=type(agent).__name__ if agent is not None else None,
                            routes=[(r.name, r.holds, r.method, [str(p) for p in r.files(scope)]) for r in routes],
                            available=available, copies=copies, unreachable=unreachable)

    def erase(self, session: str, event: Any, agent: Any = None) -> ErasureResult:
        """Erase ``event.target`` from every route of ``session`` (after a committed forget)."""
        target, event_id = getattr(event, "target", None), getattr(event, "event_id", None)
        if not isinstance(event_id, str):
            raise InvalidArgument(f"event must be a RevocationEvent, got {type(event).__name__}")
        if not _FILE_SAFE.fullmatch(event_id):  # it names the journal and receipt files
            raise InvalidArgument(f"event_id must be 1-128 letters, digits, '.', '_' or '-', got {event_id!r}")
        journal = Journal.open(self.ctx.home / "erasures", event_id, session, self.ctx.records)  # (read only)
        scope = self._scope(session, target, event_id, journal)
        if any(scope.holds(t) for t in self.ctx.records.contents(session).values()):
            raise NotForgotten(session)
        # the key is checked before any step: a bad one (ReceiptKeyInvalid) leaves everything as it was
        key = SigningKey.resolve(self.ctx.home, shared_db(self.ctx.records))
        # the history swap leaves the thread partial for a moment: no run, in this process or
        # another, may read or write the session meanwhile
        try:
            with self.ctx.runs.exclusive(session) if self.ctx.runs is not None else contextlib.nullcontext():
                return self._erase(scope, event_id, journal, agent, key)
        except UnseeError:
            raise
        except Exception as e:  # a service failed part-way: typed; the journal lets a rerun finish
            raise ErasureInterrupted(session, event_id, e) from e

    def _erase(self, scope: Scope, event_id: str, journal: Journal, agent: Any, key: SigningKey) -> ErasureResult:
        routes = self._routes(scope, agent)
        gaps = agent_gaps(self.ctx.records, [scope.session], agent)  # (the same before and after)
        before = self._audit(scope, routes, agent, gaps)
        forget_event, earlier = self._earlier_receipts(scope, event_id, key.public_pem())
        if before.clean and not journal.pending:  # (a pending run's steps may still be half done)
            for path, receipt in earlier:
                if _still_says(receipt, before):
                    if not path.exists():  # another machine wrote it (shared store): its file here too
                        write_receipt(receipt, path)
                    return ErasureResult(receipt, path, before, before, {}, existing=True)
        notes: dict[str, list[str]] = {}
        timings: dict[str, float] = {}
        times: dict[str, tuple[int, int]] = {}
        memory: dict[str, list[Any]] = {}
        for route in routes:
            fault_point(f"erase:{route.name}")
            t0, w0 = time.perf_counter(), time.time_ns()
            notes[route.name] = route.erase(scope)
            timings[route.name] = time.perf_counter() - t0
            times[route.name] = (w0, time.time_ns())
            if changed := route.memory_changes():
                memory[route.name] = changed
        after = self._audit(scope, routes, agent, gaps)
        receipt = self._receipt(scope, routes, before, after, notes, forget_event, key)
        path = receipt_path(self.ctx.home, event_id)
        save_receipt(receipt, path, shared_db(self.ctx.records))
        journal.set(state="done")
        return ErasureResult(receipt, path, before, after, notes, timings, times, memory=memory)

    def _earlier_receipts(self, scope: Scope, event_id: str,
                          pinned: str | None) -> tuple[str | None, list[tuple[Path, Receipt]]]:
        """(the forget a new receipt of ``event_id`` belongs to, the earlier receipts a clean
        re-erasure may stand on, in the order they are tried).

        A forget's own erasure (its event id is a committed forget of the session) belongs to
        itself and stands only on its own receipt. Another event (``unsee erase`` makes a new id
        each time) stands on its own receipt, then the receipts of this session and target
        (keyed hash) whose event is a forget, then any other, newest first; it belongs to the
        forget the first of them names or is. Only receipts ``pinned`` (the key in use) signed count.

        On a shared store the store's receipts are read (every machine's), then this home's
        files of events the store does not hold (written before it held receipts)."""
        folder = self.ctx.home / "receipts"
        forgets = {e for e, _, state, _ in self.ctx.records.commits.of(scope.session) if state == "done"}
        target_hash = self.ctx.hasher.hash(scope.target)

        def ours(receipt: Receipt) -> bool:
            return (receipt.sessions == [scope.session] and receipt.target_hash == target_hash
                    and receipt.subject is None and verify_signature(receipt, trusted_public_pem=pinned))

        db = shared_db(self.ctx.records)
        if event_id in forgets:  # (its own receipt only: one read, however many the home holds)
            path = folder / f"{event_id}.json"
            try:
                mine = stored_receipt(db, event_id) if db is not None else None
                if mine is None and path.is_file():
                    mine = read_receipt(path)
            except (OSError, ReceiptInvalid):  # (unreadable: none to stand on, a new one is written)
                mine = None
            return None, [(path, mine)] if mine is not None and ours(mine) else []
        everywhere = [(folder / f"{r.event_id}.json", r) for r in stored_receipts(db, [scope.session])] \
            if db is not None else []
        held = {r.event_id for _, r in everywhere}
        local = [(p, r) for p, r in receipts_in(folder) if p.stem not in held]
        found = sorted([(p, r) for p, r in everywhere + local if ours(r)], key=lambda pr: pr[1].created_at,
                       reverse=True)
        own = [(p, r) for p, r in found if p.stem == event_id]
        if event_id in forgets:
            return None, own
        others = [(p, r) for p, r in found if p.stem != event_id]
        ordered = own + [pr for pr in others if pr[1].event_id in forgets] \
            + [pr for pr in others if pr[1].event_id not in forgets]
        belongs = next((r.forget_event or (r.event_id if r.event_id in forgets else None)
                        for _, r in ordered if r.forget_event or r.event_id in forgets), None)
        return belongs, ordered

    def _receipt(self, scope: Scope, routes: list[Route], before: AuditReport, after: AuditReport,
                 notes: dict[str, list[str]], forget_event: str | None = None,
                 key: SigningKey | None = None) -> Receipt:
        rows = []
        owned = [[Path(p) for p in route.files(scope) if Path(p).is_file()] for route in routes]
        # every route's SQLite files digested in one child process
        digests = {p: h["sha256"] for p, h in scan_isolated(
            sorted({str(p) for paths in owned for p in paths if is_sqlite_family(p)}), scope.target,
            digests=True).items()}
        for route, paths, b, a in zip(routes, owned, before.routes, after.routes):
            files = {str(p): digests[str(p)] for p in paths if str(p) in digests}
            files.update({str(p): sha256_file(p) for p in paths if not is_sqlite_family(p)})
            rows.append(RouteReceipt(name=route.name, method=route.method, copies_before=b.copies,
                                     copies_after=a.copies, value_copies_after=a.value_copies, files=files,
                                     other_sessions=a.other_copies or None,
                                     notes=[*notes.get(route.name, []), *a.notes]
                                     + ([f"{a.source_copies} copies in files the sandbox held before the "
                                         "agent ran (the source, kept)"] if a.source_copies else [])))
        key = key or SigningKey.resolve(self.ctx.home, shared_db(self.ctx.records))
        receipt = Receipt(unsee_version=self.ctx.version, event_id=scope.event_id or "",
                          target_hash=self.ctx.hasher.hash(scope.target), sessions=[scope.session],
                          routes=rows, unreachable=after.unreachable, created_at=datetime.now(timezone.utc),
                          public_key=key.public_pem(), other_sessions=after.other_sessions or None,
                          forget_event=forget_event, incomplete=after.incomplete or None)
        return sign_receipt(receipt, key)


def _still_says(receipt: Receipt, now: AuditReport) -> bool:
    """Whether an earlier receipt still states what a clean audit ``now`` found: its audit after
    erasure was complete (no ``Receipt.incomplete``) and recorded no copy, and it audited at least
    the routes audited now with no more out of reach (a re-erasure with the agent does not stand
    on a receipt made without it; one without the agent stands on the forget's, which audited the
    agent's stores too)."""
    return (not receipt.incomplete
            and all(r.copies_after == 0 and not r.value_copies_after for r in receipt.routes)
            and {r.name for r in receipt.routes} >= {r.route for r in now.routes}
            and set(receipt.unreachable) <= set(now.unreachable))


def verify(path: Path | Receipt, ctx: ErasureContext | None = None, target: str | None = None, agent: Any = None,
           *, pinned: str | None = None):
    """(receipt, signature ok, audit now or None): check a receipt's signature (a file, or a
    receipt read from the shared store) pinned to ``pinned``, else with ``ctx`` to the key in
    use there (``receipt.trusted_key``: ``$UNSEE_RECEIPT_KEY``, the shared store's, the home's);
    with the target, re-run the audit."""
    from .receipt import read_receipt, verify_signature

    receipt = path if isinstance(path, Receipt) else read_receipt(path)
    if pinned is None and ctx is not None:
        pinned = trusted_key(ctx.home, shared_db(ctx.records))[0]
    ok = verify_signature(receipt, trusted_public_pem=pinned)
    audit = None
    if ctx is not None and target is not None:
        if ctx.hasher.hash(target) != receipt.target_hash:
            raise InvalidArgument("--target is not the target this receipt was made for (its keyed hash differs)")
        audit = Eraser(ctx).audit(receipt.sessions[0], target, agent)
    return receipt, ok, audit
