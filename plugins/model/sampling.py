"""Reproducible token selection shared by every backend.

Each transition's sampler is seeded from ``(session, step)`` with a stable hash
(SHA-256, never Python's salted ``hash()``), and owns its ``torch.Generator``:
replaying a transition with the same cache contents reproduces its sampled
tokens exactly, independent of any other randomness in the process.

Selection is an inverse-CDF draw over the probabilities sorted in
decreasing order: one uniform number per step from the generator. The generator lives on the CPU so a CUDA backend draws the same
numbers.
"""

from __future__ import annotations

import hashlib
from typing import Any

import torch

from .sampling_params import SamplingParams

_SEED_MASK = (1 << 63) - 1


def seed_for(session: str, step: int | str) -> int:
    """Stable 63-bit seed of a transition: SHA-256 of ``session`` and ``step``."""
    digest = hashlib.sha256(f"unsee-seed\x00{session}\x00{step}".encode()).digest()
    return int.from_bytes(digest[:8], "big") & _SEED_MASK


def make_generator(seed: int) -> torch.Generator:
    """A fresh CPU ``torch.Generator`` seeded with ``seed``."""
    gen = torch.Generator(device="cpu")
    gen.manual_seed(int(seed) & _SEED_MASK)
    return gen


def pick_token(
    logits: Any, params: SamplingParams, generator: torch.Generator | None
) -> int:
    """Choose the next token from a 1-D logits row.

    Greedy (``temperature <= 0``) is the argmax (lowest id on ties). Otherwise
    temperature, top-k and top-p are applied and one uniform draw from
    ``generator`` selects the token.
    """
    row = logits.detach().float().reshape(-1)
    if params.greedy:
        return int(torch.argmax(row).item())
    if generator is None:
        raise ValueError("sampling needs a generator (seed)")
    row = row.cpu() / float(params.temperature)
    probs = torch.softmax(row, dim=-1)
    probs, order = torch.sort(probs, descending=True, stable=True)
    if params.top_k and params.top_k > 0:
        probs = probs[: params.top_k]
        order = order[: params.top_k]
    if params.top_p < 1.0:
        cum = torch.cumsum(probs, dim=-1)
        keep = int(torch.searchsorted(cum, torch.tensor(params.top_p)).item()) + 1
        probs = probs[:keep]
        order = order[:keep]
    # Masked (-inf) logits have zero probability: drop them so a draw can
    # never land on a token the grammar forbade.
    nonzero = int((probs > 0).sum().item())
    probs, order = probs[: max(nonzero, 1)], order[: max(nonzero, 1)]
    cum = torch.cumsum(probs, dim=-1)
    u = torch.rand((), generator=generator).item() * float(cum[-1].item())
    idx = int(torch.searchsorted(cum, torch.tensor(u), right=True).item())
    return int(order[min(idx, len(order) - 1)].item())


__all__ = ["make_generator", "pick_token", "seed_for"]
