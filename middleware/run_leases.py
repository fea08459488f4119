"""A recorder's run leases: the cross-process lease each session's runs hold while they run.

A run takes its session's ``run`` lease (``leases.LeaseTable``) at its start and gives it
back only once its records are written, so a forget in another process never plans on a
partial record. A dead holder's lease marks the session ``run_died`` in the store before
the lease row goes (:meth:`RunLeases.reap_dead`).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import time
from collections.abc import Iterator

from .deferred import TaskQueue
from .leases import NAMESPACE_MARK, LeaseTable
from .store import ProvenanceStore

log = logging.getLogger("unsee.recorder")

#: a forget that ended less than this long (seconds) before a run took its lease: that run
#: checks the state it loaded is still the thread's head
STALE_WINDOW_S = 60.0


class RunLeases:
    """The run leases this process's runs hold, one hold per session (``table``: the lease
    table of the home; None: runs of this process only, nothing to take)."""

    def __init__(self, table: LeaseTable | None, store: ProvenanceStore, tasks: TaskQueue):
        self.table = table
        self._store = store
        self._tasks = tasks
        #: sessions whose run lease this process's runs hold
        self._leased: set[str] = set()

    def acquire(self, session_id: str) -> str | None:
        """Take the session's run lease for this process's runs there (once: a run that resumes,
        or goes on after a retried error, keeps or re-takes it). Waits while a forget, in any
        process, has the session. Returns why the state this run loaded must be checked:
        ``"waited"`` (it overlapped a forget), ``"recent"`` (a forget ended shortly before),
        else None."""
        if self.table is None:
            return None
        if session_id in self._leased:
            self.table.touch(session_id)
            return None
        t0 = time.time_ns()
        if self.table.try_acquire(session_id, "run"):
            self._leased.add(session_id)
            return "recent" if self.table.forgot_since(session_id, t0 - int(STALE_WINDOW_S * 1e9)) else None
        self.table.acquire(session_id, "run")  # SessionBusy after the timeout: the run fails, nothing written
        self._leased.add(session_id)
        return "waited"

    def release(self, session_id: str) -> None:
        """Give the run lease back (idempotent: only the first call of a run releases).

        The lease row is updated by the store's writer once the run's records are written (a
        task queues the release after them): a forget in another process, which polls for the
        lease, never plans on a partial record; one of this process flushes first
        (``Recorder.exclusive``)."""
        if self.table is not None and session_id in self._leased:
            self._leased.discard(session_id)
            self._tasks.put(self._release_after_write, session_id)

    def _release_after_write(self, session_id: str) -> None:
        assert self.table is not None
        after_write = getattr(self._store, "after_write", None)
        if after_write is None:
            self.table.release(session_id, "run")
            return
        # once the run's records (queued before this) are written, the lease's release is queued;
        # the writer writes the releases of that write together (``after_marks``)
        after_write(functools.partial(self.table.release, session_id, "run", flush=False))

    @contextlib.contextmanager
    def forget_lease(self, session_id: str, wait: bool = True) -> Iterator[None]:
        """The session's ``forget`` lease for the block (no run of another process starts
        meanwhile; one of this process waits for it), after reaping a dead run's lease."""
        if self.table is None:
            yield
            return
        with self.table.held(session_id, "forget", wait=wait):
            self.reap_dead(session_id)  # (a run lease left now is a dead holder's)
            yield

    def reap_dead(self, session_id: str | None = None) -> list[str]:
        """Sessions (all, or ``session_id``) whose run lease a dead process left held: each is
        marked ``run_died`` in the store (its records may stop short of its LangGraph state),
        then the lease row goes. The mark is written before the row is dropped: a crash between
        the two marks it again next time."""
        if self.table is None:
            return []
        found = []
        try:
            for session, owner in self.table.dead_runs(session_id):
                if not session.startswith(NAMESPACE_MARK):  # (a memory namespace's lease names no session)
                    self._store.run_marks.mark_died(session, owner)
                    found.append(session)
                    log.warning("a run of session %s died before its records were all written (%s); the "
                                "next forget checks them against the agent's state", session, owner)
                self.table.drop(session, owner)
        except Exception:  # observer: the next open, or the forget's own lease, tries again
            log.exception("could not check for runs that died holding their lease")
        return found
