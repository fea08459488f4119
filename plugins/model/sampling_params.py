"""How to pick the next token: the parameters the runtime takes and the sampler applies.

Its own module (no torch) so that :mod:`.runtime` (the interface) and
:mod:`.sampling` (the torch code) both use it without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["GREEDY", "SamplingParams"]


@dataclass(frozen=True)
class SamplingParams:
    """How to pick the next token. ``temperature == 0`` is greedy (argmax)."""

    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0.0


GREEDY = SamplingParams()
