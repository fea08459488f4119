"""Per-session caches over one set of weights, with LRU eviction.

One process holds several agent sessions (LangGraph threads). Each session owns
a runtime spawned from a shared one (same weights, its own KV cache). When the
cached tokens of all sessions exceed ``token_budget``, the least recently used
idle sessions are evicted (their cache is dropped); the next call on an
evicted session rebuilds the cache by prefill, so eviction costs compute, never
correctness.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Iterator

from .errors import CacheRangeError
from .runtime import LocalRuntime

log = logging.getLogger(__name__)


@dataclass
class SessionState:
    runtime: LocalRuntime
    lock: threading.RLock = field(default_factory=threading.RLock)
    evictions: int = 0
    calls: int = 0


class SessionPool:
    """Session id → runtime with its own cache; LRU eviction under a token budget."""

    def __init__(self, runtime: LocalRuntime, token_budget: int | None = None) -> None:
        self.template = runtime
        self.token_budget = token_budget
        self._sessions: "OrderedDict[str, SessionState]" = OrderedDict()
        self._lock = threading.RLock()
        self.evictions = 0

    def _state(self, session: str) -> SessionState:
        with self._lock:
            state = self._sessions.get(session)
            if state is None:
                state = SessionState(self.template.spawn())
                self._sessions[session] = state
            self._sessions.move_to_end(session)
            return state

    def runtime(self, session: str) -> LocalRuntime:
        """The runtime (cache) of ``session``, created empty on first use."""
        return self._state(session).runtime

    def peek(self, session: str) -> LocalRuntime | None:
        """The runtime of ``session`` if it has one (no session made, the LRU order unchanged)."""
        with self._lock:
            state = self._sessions.get(session)
            return None if state is None else state.runtime

    @contextlib.contextmanager
    def use(self, session: str) -> Iterator[LocalRuntime]:
        """Hold ``session`` exclusively for one call; enforce the budget after."""
        state = self._state(session)
        with state.lock:
            state.calls += 1
            yield state.runtime
        self.enforce_budget(active=session)

    @property
    def sessions(self) -> tuple[str, ...]:
        with self._lock:
            return tuple(self._sessions)

    def cached_tokens(self) -> int:
        with self._lock:
            return sum(s.runtime.length for s in self._sessions.values())

    def enforce_budget(self, active: str | None = None) -> list[str]:
        """Evict least recently used idle sessions until within the budget."""
        if self.token_budget is None:
            return []
        evicted: list[str] = []
        with self._lock:
            total = self.cached_tokens()
            for name, state in list(self._sessions.items()):
                if total <= self.token_budget:
                    break
                if name == active or state.runtime.length == 0:
                    continue
                if not state.lock.acquire(blocking=False):
                    continue  # in use by another thread: not idle
                try:
                    total -= state.runtime.length
                    state.runtime.reset()
                    state.evictions += 1
                    self.evictions += 1
                    evicted.append(name)
                finally:
                    state.lock.release()
        if evicted:
            log.debug("evicted sessions %s (budget %s)", evicted, self.token_budget)
        return evicted

    def evict(self, session: str) -> None:
        """Drop ``session``'s cache now (its counters are kept)."""
        with self._lock:
            state = self._sessions.get(session)
        if state is not None:
            with state.lock:
                state.runtime.reset()
                state.evictions += 1
                self.evictions += 1

    def restore(self, session: str, offset: int) -> int:
        """Crop ``session``'s cache to ``offset`` (restore a checkpoint).

        Returns the cache length after. An evicted (empty) cache stays empty:
        the next call rebuilds it by prefill. An offset past the cached length
        of a live cache raises :class:`CacheRangeError`.
        """
        state = self._state(session)
        with state.lock:
            rt = state.runtime
            if rt.length == 0 and state.evictions:
                return 0
            if offset > rt.length:
                raise CacheRangeError(offset, rt.length, what="restore")
            rt.crop(offset)
            return rt.length

    def drop(self, session: str) -> None:
        """Forget ``session`` entirely (cache and counters)."""
        with self._lock:
            state = self._sessions.pop(session, None)
        if state is not None:
            state.runtime.reset()

    def counters(self, session: str) -> dict[str, int]:
        with self._lock:
            state = self._sessions.get(session)
        if state is None:
            return {"prefilled": 0, "decoded": 0, "reused": 0, "cropped": 0, "crops": 0, "scored": 0,
                    "length": 0, "evictions": 0, "calls": 0}
        out = state.runtime.counters.as_dict()
        out.update(length=state.runtime.length, evictions=state.evictions, calls=state.calls)
        return out


__all__ = ["SessionPool", "SessionState"]
