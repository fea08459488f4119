"""Smoke checks of a runtime's cache arithmetic, for a backend's first run on new hardware.

Each check drives a :class:`~.runtime.LocalRuntime` through its public API and returns a
:class:`Check` (name, verdict, figures): a prefill of several tokens equals the same tokens
one by one (the attention is causal), a crop followed by a prefill reproduces the logits of
the uncropped run (stale cache positions are neither read nor kept), chunked prefills agree,
and a crop costs the same at any context length. Logits are compared with a tolerance
relative to the reference's scale (:func:`logits_gap`); tokens only where the reference's
lead is clear, so an fp16 near-tie cannot flip a verdict.

``scripts/gpu_check.py`` runs them on the ExLlamaV2 backend on a GPU (and on the CPU
backend in its dry run); the tests run them on the CPU backend and on a deliberately
non-causal fake. :func:`build_random_model` makes the randomly initialised model of a
config that the first GPU run uses (the real weights are too large to travel with it).
Needs torch (and transformers for :func:`build_random_model`), nothing of the agent stack.
"""

from __future__ import annotations

import json
import math
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

#: Relative tolerance of a comparison within one backend (fp16 reordering noise is ~1e-3
#: of the logits' scale; a non-causal prefill is off by the order of the scale itself).
SAME_BACKEND_TOL = 1e-2
#: Relative tolerance between two implementations (different kernels, same fp16 weights).
CROSS_BACKEND_TOL = 3e-2
#: Files of a tokenizer folder copied next to a generated model.
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                   "chat_template.jinja", "generation_config.json")


@dataclass(frozen=True)
class LogitsGap:
    """How far ``other`` logits are from ``reference`` logits (same shape, 2-D)."""

    positions: int
    max_abs: float
    #: max |reference|: the scale the gap is measured against
    scale: float
    #: positions where the reference's top-1 leads its top-2 by more than the margin
    clear: int
    #: of those, positions where ``other`` picks a different token
    clear_disagree: int

    @property
    def rel(self) -> float:
        if self.scale > 0:
            return self.max_abs / self.scale
        return 0.0 if self.max_abs == 0 else math.inf

    def close(self, rel_tol: float) -> bool:
        return self.rel <= rel_tol and self.clear_disagree == 0

    def figures(self) -> dict[str, Any]:
        return {"positions": self.positions, "max_abs": round(self.max_abs, 6),
                "rel": round(self.rel, 6), "clear": self.clear, "clear_disagree": self.clear_disagree}


def clear_lead(logits: Any, margin: float | None = None) -> Any:
    """Per position (rows of 2-D ``logits``): does the best token lead the second by more than
    ``margin`` (default 5 % of the largest |logit|)? Elsewhere a near-tie may flip in fp16."""
    import torch

    rows = torch.as_tensor(logits).float()
    margin = 0.05 * float(rows.abs().max()) if margin is None else float(margin)
    if rows.shape[1] < 2:
        return torch.ones(rows.shape[0], dtype=torch.bool)
    top = rows.topk(2, dim=-1).values
    return (top[:, 0] - top[:, 1]) > margin


def logits_gap(reference: Any, other: Any, *, margin: float | None = None) -> LogitsGap:
    """Compare two ``(positions, vocab)`` logits tensors.

    ``margin``: the lead of the reference's best token over its second below which a
    position is a near-tie and its token is not compared; default 5 % of the scale.
    """
    import torch

    ref = torch.as_tensor(reference).float().cpu()
    oth = torch.as_tensor(other).float().cpu()
    if ref.dim() == 1:
        ref, oth = ref.reshape(1, -1), oth.reshape(1, -1)
    if ref.shape != oth.shape or ref.dim() != 2:
        raise ValueError(f"logits of different shapes: {tuple(ref.shape)} and {tuple(oth.shape)}")
    if ref.shape[0] == 0:
        raise ValueError("no positions to compare")
    if not (torch.isfinite(ref).all() and torch.isfinite(oth).all()):
        return LogitsGap(int(ref.shape[0]), math.inf, float(ref.abs().nan_to_num().max()), 0, 0)
    clear = clear_lead(ref, margin)
    disagree = clear & (ref.argmax(-1) != oth.argmax(-1))
    return LogitsGap(int(ref.shape[0]), float((ref - oth).abs().max()), float(ref.abs().max()),
                     int(clear.sum()), int(disagree.sum()))


@dataclass(frozen=True)
class Check:
    """One check's verdict: ``ok`` is None for a figure that has no pass mark."""

    name: str
    ok: bool | None
    figures: dict[str, Any] = field(default_factory=dict)
    note: str = ""


def _gap_check(name: str, reference: Any, other: Any, rel_tol: float, note: str = "") -> Check:
    gap = logits_gap(reference, other)
    return Check(name, gap.close(rel_tol), {**gap.figures(), "rel_tol": rel_tol}, note)


def check_causal_prefill(rt: Any, tokens: Sequence[int], *, rel_tol: float = SAME_BACKEND_TOL,
                         name: str = "causal prefill") -> Check:
    """A one-shot prefill's logits at every position equal the same tokens fed one by one.
    A prefill in which a token sees the tokens after it fails this (by the logits' scale)."""
    one_shot = rt.spawn().prefill_logits(tokens)
    step = rt.spawn()
    import torch

    by_token = torch.cat([step.prefill_logits([t]) for t in tokens])
    return _gap_check(name, by_token, one_shot, rel_tol)


def check_reference(name: str, reference: Any, rows: Any, *, rel_tol: float = CROSS_BACKEND_TOL,
                    note: str = "") -> Check:
    """``rows`` (a runtime's logits) against another implementation's on the same tokens."""
    return _gap_check(name, reference, rows, rel_tol, note)


def check_crop_then_prefill(rt: Any, tokens: Sequence[int], cuts: Sequence[int], *,
                            rel_tol: float = SAME_BACKEND_TOL) -> Check:
    """After a crop to ``cut``, other tokens written past it and a second crop, prefilling
    ``tokens[cut:]`` gives the logits of the uncropped run: what a crop drops is never read."""
    tokens = [int(t) for t in tokens]
    probe = rt.spawn()
    full = probe.prefill_logits(tokens)
    worst = None
    for cut in cuts:
        if not 0 < cut < len(tokens):
            raise ValueError(f"cut {cut} outside (0, {len(tokens)})")
        probe.crop(cut)
        probe.prefill([(t * 7 + 11) % max(2, max(tokens) + 1) for t in tokens[cut:]])  # other text
        probe.crop(cut)
        gap = logits_gap(full[cut:], probe.prefill_logits(tokens[cut:]))
        if worst is None or gap.rel > worst[1].rel or gap.clear_disagree > worst[1].clear_disagree:
            worst = (cut, gap)
    cut, gap = worst  # type: ignore[misc]
    return Check("crop then prefill", gap.close(rel_tol), {"cuts": list(cuts), "worst_cut": cut, **gap.figures(),
                                           "rel_tol": rel_tol})


def check_chunked_prefill(rt: Any, tokens: Sequence[int], chunk_sizes: Sequence[int], *,
                          rel_tol: float = SAME_BACKEND_TOL) -> Check:
    """Prefilling ``tokens`` in chunks of each size gives the logits of the first size's run."""
    import torch

    tokens = [int(t) for t in tokens]
    runs = []
    for size in chunk_sizes:
        probe = rt.spawn()
        runs.append(torch.cat([probe.prefill_logits(tokens[i:i + size])
                               for i in range(0, len(tokens), size)]))
    gaps = [logits_gap(runs[0], r) for r in runs[1:]]
    worst = max(gaps, key=lambda g: (g.clear_disagree, g.rel)) if gaps else logits_gap(runs[0], runs[0])
    return Check("chunked prefill", all(g.close(rel_tol) for g in gaps),
                 {"tokens": len(tokens), "chunk_sizes": list(chunk_sizes), **worst.figures(),
                  "rel_tol": rel_tol})


def check_crop_cost(rt: Any, n_fill: int, cuts: Sequence[int], *, max_seconds: float | None = 1e-3,
                    chunk: int = 2048, timer: Callable[[], float] = time.perf_counter) -> Check:
    """Fill the cache to ``n_fill`` tokens, then crop back to each of ``cuts`` (descending)
    and time each crop: O(1) means the same small cost whatever is dropped or kept.
    ``max_seconds`` None: the times are reported, not judged."""
    cuts = sorted(cuts, reverse=True)
    if not cuts or cuts[0] > n_fill or cuts[-1] < 1:
        raise ValueError(f"cuts {cuts} must lie in [1, {n_fill}]")
    probe = rt.spawn()
    fill = [1 + (i * 31) % 50 for i in range(n_fill)]  # the content does not matter to a crop
    for i in range(0, n_fill, chunk):
        probe.prefill(fill[i:i + chunk])
    times = {}
    length = n_fill
    for cut in cuts:
        t0 = timer()
        probe.crop(cut)
        times[f"{length}->{cut}"] = timer() - t0
        length = cut
    worst = max(times.values())
    ok = None if max_seconds is None else worst <= max_seconds
    return Check("crop cost", ok, {"filled": n_fill, **{k: f"{v * 1e6:.1f}us" for k, v in times.items()},
                                   "max_us": round(worst * 1e6, 1),
                                   **({} if max_seconds is None else {"limit_us": max_seconds * 1e6})})


def throughput(rt: Any, prompt: Sequence[int], n_decode: int, *, sync: Callable[[], None] | None = None,
               name: str = "throughput") -> Check:
    """Prefill and greedy-decode tokens per second of a fresh cache (``sync`` waits for the
    device before a clock is read); ``rt.draft_max`` (speculative decoding) is kept."""
    probe = rt.spawn()
    if hasattr(rt, "draft_max"):  # a spawn starts from the backend's default: keep the caller's
        probe.draft_max = rt.draft_max
    sync = sync or (lambda: None)
    t0 = time.perf_counter()
    probe.prefill(list(prompt))
    sync()
    t1 = time.perf_counter()
    out = probe.decode(n_decode, stop_token_ids=())
    sync()
    t2 = time.perf_counter()
    return Check(name, None, {"prefill_tokens": len(prompt), "prefill_tok_s": round(len(prompt) / (t1 - t0), 1),
                              "decoded": len(out.tokens), "decode_tok_s": round(len(out.tokens) / (t2 - t1), 1)})


def build_random_model(config: Path, out: Path, *, tokenizer_dir: Path | None = None, seed: int = 0,
                       overrides: dict[str, Any] | None = None) -> Path:
    """Write a randomly initialised fp16 model of ``config`` (a ``config.json``) to ``out``,
    with the tokenizer files of ``tokenizer_dir`` and the top-level ``rope_theta`` exllamav2
    reads. Same ``seed``, same weights. ``overrides`` change config fields (fewer layers for
    a quick CPU run). Written beside ``out`` and renamed into place."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from .convert import _patch_config

    out = Path(out)
    cfg_dict = json.loads(Path(config).read_text())
    cfg_dict.update(overrides or {})
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    (tmp / "config.json").write_text(json.dumps(cfg_dict))
    cfg = AutoConfig.from_pretrained(str(tmp))
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float16)
    model.save_pretrained(str(tmp), safe_serialization=True)
    for name in TOKENIZER_FILES:
        src = Path(tokenizer_dir or Path(config).parent) / name
        if src.is_file():
            shutil.copy2(src, tmp / name)
    _patch_config(tmp / "config.json")
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out


__all__ = [
    "CROSS_BACKEND_TOL", "Check", "LogitsGap", "SAME_BACKEND_TOL", "build_random_model", "clear_lead",
    "check_causal_prefill", "check_chunked_prefill", "check_crop_cost", "check_crop_then_prefill",
    "check_reference", "logits_gap", "throughput",
]
