"""Tools plugin: LangChain tools over the sandbox and the call ledger.

The glue between the recording core (which only reads a tool's declared
effect) and the sandbox (environments, the call ledger):

- :mod:`.effects` — :func:`unsee_tool`, :func:`declare_effect`,
  :func:`sandbox_command_tool`: tools that declare their effect
  (``read`` / ``write`` / ``external``) and route calls through a
  :class:`~unsee.sandbox.Ledger`.
- :mod:`.environments` — :class:`SessionEnvironments`, one sandbox
  environment per session, snapshotted at checkpoints, shadowed for replays.

:func:`effect_of` and :data:`EFFECT_KEY` are the recording core's
(:mod:`unsee.middleware.tools`), re-exported here for convenience.
"""

from __future__ import annotations

from unsee.middleware.tools import EFFECT_KEY, effect_of
from unsee.sandbox import EFFECTS, Effect

from .effects import current_session_id, declare_effect, sandbox_command_tool, unsee_tool
from .environments import SessionEnvironments

__all__ = [
    "EFFECTS", "EFFECT_KEY", "Effect", "SessionEnvironments", "current_session_id", "declare_effect",
    "effect_of", "sandbox_command_tool", "unsee_tool",
]
