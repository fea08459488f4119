"""The smoke checks a GPU run relies on, on the CPU: each passes on a sound runtime and fails
on the fault it is there to find (a non-causal prefill, a crop that keeps what it dropped)."""

from __future__ import annotations

import math

import pytest
import torch

from unsee.plugins.model import smoke
from unsee.plugins.model.smoke import logits_gap

from tests.support.model_fakes import FakeRuntime


class NonCausalRuntime(FakeRuntime):
    """A prefill of several tokens lets each position see the whole chunk (the exllamav2
    SDPA fault): every row is the logits after the chunk's last token."""

    def spawn(self) -> "NonCausalRuntime":
        return NonCausalRuntime(self._tok, self._max)

    def _forward_all(self, tokens):
        last = self._forward(tokens, want_logits=True)
        return last.repeat(len(tokens), 1)


class StaleCropRuntime(FakeRuntime):
    """A crop that forgets to drop: later forwards still see the cropped tokens."""

    def spawn(self) -> "StaleCropRuntime":
        return StaleCropRuntime(self._tok, self._max)

    def _crop_cache(self, n_tokens: int) -> None:
        pass


TOKENS = [1 + (i * 7) % 60 for i in range(40)]


@pytest.mark.parametrize("ref, other, rel, clear, disagree", [
    ([[3.0, 1.0, 0.0]], [[3.0, 1.0, 0.0]], 0.0, 1, 0),
    ([[3.0, 1.0, 0.0]], [[2.97, 1.0, 0.0]], 0.01, 1, 0),
    # a near-tie is not compared as a token: the tokens may flip, the logits are close
    ([[1.0, 0.99, 0.0]], [[0.99, 1.0, 0.0]], 0.01, 0, 0),
    # a clear lead lost is a disagreement
    ([[3.0, 1.0, 0.0]], [[1.0, 3.0, 0.0]], 2 / 3, 1, 1),
])
def test_logits_gap_by_table(ref, other, rel, clear, disagree):
    gap = logits_gap(torch.tensor(ref), torch.tensor(other))
    assert gap.rel == pytest.approx(rel, abs=1e-6)
    assert (gap.clear, gap.clear_disagree) == (clear, disagree)
    assert gap.close(0.02) == (rel <= 0.02 and disagree == 0)


def test_logits_gap_refuses_mismatched_shapes_and_flags_non_finite():
    with pytest.raises(ValueError, match="different shapes"):
        logits_gap(torch.zeros(2, 3), torch.zeros(3, 3))
    with pytest.raises(ValueError, match="no positions"):
        logits_gap(torch.zeros(0, 3), torch.zeros(0, 3))
    gap = logits_gap(torch.ones(1, 3), torch.tensor([[1.0, math.nan, 1.0]]))
    assert not gap.close(1.0)


def test_the_checks_pass_on_a_sound_runtime():
    rt = FakeRuntime()
    assert smoke.check_causal_prefill(rt, TOKENS).ok
    assert smoke.check_crop_then_prefill(rt, TOKENS, [1, 13, 39]).ok
    assert smoke.check_chunked_prefill(rt, TOKENS, [40, 9, 1]).ok
    cost = smoke.check_crop_cost(rt, 64, [32, 8], max_seconds=None)
    assert cost.ok is None and set(cost.figures) >= {"64->32", "32->8", "max_us"}


def test_the_causal_check_finds_a_non_causal_prefill():
    check = smoke.check_causal_prefill(NonCausalRuntime(), TOKENS)
    assert check.ok is False and check.figures["rel"] > 0.1


def test_the_crop_check_finds_a_crop_that_keeps_what_it_dropped():
    assert smoke.check_crop_then_prefill(StaleCropRuntime(), TOKENS, [13]).ok is False
    with pytest.raises(ValueError):
        smoke.check_crop_then_prefill(FakeRuntime(), TOKENS, [0])


def test_crop_cost_is_judged_by_its_limit():
    ticks = iter([0.0, 0.5, 1.0, 1.0001])
    check = smoke.check_crop_cost(FakeRuntime(), 32, [16, 4], max_seconds=1e-3, timer=lambda: next(ticks))
    assert check.ok is False and check.figures["max_us"] == pytest.approx(5e5)
    with pytest.raises(ValueError):
        smoke.check_crop_cost(FakeRuntime(), 32, [64])


def test_prefill_logits_keeps_the_bookkeeping_of_prefill():
    a, b = FakeRuntime(), FakeRuntime()
    rows = a.prefill_logits(TOKENS)
    b.prefill(TOKENS)
    assert rows.shape == (len(TOKENS), 64) and a.tokens == b.tokens
    assert a.counters.prefilled == b.counters.prefilled == len(TOKENS)
    assert a.decode(5, stop_token_ids=()).tokens == b.decode(5, stop_token_ids=()).tokens
    with pytest.raises(ValueError):
        a.prefill_logits([])


@pytest.mark.model
def test_the_checks_on_a_random_model_of_smollm2s_config(model_home, cpu_runtime, tmp_path):
    """What step a of the GPU check runs, on the CPU backend and a 2-layer random model."""
    from unsee.plugins.model import load_runtime

    folder = smoke.build_random_model(cpu_runtime.folder / "config.json", tmp_path / "random",
                                      overrides={"num_hidden_layers": 2})
    again = smoke.build_random_model(cpu_runtime.folder / "config.json", tmp_path / "again",
                                     overrides={"num_hidden_layers": 2})
    assert (folder / "model.safetensors").read_bytes() == (again / "model.safetensors").read_bytes()
    import json

    cfg = json.loads((folder / "config.json").read_text())
    assert cfg["rope_theta"] == 100000.0 and cfg["num_hidden_layers"] == 2
    rt = load_runtime(str(folder), backend="cpu")
    tokens = list(range(1000, 1048))
    for check in (smoke.check_causal_prefill(rt, tokens), smoke.check_crop_then_prefill(rt, tokens, [1, 20]),
                  smoke.check_chunked_prefill(rt, tokens, [48, 16, 5])):
        assert check.ok, check
    # the random model is not the real one: it differs from SmolLM2's logits
    real = cpu_runtime.spawn().prefill_logits(tokens[:8])
    assert not logits_gap(real, rt.spawn().prefill_logits(tokens[:8])).close(0.5)
