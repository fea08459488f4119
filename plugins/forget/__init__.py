"""Forget plugin: the revocation event and the forget operator (B0–B9).

The path of a revocation event, one module a step:
event (``event``) -> graph query and plan (``plan``) -> fork and restore,
sanitized replay (``replay``, deciding call by call in ``decide`` through the
``interceptor``) -> atomic commit (``commit``) -> report (``report``); the
editing baselines live in ``baselines``, crash injection in ``faults``, what
the operator needs from its surroundings in ``ports``.

Public names are imported lazily, so ``import unsee.plugins.forget`` stays
cheap (no LangChain import until a name is used). Other plugins use only
these names, never the modules.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "RevocationEvent": ".event",
    "sanitize": ".event",
    "ForgetReport": ".report",
    "ForgetPlan": ".report",
    "SideEffect": ".report",
    "STRATEGIES": ".report",
    "Forgetter": ".operator",
    "is_scratch_thread": ".replay",
    "scratch_thread": ".replay",
    "AgentUnknown": ".errors",
    "UnknownStrategy": ".errors",
    "InjectedCrash": ".errors",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
