"""Eval plugin: evaluations of unsee defenses, and the scripted chat model.

- :mod:`.scripted` — :class:`ScriptedChatModel`, a deterministic chat model
  driven by a policy function (tests, demos, the AgentDojo agent), and
  :func:`call_id`.
- :mod:`.stand_in`, :mod:`.episode`, :mod:`.suites`, :mod:`.metrics`,
  :mod:`.forgetting` — ``unsee eval forgetting``: episodes and their suites,
  the documented scripted stand-in, the paper's metrics, the runner;
  :mod:`.window` (a view-only context window), :mod:`.endpoint` (an
  OpenAI-compatible endpoint as the model) and :mod:`.dojo_episodes` (the
  ``agentdojo`` suite).
- :mod:`.agentdojo_adapter`, :mod:`.bench`, :mod:`.cli` — AgentDojo suites
  through an unsee-recorded agent (need the ``eval`` extra: ``agentdojo``;
  imported on first use, so this face imports without it).
"""

from __future__ import annotations

from unsee.plugins import lazy_exports

__all__ = ["Policy", "ScriptedChatModel", "UnseeAgentElement", "UnseeFactory", "UnseeLike", "call_id",
           "generate", "make_app", "make_eval_app", "make_pipeline", "run_bench", "run_forgetting"]


#: imported on first use (the CLI mounts ``.cli`` without langchain; the AgentDojo names need the eval extra)
__getattr__ = lazy_exports(__name__, {**dict.fromkeys(("Policy", "ScriptedChatModel", "call_id"), ".scripted"),
                                      "make_app": ".cli", "make_eval_app": ".cli", "run_bench": ".bench",
                                      "run_forgetting": ".forgetting", "generate": ".suites",
                                      **dict.fromkeys(("UnseeAgentElement", "UnseeFactory", "UnseeLike",
                                                       "make_pipeline"), ".agentdojo_adapter")})
