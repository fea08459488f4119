"""Model plugin: the local-model runtime (KV cache with ``crop(offset)``).

Public API (imported lazily so ``import unsee.plugins.model`` stays cheap and
never touches torch or CUDA):

- :func:`load_runtime` (``.loader``) — ``"cpu" | "exllamav2" | "auto" | <folder>``
- :class:`LocalRuntime`, :class:`DecodeResult` (``.runtime``), :class:`SamplingParams` (``.sampling_params``)
- :class:`LocalChatModel` (``.chat_model``) — LangChain chat model with per-session caches
- :class:`ToolRouter` (``.routing``) — middleware deciding a small model's ``tool_choice``
- :func:`seed_for` (``.sampling``), :func:`ensure_converted` (``.convert``)
- :class:`ScriptedChatModel`, :data:`Policy`, :func:`call_id` (``.scripted``) — a deterministic
  chat model driven by a policy function (tests, demos, the evaluation harness)
- errors in ``.errors``
"""

from __future__ import annotations

from unsee.plugins import lazy_exports

_EXPORTS = {
    "load_runtime": ".loader",
    "LocalRuntime": ".runtime",
    "SamplingParams": ".sampling_params",
    "DecodeResult": ".runtime",
    "RuntimeCounters": ".runtime",
    "GREEDY": ".sampling_params",
    "LocalChatModel": ".chat_model",
    "ToolRouter": ".routing",
    "tool_call_id": ".chat_model",
    "SessionPool": ".sessions",
    "seed_for": ".sampling",
    "ensure_converted": ".convert",
    "default_cache_dir": ".convert",
    "model_dir": ".convert",
    "ScriptedChatModel": ".scripted",
    "Policy": ".scripted",
    "call_id": ".scripted",
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
