"""Crash injection for tests: ``crash_at("commit:state")`` makes the forget
(or erasure) raise ``InjectedCrash`` when it reaches that step. Steps are named
in ``STEPS``; production code calls ``point(name)`` at each. It lives in the
middleware so the forget and the erasure plugins share it without depending on
each other."""

from __future__ import annotations

import contextlib
import contextvars

from unsee.middleware.errors import InjectedCrash

STEPS = (
    "plan", "fork", "replay:turn", "replay:done", "commit:begin", "commit:state", "commit:store",
    "commit:records", "erase:", "erase:history:staged", "erase:history:swapping",
)
_armed: contextvars.ContextVar[str | None] = contextvars.ContextVar("unsee_crash_at", default=None)


def point(name: str) -> None:
    armed = _armed.get()
    if armed is not None and (armed == name or (armed.endswith(":") and name.startswith(armed))):
        raise InjectedCrash(f"injected crash at {name}")


fault_point = point  # the name the forget package face re-exports


@contextlib.contextmanager
def crash_at(step: str):
    token = _armed.set(step)
    try:
        yield
    finally:
        _armed.reset(token)
