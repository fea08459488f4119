"""The evaluation harness (``unsee eval`` / ``unsee bench``): it sits above the facade.

It drives an :class:`unsee.core.Unsee` (made by the factory it is given:
the CLI passes one, a caller may pass the ``Unsee`` class) and reaches the
plugins only through their package faces (``unsee.plugins.<name>``). Nothing
below the facade imports it. The scripted chat model it drives episodes with
is the model plugin's (``unsee.plugins.model.ScriptedChatModel``).

- :mod:`.stand_in`, :mod:`.episode`, :mod:`.suites`, :mod:`.metrics`,
  :mod:`.forgetting` — ``unsee eval forgetting``: episodes and their suites,
  the documented scripted stand-in, the metrics of "Forgetting Without
  Restarting: Execution-State Unlearning for Stateful LLM Agents", the runner;
  :mod:`.window` (a view-only context window), :mod:`.endpoint` (an
  OpenAI-compatible endpoint as the model) and :mod:`.dojo_episodes` (the
  ``agentdojo`` suite).
- :mod:`.detector_eval` — ``unsee eval detectors``, on AgentDojo's outputs,
  the hand-written hard cases (:mod:`.hard_cases`, read from ``hard_cases.jsonl``)
  and the held-out sets (:mod:`.heldout`); :mod:`.peers` puts other projects'
  detectors (toolwall-guard's rules) behind the detector interface.
- :mod:`.agentdojo_adapter`, :mod:`.bench`, :mod:`.cli` — AgentDojo suites
  through an unsee-recorded agent (need the ``eval`` extra: ``agentdojo``;
  imported on first use, so this package imports without it, and without langchain);
  :mod:`.dojo_compensators` (compensators acting on AgentDojo's environments) and
  :mod:`.dojo_reconcile` (late verdicts' forgets reconciled, the environment judged
  before and after).
"""

from __future__ import annotations

from unsee.plugins import lazy_exports

_EXPORTS = {
    "make_app": ".cli",
    "make_eval_app": ".cli",
    "run_bench": ".bench",
    "run_forgetting": ".forgetting",
    "generate": ".suites",
    "UnseeAgentElement": ".agentdojo_adapter",
    "UnseeFactory": ".agentdojo_adapter",
    "make_pipeline": ".agentdojo_adapter",
}

__all__ = sorted(_EXPORTS)

#: imported on first use (the CLI mounts ``.cli`` without langchain; the AgentDojo names need the eval extra)
__getattr__ = lazy_exports(__name__, _EXPORTS)
