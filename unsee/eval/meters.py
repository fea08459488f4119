"""Recomputed tokens of a forget, as ``unsee eval forgetting`` counts them.

:class:`TokenMeter` accounts a scripted model's calls the way a prefix KV cache
would spend them: per call, *decode* = the answer's tokens, *prefill* = the
tokens of the prompt's messages past the longest message prefix shared with a
prompt already seen. :class:`UsageMeter` sums what a model that reports usage
(an OpenAI-compatible endpoint) says it spent.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any


class TokenMeter:
    """A prefix-cache account of a scripted model's calls (module docstring)."""

    def __init__(self, count: Callable[[str], int]):
        self.count = count
        self.seen: list[tuple[str, ...]] = []
        self.prefill = self.decode = 0
        self.active = False

    def call(self, prompt: Sequence[str], answer: str) -> None:
        prompt = tuple(prompt)
        shared = max((_common(prompt, p) for p in self.seen), default=0)
        self.seen.append(prompt)
        if self.active:
            self.prefill += sum(self.count(t) for t in prompt[shared:])
            self.decode += self.count(answer)

    def start(self, reset: bool) -> None:
        if reset:
            self.seen.clear()
        self.prefill = self.decode = 0
        self.active = True


def _common(a: tuple[str, ...], b: tuple[str, ...]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


class UsageMeter:
    """Recomputed tokens of a model that reports usage (an OpenAI-compatible endpoint): a LangChain
    callback summing ``usage_metadata`` while active. *prefill* is the prompt tokens sent (an
    endpoint without a prefix cache recomputes them all), *decode* the completion tokens."""

    def __init__(self) -> None:
        from langchain_core.callbacks import BaseCallbackHandler

        meter = self

        class _Handler(BaseCallbackHandler):
            def on_llm_end(self, response, **kwargs: Any) -> None:
                if not meter.active:
                    return
                for gens in response.generations:
                    for g in gens:
                        usage = getattr(getattr(g, "message", None), "usage_metadata", None) or {}
                        meter.prefill += int(usage.get("input_tokens", 0))
                        meter.decode += int(usage.get("output_tokens", 0))

        self.handler = _Handler()
        self.prefill = self.decode = 0
        self.active = False
