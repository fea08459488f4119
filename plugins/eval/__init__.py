"""Eval plugin: evaluations of unsee defenses, and the scripted chat model.

- :mod:`.scripted` — :class:`ScriptedChatModel`, a deterministic chat model
  driven by a policy function (tests, demos, the AgentDojo agent), and
  :func:`call_id`.
- :mod:`.agentdojo_adapter`, :mod:`.bench`, :mod:`.cli` — AgentDojo suites
  through an unsee-recorded agent (need the ``eval`` extra: ``agentdojo``;
  imported on first use, so this face imports without it).
"""

from __future__ import annotations

from unsee.plugins import lazy_exports

from .scripted import Policy, ScriptedChatModel, call_id

__all__ = ["Policy", "ScriptedChatModel", "UnseeAgentElement", "UnseeFactory", "UnseeLike", "call_id",
           "make_app", "make_pipeline", "run_bench"]


#: the names that need the eval extra, imported on first use
__getattr__ = lazy_exports(__name__, {"make_app": ".cli", "run_bench": ".bench",
                                      **dict.fromkeys(("UnseeAgentElement", "UnseeFactory", "UnseeLike",
                                                       "make_pipeline"), ".agentdojo_adapter")})
