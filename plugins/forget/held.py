"""The session leases one revocation holds, from its first step to its record.

A forget takes its session's lease (``Runs.exclusive``: no run of the agent, in
this process or another, interleaves) and keeps it through the erasure and the
record that follow, so no run slips in between the commit and the erasure.
The erasure asks for the same lease itself; a lease is not re-entrant (two
forgets of one session in one process must not interleave either), so the
erasure is handed a view of the runs in which the sessions this revocation
already holds are taken at once.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any


class HeldSessions:
    """The leases of one revocation, kept until ``stack`` closes."""

    def __init__(self, runs: Any, stack: contextlib.ExitStack):
        self._runs = runs
        self._stack = stack
        self._held: set[str] = set()

    def hold(self, session: str, wait: bool = True) -> None:
        """Take ``session``'s lease (waiting for its runs, or ``SessionBusy``) until the revocation ends."""
        if session not in self._held:
            self._stack.enter_context(self._runs.exclusive(session, wait=wait))
            self._held.add(session)

    def runs_view(self, runs: Any) -> Any:
        """``runs`` (the erasure's) with the sessions held here taken at once."""
        return _HeldView(runs, frozenset(self._held)) if runs is not None else None


class _HeldView:
    """A ``Runs`` whose ``exclusive`` of a session already held is the hold itself."""

    def __init__(self, runs: Any, held: frozenset[str]):
        self._runs = runs
        self._held = held

    @contextlib.contextmanager
    def exclusive(self, session_id: str, wait: bool = True) -> Iterator[None]:
        if session_id in self._held:
            yield
            return
        with self._runs.exclusive(session_id, wait=wait):
            yield

    def __getattr__(self, name: str) -> Any:  # (everything else is the runs' own)
        return getattr(self._runs, name)
