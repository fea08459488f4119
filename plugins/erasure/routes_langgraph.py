"""Routes in the agent's LangGraph parts: the checkpoint history and the memory store.

The history is rewritten, not amputated (``history.py``): the thread becomes
the clean prefix up to the fork checkpoint followed by the counterfactual
suffix the replay produced in its scratch thread; the tainted checkpoints,
their writes and blobs, the scratch threads and the staging thread go. Where
the saver is a SQLite file, the bytes that outlive a row delete (WAL, free
pages) are scrubbed too; where values are encrypted per thread
(``keys.EncryptingSaver``) the rewritten history is written under a new key
and the old keys are destroyed. In-process savers and stores
(``InMemorySaver``, ``InMemoryStore``) are audited at the value level only:
they have no files.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import time
from pathlib import Path
from typing import Any

from unsee.middleware.checkpointers import driver_or_generic, unwrapped
from unsee.middleware.faults import fault_point
from unsee.middleware.memory import MemoryChange
from unsee.middleware.semconv import OP_DELETE_MEMORY

from . import history, history_pg, history_sql, row_audit
from .keys import EncryptingSaver
from .journal import Journal
from .routes import Route, RouteAudit, Scope, SubjectScope, scrub_note, sqlite_route_files
from .isolated import scan_isolated
from .pg_compact import SAVER_TABLES, STORE_TABLES, UNREACHABLE, is_postgres, vacuum_full
from .sqlite_scrub import async_main_file, main_file, scrub, scrub_owned

log = logging.getLogger("unsee.erasure")

SCRATCH_MARK = "~cf-"  # the forget plugin's scratch thread mark (plugins/forget/replay.py)
STAGE_MARK = "~er-"


def _never(value: Any) -> bool:
    return False


class CheckpointHistoryRoute(Route):
    name = "langgraph.checkpoints"
    holds = "the LangGraph thread's checkpoint history (values, pending writes, blobs) and replay scratch threads"
    method = "history rewritten as clean prefix + counterfactual suffix; tainted checkpoints and scratch threads deleted"

    def __init__(self, agent: Any, records: Any, journals: Path):
        self.agent = agent
        self.saver = agent.checkpointer
        self.records = records
        #: one journal per session, whichever erasure event runs the rewrite (a rerun with
        #: another event id must still finish a swap an earlier one began)
        self.journals = Path(journals)
        #: the driver of the saver holding the rows (an EncryptingSaver wraps the real saver)
        self.driver = driver_or_generic(unwrapped(self.saver))
        self.conn = self.driver.connection
        self.lock = self.driver.lock
        self.path = self.driver.database_file()
        self.keys = self.saver.store if isinstance(self.saver, EncryptingSaver) else None
        #: (scope, its reads): the audit before an erasure and the rewrite decode each checkpoint once
        self._reads: tuple[Scope, history.ThreadReader] | None = None
        if self.keys is not None:
            self.method += "; old per-thread keys destroyed (crypto-shredding)"

    def files(self, scope: Scope | None = None) -> list[Path]:
        return sqlite_route_files([self.path]) if self.path else []

    def unreachable(self) -> list[str]:
        if is_postgres(self.conn):
            return [UNREACHABLE.format(what="checkpoint")
                    + (" (values encrypted: their keys are destroyed)" if self.keys else
                       " (values not encrypted: u.encrypted(saver) makes them unreadable once erased)")]
        return []

    def _holds(self, scope: Scope):
        return lambda value: scope.holds(history.value_text(value))

    def _reader(self, scope: Scope) -> history.ThreadReader:
        if self._reads is None or self._reads[0] is not scope:
            self._reads = (scope, history.ThreadReader(self.saver, self._holds(scope)))
        return self._reads[1]

    def threads(self, scope: Scope) -> list[str]:
        return [scope.session, *history.threads_with_prefix(self.saver, scope.session + SCRATCH_MARK),
                *history.threads_with_prefix(self.saver, scope.session + STAGE_MARK)]

    def audit(self, scope: Scope) -> RouteAudit:
        out = self._audit()
        total = holding = 0
        for thread in self.threads(scope):
            # from the stored rows where the saver's storage is readable (row_audit.py): only rows
            # whose bytes can hide the target are decoded; else every checkpoint through the API
            got = row_audit.history_rows_holding(self.saver, thread, scope.target, scope.forms)
            if got is None:
                reader = self._reader(scope)
                got = history.history_holding(self.saver, thread, reader.holds_target, reader)
            total, holding = total + got[0], holding + got[1]
        out.value_copies = holding
        out.notes.append(f"{holding} of {total} checkpoints hold the target")
        if self.path is not None:
            out.add_files(self.files(), scope)
        else:
            out.notes.append("no file behind this saver: audited through its API only")
        return out

    def erase(self, scope: Scope) -> list[str]:
        try:
            return self._erase(scope)
        finally:
            self._reads = None  # the audit after reads what the saver holds now

    def _erase(self, scope: Scope) -> list[str]:
        notes: list[str] = []
        saver, thread, reader = self.saver, scope.session, self._reader(scope)
        pending = self._pending(scope)
        # the keys held now: the saver's delete_thread may destroy some of them during the rewrite
        held = self._held_keys(scope) if self.keys is not None else {}
        if pending:
            history.check_rewritable(self.agent)  # HistoryNotRewritable before anything changes
        if not pending and history.history_holding(saver, thread, reader.holds_target, reader)[1]:
            raise history.HistoryNotRewritable(
                f"session {thread!r} holds the target in its checkpoint history but has no committed replay "
                "to rewrite it from: forget the target first (u.forget / unsee forget)")
        # Oldest first: a later replay may have forked from a checkpoint of an earlier one's scratch
        # thread; once that one is swapped in (ids kept), the fork point is in the thread itself.
        for k, (event_id, scratch, fork) in enumerate(pending):
            last = k == len(pending) - 1
            notes += self._rewrite(scope, event_id, scratch, fork,
                                   reader if last else history.ThreadReader(saver, _never))
            history.drop_thread(saver, scratch)
            reader.written(thread, scratch)
        for t in self.threads(scope)[1:]:
            history.drop_thread(saver, t)
        moved = self.records.erasure.retarget_checkpoints(scope.session, scope.session + SCRATCH_MARK)
        if moved:
            notes.append(f"{moved} recorded checkpoints now point at the rewritten thread")
        if self.keys is not None:
            notes.append(self._shred(scope, held))
        if self.conn is not None and self.path is not None:
            res = scrub_owned(self.conn, self.path, lock=self.lock)
            notes.append(scrub_note(res))
        elif is_postgres(self.conn) and self.keys is None:
            # (encrypted: the old rows are ciphertext under destroyed keys; no table rewrite needed)
            notes.append(vacuum_full(self.conn, SAVER_TABLES, lock=self.lock))
        return notes

    def subject_threads(self, subject: SubjectScope) -> list[str]:
        """Every saver thread of a subject: its threads and their scratch/staging threads."""
        return [x for t in subject.threads for x in (t, *history.threads_with_prefix(self.saver, t + SCRATCH_MARK),
                                                     *history.threads_with_prefix(self.saver, t + STAGE_MARK))]

    def erase_subject(self, subject: SubjectScope) -> list[str]:
        """Whole threads deleted (checkpoints, writes, blobs; scratch and staging threads), every
        key of theirs destroyed (encrypted saver), then WAL and free pages scrubbed / tables
        rewritten. A rerun finds nothing left to delete and scrubs again."""
        threads = self.subject_threads(subject)
        held = {}
        if self.keys is not None:  # (delete_thread destroys them; their bytes are checked below)
            marks = tuple(t + m for t in subject.threads for m in (SCRATCH_MARK, STAGE_MARK))
            mine = [t for t in self.keys.threads() if t in subject.threads or t.startswith(marks)]
            held = {kid: self.keys.key(kid) for t in mine for kid in self.keys.kids_of(t)}
        n = history.drop_threads(self.saver, threads)
        notes = [f"{n} threads deleted (every checkpoint, write and blob)"]
        if self.keys is not None:
            left = [kid for t in self.keys.threads() if t in subject.threads
                    or t.startswith(tuple(x + m for x in subject.threads for m in (SCRATCH_MARK, STAGE_MARK)))
                    for kid in self.keys.kids_of(t)]
            complete = self.keys.destroy(left) if left else True
            files = [str(p) for p in sqlite_route_files([self.keys.path]) if p.is_file()]
            found = sum(h["copies"] for h in scan_isolated(files, needles=list(held.values())).values()) if held else 0
            notes.append(f"{len(held)} encryption keys of those threads destroyed; their bytes in "
                         f"{self.keys.path.name} (+wal, shm): {found}"
                         + ("" if complete else " (the key store's WAL was not fully truncated)"))
        if self.conn is not None and self.path is not None:
            notes.append(scrub_note(scrub_owned(self.conn, self.path, lock=self.lock)))
        elif is_postgres(self.conn) and self.keys is None:
            notes.append(vacuum_full(self.conn, SAVER_TABLES, lock=self.lock))
        return notes

    def _journal(self, scope: Scope) -> Journal:
        name = hashlib.sha256(scope.session.encode()).hexdigest()[:16]
        # a row of the shared store's erasure_journals when the records are on PostgreSQL
        return Journal.open(self.journals, f"history-{name}", scope.session, self.records)

    def _pending(self, scope: Scope) -> list[tuple[str, str, dict | None]]:
        """(event id, scratch thread, fork point) of every committed replay of the session whose
        scratch thread is still there (not erased yet), oldest first."""
        out = []
        for event_id, scratch, state, payload in self.records.commits.of(scope.session):
            if state == "done" and self.saver.get_tuple(history.config_of(scratch)) is not None:
                out.append((event_id, scratch, json.loads(payload or "{}").get("fork")))
        return out

    def _rewrite(self, scope: Scope, event_id: str, scratch: str, fork: dict | None,
                 reader: history.ThreadReader) -> list[str]:
        """Stage, journal, swap: the thread becomes its clean prefix + ``scratch``'s suffix."""
        saver, thread, journal = self.saver, scope.session, self._journal(scope)
        key, stage = f"history:{event_id}", f"{thread}{STAGE_MARK}{event_id[:12]}"
        notes: list[str] = []
        staged = None
        if journal.get(key) == "swapped":
            return notes
        if journal.get(key) is None and self.keys is None and (history_sql.sqlite_saver_conn(saver) is not None
                                                               or history_pg.postgres_saver(saver)):
            return self._rewrite_in_place(scope, event_id, scratch, fork, reader, journal, key)
        head = saver.get_tuple(history.config_of(thread))
        head_id = head.config["configurable"]["checkpoint_id"] if head else None
        moved = journal.get(key) in ("staged", "swapping") and journal.get(f"{key}:head") != head_id
        if moved and (journal.get(key) == "staged" or saver.get_tuple(history.config_of(stage, head_id)) is None):
            # the session went on after the stage was built (and before any swap began:
            # a partial swap's head is a staged checkpoint): build the stage again
            journal.set(**{key: None})
        if journal.get(key) != "swapping":
            if journal.get(key) != "staged":
                # unsee records a turn's checkpoint after the turn's input was added: the clean
                # prefix ends where that turn started
                start = history.before_turn(saver, thread, fork["checkpoint_id"]) if fork else None
                staged = history.stage_rewrite(
                    saver, thread, fork_checkpoint_id=start, suffix_thread=scratch, stage_thread=stage,
                    holds_target=reader.holds_target, reader=reader, specs=history.delta_specs(self.agent),
                    marker={"unsee_rewritten": scope.event_id or "erase", "unsee_commit": event_id},
                    continue_after=lambda meta: meta.get("unsee_commit") == event_id)
                notes.append(f"history staged: {staged.kept} kept + {staged.suffix} counterfactual checkpoints; "
                             f"{staged.dropped} dropped")
                journal.set(**{key: "staged", f"{key}:head": staged.head})
                fault_point("erase:history:staged")
            if self.keys is not None and not journal.get(f"{key}:rotated"):
                # the rewritten history is written under a new key; the old ones are destroyed below
                self.keys.rotate(thread)
                journal.set(**{f"{key}:rotated": True})
            # from here on the thread may be partial: a rerun finishes the swap, never stages again
            journal.set(**{key: "swapping"})
        fault_point("erase:history:swapping")
        # (the stage this process just built is not read back; a rerun after a crash reads it)
        n = history.swap_in(saver, thread, stage, staged.written if staged is not None else None)
        reader.written(thread, stage)
        journal.set(**{key: "swapped"})
        notes.append(f"history swapped in ({n} checkpoints)")
        return notes

    def _rewrite_in_place(self, scope: Scope, event_id: str, scratch: str, fork: dict | None,
                          reader: history.ThreadReader, journal: Journal, key: str) -> list[str]:
        """A saver whose SQLite or PostgreSQL driver is ``sql_rewritable``: the suffix rewritten
        with SQL in one transaction (history_sql.py, history_pg.py)."""
        saver, thread = self.saver, scope.session
        start = history.before_turn(saver, thread, fork["checkpoint_id"]) if fork else None
        sqlite = history_sql.sqlite_saver_conn(saver) is not None
        if reader.holds_target is _never:
            # an earlier replay rewritten first checks nothing: its suffix may hold a later target
            holds_row = lambda thread, cid: False  # noqa: E731
        elif sqlite:
            holds_row = row_audit.sqlite_checkpoint_holds(saver, row_audit.RowJudge(scope.target, scope.forms,
                                                                                    saver.serde.loads_typed))
        else:  # PostgreSQL: the checkpoints the plan asks about (the suffix's, never the prefix's) are decoded
            holds_row = None
        done = (history_sql.rewrite_sqlite if sqlite else history_pg.rewrite_postgres)(
            saver, thread, fork_checkpoint_id=start, suffix_thread=scratch, holds_target=reader.holds_target,
            marker={"unsee_rewritten": scope.event_id or "erase", "unsee_commit": event_id},
            continue_after=lambda meta: meta.get("unsee_commit") == event_id,
            specs=history.delta_specs(self.agent), points=fault_point, holds_row=holds_row)
        reader.written(thread)
        journal.set(**{key: "swapped"})
        return [done.note()]

    def _held_keys(self, scope: Scope) -> dict[str, bytes]:
        """kid -> key of every key of the thread and its scratch/stage threads, now."""
        marks = (scope.session + SCRATCH_MARK, scope.session + STAGE_MARK)
        threads = [t for t in self.keys.threads() if t == scope.session or t.startswith(marks)]
        return {kid: self.keys.key(kid) for t in threads for kid in self.keys.kids_of(t)}

    def _shred(self, scope: Scope, held: dict[str, bytes]) -> str:
        """Destroy every key of the scratch/stage threads and every key of the thread but its
        active one (the rewritten history is under that one; ciphertext left anywhere under the
        old keys — WAL, backups, replicas — is unreadable from now on), and prove the bytes of
        those and of the ``held`` keys the saver's ``delete_thread`` already destroyed are gone."""
        active = self.keys.key_for(scope.session)[0]
        now = self._held_keys(scope)
        gone = [kid for kid in now if kid != active]
        secrets = {kid: key for kid, key in {**held, **now}.items() if kid != active}
        if not secrets:
            return "no old encryption key to destroy"
        complete = self.keys.destroy(gone) if gone else True
        secrets = list(secrets.values())
        # the key store is a route of its own kind: prove the destroyed key bytes are gone from it
        # (read in a child process: the key store's own connection keeps its locks)
        files = [str(p) for p in sqlite_route_files([self.keys.path]) if p.is_file()]
        left = sum(h["copies"] for h in scan_isolated(files, needles=secrets).values())
        return (f"{len(secrets)} old encryption keys destroyed; their bytes in {self.keys.path.name} (+wal, shm): "
                f"{left}" + ("" if complete else " (the key store's WAL was not fully truncated)"))


class MemoryStoreRoute(Route):
    name = "langgraph.store"
    holds = "memory store items (cross-thread memories)"
    method = "items written in I(z) rolled back at commit; file WAL truncated and vacuumed"

    def __init__(self, store: Any):
        self.store = store
        self.inner = getattr(store, "inner", store)
        self.conn = getattr(self.inner, "conn", None)
        self.lock = getattr(self.inner, "lock", None)
        self.path = main_file(self.conn) or async_main_file(self.inner)
        #: the namespace deletes of this route's subject erasure (``memory_changes``)
        self.deleted: list[MemoryChange] = []

    def files(self, scope: Scope | None = None) -> list[Path]:
        return sqlite_route_files([self.path]) if self.path else []

    def audit(self, scope: Scope) -> RouteAudit:
        out = self._audit()
        got = row_audit.store_rows_holding(self.inner, scope.target, scope.forms)  # None: not read raw
        if got is None:
            items = list(_all_items(self.inner))
            got = len(items), sum(1 for i in items if scope.holds(history.value_text(i.value)))
        out.value_copies = got[1]
        out.notes.append(f"{out.value_copies} of {got[0]} items hold the target")
        if self.path is not None:
            out.add_files(self.files(), scope)
        return out

    def erase_subject(self, subject: SubjectScope) -> list[str]:
        """Every item under the subject's namespaces deleted atomically (``namespaces.py``: under
        the namespace's lease, the zero verified before it is released), then the file scrubbed
        / the table rewritten."""
        from .namespaces import delete_namespace

        notes = []
        for ns in subject.namespaces:
            began = time.time_ns()
            done = delete_namespace(self.store, ns, leases=subject.leases, hasher=subject.hasher)
            label = subject.hasher.hash("/".join(ns)) if subject.hasher is not None else "(selected)"
            notes.append(done.note(label))
            if subject.hasher is not None:  # (every record of the namespace: no record ids)
                self.deleted.append(MemoryChange(OP_DELETE_MEMORY, label, done.deleted, (), began,
                                                 max(done.zero_at_ns, began)))
        if is_postgres(self.conn):
            notes.append(vacuum_full(self.conn, STORE_TABLES, lock=self.lock))
        elif self.conn is not None and self.path is not None:
            notes.append(scrub_note(scrub_owned(self.conn, self.path, lock=self.lock)))
        return notes

    def erase(self, scope: Scope) -> list[str]:
        if is_postgres(self.conn):
            return [vacuum_full(self.conn, STORE_TABLES, lock=self.lock)]
        if self.conn is None or self.path is None:
            return []
        res = scrub_owned(self.conn, self.path, lock=self.lock)
        return [scrub_note(res)]

    def memory_changes(self) -> list[MemoryChange]:
        return list(self.deleted)

    def unreachable(self) -> list[str]:
        return [UNREACHABLE.format(what="memory store")] if is_postgres(self.conn) else []


def _all_items(store: Any, page: int = 500):
    offset = 0
    while True:
        batch = store.search((), limit=page, offset=offset)
        yield from batch
        if len(batch) < page:
            return
        offset += page


# The factories (``routes_builtin.BUILTIN_ROUTES`` lists them, in erasure order)
def history_route(ctx, agent):
    """The checkpoint history of an agent with a checkpointer (None: no agent or none)."""
    if agent is None or getattr(agent, "checkpointer", None) in (None, False, True):
        return None
    return CheckpointHistoryRoute(agent, ctx.records, ctx.home / "erasures")


def store_route(ctx, agent):
    """The memory store of an agent with one (None: no agent or no store)."""
    store = getattr(agent, "store", None) if agent is not None else None
    return MemoryStoreRoute(store) if store is not None else None
