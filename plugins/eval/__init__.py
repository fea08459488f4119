"""Eval plugin: evaluations of unsee defenses, and the scripted chat model.

- :mod:`.scripted` — :class:`ScriptedChatModel`, a deterministic chat model
  driven by a policy function (tests, demos, the AgentDojo agent), and
  :func:`call_id`.
- :mod:`.agentdojo_adapter`, :mod:`.bench`, :mod:`.cli` — AgentDojo suites
  through an unsee-recorded agent (need the ``eval`` extra: ``agentdojo``;
  imported on first use, so this face imports without it).
"""

from __future__ import annotations

from typing import Any

from .scripted import Policy, ScriptedChatModel, call_id

__all__ = ["Policy", "ScriptedChatModel", "UnseeAgentElement", "UnseeFactory", "UnseeLike", "call_id",
           "make_app", "make_pipeline", "run_bench"]


def __getattr__(name: str) -> Any:
    """The names that need the eval extra, imported on first use."""
    if name == "make_app":
        from .cli import make_app

        return make_app
    if name == "run_bench":
        from .bench import run_bench

        return run_bench
    if name in ("UnseeAgentElement", "UnseeFactory", "UnseeLike", "make_pipeline"):
        from . import agentdojo_adapter

        return getattr(agentdojo_adapter, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
