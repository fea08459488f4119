"""What the agent is doing now, and so when the store's writer may work.

Runs in progress per session (a forget waits for them: :meth:`RunActivity.wait_idle`) and the
model and tool calls the agent waits on. The writer shares the interpreter lock with the
agent: it works while the agent waits on a call (:meth:`RunActivity.agent_busy` is False),
is woken only for calls that lately took long enough (:meth:`RunActivity.worth_waking`),
and an agent that never waits hands its backlog over itself (:meth:`RunActivity.hand_over_backlog`).
"""

from __future__ import annotations

import logging
import threading
import time

from .deferred import TaskQueue
from .errors import SessionBusy
from .store import ProvenanceStore

log = logging.getLogger("unsee.recorder")

#: queued recording tasks at which an agent that never waits hands them over (``hand_over_backlog``)
TASK_BACKLOG = 2048
#: a run that ended less than this ago (seconds) may be one of runs in a loop (``agent_busy``)
RUN_GAP_S = 0.02
#: calls that take less than this, lately, do not wake the store's writer (``worth_waking``)
WAKE_FOR_CALL_S = 0.002


class RunActivity:
    """Runs in progress and calls waited on, in this process."""

    def __init__(self, store: ProvenanceStore, tasks: TaskQueue):
        self._store = store
        self._tasks = tasks
        self._running: dict[str, int] = {}
        self._running_cond = threading.Condition()
        #: model and tool calls in progress (the agent waits on them: the writer's time to work)
        self._waiting = 0
        self._waiting_lock = threading.Lock()
        #: when the last run of this process ended (monotonic; ``agent_busy``)
        self._last_end = 0.0
        #: kind of call -> seconds such calls took lately (``worth_waking``)
        self._call_time: dict[object, float] = {}

    # -- runs ---------------------------------------------------------------
    def mark_running(self, session_id: str, running: bool) -> None:
        with self._running_cond:
            n = self._running.get(session_id, 0) + (1 if running else -1)
            if n > 0:
                self._running[session_id] = n
            else:
                self._running.pop(session_id, None)
                self._last_end = time.monotonic()
            self._running_cond.notify_all()

    def is_running(self, session_id: str) -> bool:
        with self._running_cond:
            return session_id in self._running

    def wait_idle(self, session_id: str, wait: bool = True, timeout: float = 300.0) -> None:
        """Return once no run is in progress on the session (or raise ``SessionBusy``)."""
        with self._running_cond:
            if session_id in self._running and not wait:
                raise SessionBusy(session_id)
            if not self._running_cond.wait_for(lambda: session_id not in self._running, timeout):
                raise SessionBusy(session_id, waited=timeout)

    # -- calls waited on, and the writer's turn ------------------------------------
    def call_began(self, kind: object = None) -> float:
        """A model or tool call starts: the agent waits on it (until :meth:`call_ended`, given
        what this returns and the same ``kind``)."""
        with self._waiting_lock:
            self._waiting += 1
        return time.perf_counter()

    def call_ended(self, kind: object = None, began: float | None = None) -> None:
        with self._waiting_lock:
            self._waiting -= 1
            if began is not None:  # (how long calls of this kind take: an average of the recent ones)
                took = time.perf_counter() - began
                avg = self._call_time.get(kind)
                self._call_time[kind] = took if avg is None else avg + (took - avg) * 0.2

    def worth_waking(self, kind: object = None) -> bool:
        """Whether the store's writer should be woken for a call of ``kind``: calls of that kind
        have lately taken long enough for it to work meanwhile. Waking it for a call that
        returns at once (a scripted model, a quick tool) only makes the two threads trade the
        interpreter lock (each hand-over costs the agent a thread switch)."""
        avg = self._call_time.get(kind)
        return avg is None or avg >= WAKE_FOR_CALL_S

    def hand_over_backlog(self) -> None:
        """An agent that keeps running Python (a scripted or instant model: no wait for the
        writer to work in) flushes what the writer left it, now, between two of its steps
        (``BatchWriter.backlog_due``); an observer: a failure is logged."""
        due = getattr(self._store, "backlog_due", None)
        if due is None or not (len(self._tasks) >= TASK_BACKLOG or due()):
            return
        try:
            self._store.flush()
        except Exception:
            log.exception("could not hand the recording backlog over")

    def agent_busy(self) -> bool:
        """Whether an agent runs Python now: a run is in progress and no model or tool call of
        it waits, or a run ended a moment ago (``RUN_GAP_S``: runs in a loop, the next one
        starting). The store's writer leaves its work to the next wait then (``store_writer``)."""
        if self._waiting > 0:
            return False
        return bool(self._running) or time.monotonic() - self._last_end < RUN_GAP_S
