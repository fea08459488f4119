"""Erase a data subject: whole threads and memory-store namespaces, every route audited, one
signed receipt (GDPR Art. 17's "delete everything about me"; the ``erase_customer`` routine of
"LangGraph Compaction Deletes the View, Not the Record").

``SubjectEraser(ctx, leases).erase(threads, namespaces, targets, agent=..., subject=...)``:

1. checks its input (``subject_plan.selection``; unknown threads: ``SubjectNotFound``),
   before anything is written;
2. takes keyed fingerprints of the texts recorded in the subject's sessions (the vault
   knows them, before they are deleted; ``subject_plan.Fingerprinter``), audits every route
   for the target strings and the fingerprints (the receipt's *before*), and journals the
   plan (``<home>/erasures/<id>.json``, on a shared store a row of its ``erasure_journals``:
   ids, counts and fingerprints, never a text);
3. runs :meth:`Route.erase_subject` route by route, in the eraser's route order, each step
   journaled as done, so a rerun after a crash at any step finishes the rest: threads
   deleted with their scratch/staging threads and keys, namespaces deleted atomically under
   their leases (``namespaces.py``), the sessions' records and the namespaces' journal rows
   dropped, the sessions' calls redacted to keyed hashes, their exports and sandboxes
   deleted, and WAL/free pages scrubbed;
4. audits every route again — what is there now — and signs ONE receipt
   (``<home>/receipts/<id>.json``, and a row of the shared store's ``erasure_receipts``)
   naming each route with before/after counts and what could not be reached.

Copies inside other sessions' live rows are theirs (``owners.py``): listed, never counted,
never touched.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from unsee.middleware.errors import UnseeError
from unsee.middleware.faults import fault_point

from . import history
from .eraser import AuditReport, Eraser, OUTSIDE, agent_gaps, memory_records
from .errors import ErasureInterrupted
from .fingerprint_scan import scan_fingerprints, tree_files
from .forms import target_forms
from .journal import Journal
from .owners import attribute_sqlite, main_file, owner_of
from .ports import ErasureContext
from .receipt import Receipt, SigningKey, SubjectFacts, receipt_path, save_receipt, sign_receipt
from .routes import Route, RouteAudit, Scope, SubjectScope, prefetch_byte_scans
from .routes_langgraph import CheckpointHistoryRoute, MemoryStoreRoute, _all_items
from .routes_records import LedgerRoute, RecordsRoute
from .routes_sandbox import SandboxRoute
from .shared import shared_db
from .subject_plan import Fingerprinter, Selection, SubjectNotFound, in_namespaces, plan, selection

PLANNED, DONE = "planned", "done"
#: the vault's tables (``StoreErasure.TEXT_COLUMNS``) whose texts are fingerprinted
VAULT_TEXTS = ("content", "store_journal")


@dataclass
class SubjectErasureResult:
    receipt: Receipt
    path: Path
    before: AuditReport
    after: AuditReport
    notes: dict[str, list[str]] = field(default_factory=dict)
    #: route name -> the memory records its step deleted this run (``middleware.memory.MemoryChange``:
    #: a namespace's keyed hash and count); routes that deleted none are absent
    memory: dict[str, list[Any]] = field(default_factory=dict)

    @property
    def clean(self) -> bool:
        return self.after.clean


class SubjectEraser:
    """The subject-level form of :class:`~.eraser.Eraser` (same routes, scans, receipts)."""

    def __init__(self, ctx: ErasureContext, leases: Any = None):
        self.ctx = ctx
        self.leases = leases
        self.fp = Fingerprinter.from_hasher(ctx.hasher)

    # -- input --------------------------------------------------------------------------
    def _unknown(self, sel: Selection, agent: Any, journal: Journal) -> Iterator[str]:
        """Threads no recorded session, no checkpoint and no journal of this erasure names."""
        saver = getattr(agent, "checkpointer", None) if agent is not None else None
        known = set(journal.get("threads") or [])
        for t in sel.threads:
            if t in known or self.ctx.records.has_session(t):
                continue
            if saver not in (None, True, False) and saver.get_tuple(history.config_of(t)) is not None:
                continue
            yield t

    def erase(self, threads: Any = (), namespaces: Any = (), targets: Any = (), *, agent: Any = None,
              subject: Any = None) -> SubjectErasureResult:
        sel = selection(threads, namespaces, targets, subject)  # InvalidArgument: nothing touched
        eid = sel.erasure_id(self.ctx.hasher.hash)
        # (read only until a step is taken)
        journal = Journal.open(self.ctx.home / "erasures", eid, eid, self.ctx.records)
        unknown = list(self._unknown(sel, agent, journal))
        if unknown:
            raise SubjectNotFound(unknown)
        key = SigningKey.resolve(self.ctx.home, shared_db(self.ctx.records))  # ReceiptKeyInvalid: nothing done
        try:
            with contextlib.ExitStack() as stack:
                if self.ctx.runs is not None:  # no run of this process on the subject's threads meanwhile
                    for t in sel.threads:
                        stack.enter_context(self.ctx.runs.exclusive(t))
                return self._erase(sel, eid, journal, agent, key)
        except UnseeError:
            raise
        except Exception as e:  # a service failed part-way: typed; the journal lets a rerun finish
            raise ErasureInterrupted(",".join(sel.threads) or eid, eid, e) from e

    # -- the steps ----------------------------------------------------------------------
    def _routes(self, sel: Selection, eid: str, agent: Any) -> list[Route]:
        return Eraser(self.ctx)._routes(self._scope(sel, eid, None), agent)

    def _scope(self, sel: Selection, eid: str, thread: str | None, target: str | None = None) -> Scope:
        # a scope per (thread, target) for the routes' own audits; a placeholder target (the
        # erasure id: no stored text holds it) where only the route's files are asked for
        target = target or eid
        return Scope(thread or (sel.threads[0] if sel.threads else eid), target, target_forms(target), eid)

    def _erase(self, sel: Selection, eid: str, journal: Journal, agent: Any, key: SigningKey) -> SubjectErasureResult:
        routes = self._routes(sel, eid, agent)
        if journal.get("state") in (None, DONE):
            sessions = plan(sel, eid, self.ctx.records.sessions_like(""), [r.name for r in routes]).sessions
            fps = self._fingerprints(sessions, sel.threads)
            # whether the sessions used a memory store, counted before their records are deleted
            used = memory_records(self.ctx.records, list(sel.threads))
            gaps = agent_gaps(self.ctx.records, list(sel.threads), agent, used)
            before = self._audit(sel, eid, routes, sessions, fps, agent, gaps)
            journal.set(state=PLANNED, threads=list(sel.threads), sessions=sessions, fingerprints=fps,
                        before={r.route: r.copies for r in before.routes}, unreachable=before.unreachable,
                        memory_records=used, done=[], notes={})
            fault_point("erase:subject:planned")
        # what this run's agent cannot read (a rerun after a crash: the plan's count of memory records)
        gaps = agent_gaps(self.ctx.records, list(sel.threads), agent, journal.get("memory_records"))
        sessions, fps = journal.get("sessions"), journal.get("fingerprints")
        todo = plan(sel, eid, sessions, [r.name for r in routes], journal.get("done") or [])
        subject = SubjectScope(eid, sel.threads, tuple(todo.sessions), sel.namespaces, self.leases,
                               self.ctx.hasher)
        notes: dict[str, list[str]] = dict(journal.get("notes") or {})
        memory: dict[str, list[Any]] = {}
        for route in routes:
            if route.name not in todo.todo:
                continue
            fault_point(f"erase:subject:{route.name}")
            got = route.erase_subject(subject)
            notes[route.name] = got if got is not None else ["no subject erasure on this route: audited only"]
            if changed := route.memory_changes():
                memory[route.name] = changed
            journal.set(done=[*journal.get("done"), route.name], notes=notes)
        after = self._audit(sel, eid, routes, todo.sessions, fps, agent, gaps)
        before_counts = journal.get("before") or {}
        before = AuditReport(eid, [_counted(r.name, before_counts.get(r.name, 0)) for r in routes],
                             list(journal.get("unreachable") or []))
        receipt = self._receipt(sel, eid, routes, before, after, notes, len(fps), key)
        path = receipt_path(self.ctx.home, eid)
        save_receipt(receipt, path, shared_db(self.ctx.records))
        journal.set(state=DONE)
        return SubjectErasureResult(receipt, path, before, after, notes, memory)

    def _fingerprints(self, sessions: list[str], threads: tuple[str, ...]) -> list[str]:
        """Keyed fingerprints of the subject's recorded texts that no other session holds."""
        recs = self.ctx.records
        # the vault's texts (artifact contents, memory-store journal values): what the sessions
        # observed and produced; span attributes and commit payloads carry ids, not content
        mine = [text for s in sessions for table, _, _, text in recs.erasure.session_texts(s) if table in VAULT_TEXTS]
        others = (text for s in recs.sessions_like("") if owner_of(s) not in threads
                  for table, _, _, text in recs.erasure.session_texts(s) if table in VAULT_TEXTS)
        return self.fp.fingerprints(mine, others)

    # -- the audit ----------------------------------------------------------------------
    def _audit(self, sel: Selection, eid: str, routes: list[Route], sessions: list[str], fps: list[str],
               agent: Any, gaps: list[str] = ()) -> AuditReport:
        """``gaps``: what cannot be read through ``agent`` (``eraser.agent_gaps``, as planned)."""
        outs = [RouteAudit(r.name) for r in routes]
        threads = sel.threads or (eid,)
        for target in sel.targets:  # the routes' own audits, per thread (their value reads are per thread)
            for thread in threads:
                scope = self._scope(sel, eid, thread, target)
                prefetch_byte_scans(scope, routes)
                try:
                    audits = [r.audit(scope) for r in routes]
                finally:
                    scope.byte_scans.clear()
                attribute_sqlite(audits, threads, target)
                for out, a in zip(outs, audits):
                    _merge(out, a, f"target {self.ctx.hasher.hash(target)}")
        self._audit_fingerprints(sel, eid, routes, outs, fps)
        self._audit_values(sel, routes, outs, sessions, fps)
        unreachable = [u for r in routes for u in r.unreachable()]
        if agent is None:
            unreachable.append("the agent's checkpointer and memory store: no agent given "
                               "(u.erase_subject(..., agent=...) / --agent); their files under the home are scanned")
        return AuditReport(eid, outs, unreachable + OUTSIDE, list(gaps))

    def _audit_fingerprints(self, sel: Selection, eid: str, routes: list[Route], outs: list[RouteAudit],
                            fps: list[str]) -> None:
        """Byte copies of the sessions' recorded content, by fingerprint, in every route's files."""
        if not fps:
            return
        threads = sel.threads or (eid,)
        owned = [sorted({p for t in threads for p in tree_files(r.files(self._scope(sel, eid, t)))})
                 for r in routes]
        got = scan_fingerprints(sorted({p for paths in owned for p in paths}), self.fp, fps)
        for out, paths in zip(outs, owned):
            families: dict[str, list[str]] = {}
            for p in paths:
                if got["files"].get(p):
                    families.setdefault(main_file(p), []).append(p)
            for db, members in families.items():
                left = {p: got["files"][p] for p in members}
                # hits inside other sessions' live rows are theirs (as attribute_sqlite does)
                for s, n in sorted(got["rows"].get(db, {}).items()):
                    if owner_of(s) in threads or not n:
                        continue
                    out.add_other(owner_of(s), f"{db} (recorded content)", n)
                    for p in sorted(members, key=lambda m: m != db):
                        cut = min(n, left[p])
                        left[p] -= cut
                        n -= cut
                for p, n in left.items():
                    if n:
                        key = f"{p} (recorded content)"
                        out.byte_copies[key] = out.byte_copies.get(key, 0) + n

    def _audit_values(self, sel: Selection, routes: list[Route], outs: list[RouteAudit], sessions: list[str],
                      fps: list[str]) -> None:
        """What each owner's API still holds of the subject: checkpoints of its threads, items
        under its namespaces (and items elsewhere holding its fingerprints), its sessions'
        records, its calls' unredacted texts, its sandboxes' stored items."""
        fset = frozenset(fps)
        subject = SubjectScope("", sel.threads, tuple(sessions), sel.namespaces)
        for route, out in zip(routes, outs):
            n = 0
            if isinstance(route, CheckpointHistoryRoute):
                threads = route.subject_threads(subject)
                n = sum(1 for t in threads for _ in route.saver.list(history.config_of(t)))
                out.notes.append(f"{n} checkpoints of {len(sel.threads)} subject threads "
                                 f"({len(threads) - len(sel.threads)} scratch/staging)")
            elif isinstance(route, MemoryStoreRoute):
                items = list(_all_items(route.inner))
                inside = sum(1 for i in items if in_namespaces(i.namespace, sel.namespaces))
                elsewhere = sum(1 for i in items if not in_namespaces(i.namespace, sel.namespaces)
                                and self.fp.hits(history.value_text(i.value), fset))
                n = inside + elsewhere
                out.notes.append(f"{inside} items under the subject's namespaces; {elsewhere} items elsewhere "
                                 "holding its recorded content")
            elif isinstance(route, RecordsRoute):
                n = sum(len(route.records.erasure.session_texts(s)) for s in sessions)
                out.notes.append(f"{n} stored texts of the subject's {len(sessions)} sessions")
            elif isinstance(route, LedgerRoute):
                n = sum(1 for rec in route.ledger.calls() if subject.owns(rec.session) and any(
                    self.fp.hits(t, fset) for t in (rec.args_json, rec.result_json or "", rec.error or "")))
                out.notes.append(f"{n} call records of the subject holding its recorded content")
            elif isinstance(route, SandboxRoute):
                n = sum(len(route._items(t)) for t in sel.threads)
                out.notes.append(f"{n} stored sandbox items of the subject's sessions")
            out.value_copies += n

    def _receipt(self, sel: Selection, eid: str, routes: list[Route], before: AuditReport, after: AuditReport,
                 notes: dict[str, list[str]], fingerprints: int, key: SigningKey) -> Receipt:
        # the eraser's receipt (files digested, routes' rows), then made the subject's and signed again
        base = Eraser(self.ctx)._receipt(self._scope(sel, eid, None), routes, before, after, notes, key=key)
        h = self.ctx.hasher.hash
        facts = SubjectFacts(subject_hash=h(sel.subject) if sel.subject else None,
                             namespace_hashes=[h("/".join(ns)) for ns in sel.namespaces],
                             target_hashes=[h(t) for t in sel.targets], fingerprints=fingerprints)
        receipt = base.model_copy(update={"sessions": list(sel.threads), "subject": facts, "signature": None,
                                          "target_hash": h(sel.subject or eid)})
        return sign_receipt(receipt, key)


def _counted(route: str, copies: int) -> RouteAudit:
    """A route's *before* count as journaled (a rerun after a crash reports the first audit's)."""
    return RouteAudit(route, value_copies=copies)


def _merge(out: RouteAudit, a: RouteAudit, label: str) -> None:
    """Fold one (thread, target) audit into the route's subject audit: per file the largest
    count (every thread's audit reads the same files), value copies the largest too."""
    for p, n in a.byte_copies.items():
        key = f"{p} ({label})"
        out.byte_copies[key] = max(out.byte_copies.get(key, 0), n)
    out.value_copies = max(out.value_copies, a.value_copies)
    out.source_copies = max(out.source_copies, a.source_copies)
    for s, where in a.other_sessions.items():
        for w, n in where.items():
            mine = out.other_sessions.setdefault(s, {})
            mine[w] = max(mine.get(w, 0), n)
    out.notes.extend(n for n in a.notes if n not in out.notes)
    out.incomplete.extend(n for n in a.incomplete if n not in out.incomplete)
