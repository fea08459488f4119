"""Fault injection for tests: ``crash_at("commit:state")`` makes the forget
(or erasure) raise ``InjectedCrash`` when it reaches that step (the process
dying there: nothing after it runs, a retry must finish or undo it);
``fail_at("commit:state")`` raises an ordinary service failure there instead
(``InjectedFailure``, a ``ConnectionError``: the process goes on and must
answer for it). Steps are named in ``STEPS``; production code calls
``point(name)`` at each. It lives in the middleware so the forget and the
erasure plugins share it without depending on each other."""

from __future__ import annotations

import contextlib
import contextvars

from unsee.middleware.errors import InjectedCrash

STEPS = (
    "plan", "check", "fork", "replay:turn", "replay:done", "commit:checked", "commit:begin", "commit:state",
    "commit:store", "commit:records", "erase:", "erase:history:staged", "erase:history:swapping",
    "reconcile:planned", "reconcile:recorded",
)
_armed: contextvars.ContextVar[tuple[str, bool] | None] = contextvars.ContextVar("unsee_crash_at", default=None)


class InjectedFailure(ConnectionError):
    """A service failing at a step (``fail_at``): an ordinary error the caller must handle."""


def point(name: str) -> None:
    armed = _armed.get()
    if armed is None:
        return
    step, crash = armed
    if step == name or (step.endswith(":") and name.startswith(step)):
        if crash:
            raise InjectedCrash(f"injected crash at {name}")
        raise InjectedFailure(f"injected failure at {name}")


fault_point = point  # the name the forget package face re-exports


@contextlib.contextmanager
def crash_at(step: str):
    token = _armed.set((step, True))
    try:
        yield
    finally:
        _armed.reset(token)


@contextlib.contextmanager
def fail_at(step: str):
    token = _armed.set((step, False))
    try:
        yield
    finally:
        _armed.reset(token)
