"""The CPU backend on the real SmolLM2 model: crop determinism and seeding."""

from __future__ import annotations


import pytest

from unsee.plugins.model.runtime import SamplingParams
from unsee.plugins.model.sampling import seed_for

pytestmark = pytest.mark.model

N_NEW = 14


def _prompt(rt):
    return rt.apply_chat_template(
        [{"role": "user", "content": "The account number is 4417-2231. Tell me a short story about a cat."}]
    )


@pytest.fixture(scope="module")
def reference(cpu_runtime):
    fresh = cpu_runtime.spawn()
    prompt = _prompt(fresh)
    fresh.prefill(prompt)
    out = fresh.decode(N_NEW, stop_token_ids=())
    assert len(out.tokens) == N_NEW
    return prompt, out.tokens


@pytest.mark.parametrize("repeat", range(3))
def test_crop_then_decode_equals_fresh_run(cpu_runtime, reference, repeat):
    prompt, ref = reference
    n = len(prompt)
    rt = cpu_runtime.spawn()
    rt.prefill(prompt)
    rt.decode(N_NEW, stop_token_ids=())
    assert rt.tokens == tuple(prompt) + tuple(ref)
    # crop points: inside the prompt, at its end, and twice mid-generation
    for cut in (n + 10, n + 3, n, n - 5):
        rt.crop(cut)
        assert rt.length == cut
        if cut < n:
            rt.prefill(prompt[cut:])
        done = max(0, cut - n)
        out = rt.decode(N_NEW - done, stop_token_ids=())
        assert out.tokens == ref[done:], f"diverged after crop to {cut}"


def test_seeded_sampling_is_reproducible(cpu_runtime, reference):
    prompt, _ = reference
    params = SamplingParams(temperature=0.9, top_p=0.95)

    def sample(step):
        rt = cpu_runtime.spawn()
        rt.prefill(prompt)
        return rt.decode(12, sampling=params, seed=seed_for("sess", step), stop_token_ids=()).tokens

    a, b, c = sample(3), sample(3), sample(4)
    assert a == b
    assert a != c
    # replaying a transition after a crop reproduces it too
    rt = cpu_runtime.spawn()
    rt.prefill(prompt)
    rt.decode(12, sampling=params, seed=seed_for("sess", 4), stop_token_ids=())
    rt.crop(len(prompt))
    assert rt.decode(12, sampling=params, seed=seed_for("sess", 3), stop_token_ids=()).tokens == a


def test_crop_keeps_the_prefix_and_frees_the_rest(cpu_runtime):
    """Crop cost is measured by benchmarks/bench_model.py (flat from 256 to 8k tokens), not timed here:
    a wall-clock bound fails on a busy machine. Here: what crop keeps and drops."""
    rt = cpu_runtime.spawn()
    rt.prefill(list(range(100, 1124)))  # 1k tokens
    tokens = list(range(100, 1124))
    for cut in (1000, 900, 500, 10):
        rt.crop(cut)
        assert rt.length == cut and list(rt.tokens) == tokens[:cut]


def test_counters_and_tokenizer(cpu_runtime):
    rt = cpu_runtime.spawn()
    ids = rt.tokenize("hello world")
    assert rt.detokenize(ids) == "hello world" and rt.count_tokens("hello world") == len(ids)
    assert rt.eos_token_ids == (rt.tokenizer.convert_tokens_to_ids("<|im_end|>"),)
    prompt = _prompt(rt)
    rt.prefill(prompt)
    rt.decode(3, stop_token_ids=())
    assert rt.counters.prefilled == len(prompt) and rt.counters.decoded == 3
    assert rt.max_context == 8192


def test_chat_template_with_tools(cpu_runtime):
    from unsee.plugins.model.grammar import ToolSpec

    tool = ToolSpec("add", "Add", {"type": "object", "properties": {"a": {"type": "integer"}}}).as_openai()
    text = cpu_runtime.render_chat([{"role": "user", "content": "hi"}], tools=[tool])
    assert text.startswith("<|im_start|>system\n") and "\nadd(a: integer): Add\n" in text
    assert text.endswith("<|im_start|>assistant\n")
    plain = cpu_runtime.render_chat([{"role": "user", "content": "hi"}])
    assert "You can call these tools" not in plain


# -- the fast decode path (transposed/prepacked weights, growing cache, drafts) ----

@pytest.fixture(scope="module")
def legacy_runtime(cpu_runtime):
    """The previous decode path on the same folder (its own copy of the weights)."""
    from unsee.plugins.model.cpu_backend import TorchRuntime

    return TorchRuntime(cpu_runtime.folder, fast=False)


def _needs_fast(rt):
    if not rt.fast:
        pytest.skip("UNSEE_CPU_DECODE=legacy: the fast path is off")


PROMPTS = [
    [{"role": "user", "content": "The account number is 4417-2231. Tell me a short story about a cat."}],
    [{"role": "system", "content": "You are support. Answer in one short sentence."},
     {"role": "user", "content": "Hi, I'm Dana. Please look up ticket T-1001: my blender arrived broken."}],
    [{"role": "user", "content": "Repeat after me: the quick brown fox jumps over the lazy dog. "
                                 "The quick brown fox jumps over the lazy dog."}],
]


def test_fast_path_decodes_the_tokens_of_the_legacy_path(cpu_runtime, legacy_runtime):
    """Greedy tokens are those of the previous path: fresh prompts, a second turn
    appended to a cache (several tokens after a cached prefix), and a reply decoded
    again after a crop (drafted from what the crop dropped)."""
    _needs_fast(cpu_runtime)
    for messages in PROMPTS:
        got = {}
        for name, base in (("fast", cpu_runtime), ("legacy", legacy_runtime)):
            rt = base.spawn()
            prompt = rt.apply_chat_template(messages)
            rt.sync(prompt)
            first = rt.decode(24, stop_token_ids=())
            follow = rt.apply_chat_template(messages + [
                {"role": "assistant", "content": rt.detokenize(first.tokens)},
                {"role": "user", "content": "Thanks. Say it again in other words."}])
            rt.sync(follow)
            second = rt.decode(16, stop_token_ids=())
            rt.crop(len(prompt))
            again = rt.decode(24, stop_token_ids=())
            got[name] = (first.tokens, second.tokens, again.tokens)
            assert again.tokens == first.tokens
        assert got["fast"] == got["legacy"], messages


def test_fast_path_layout_and_growing_cache(cpu_runtime):
    _needs_fast(cpu_runtime)
    from transformers.cache_utils import DynamicLayer

    from unsee.plugins.model.cpu_backend import ATTENTION, DRAFT_MAX

    model = cpu_runtime.model
    assert model.config._attn_implementation == ATTENTION
    assert type(model.lm_head).__name__ == "FastLinear" and model.lm_head.weight_t is not None
    mlp, attn = model.model.layers[0].mlp, model.model.layers[0].self_attn
    assert type(mlp.gate_up_proj).__name__ == "FastLinear" and type(attn.qkv_proj).__name__ == "FastLinear"
    assert type(mlp.up_proj).__name__ == "Part" and type(model.model.layers[0].self_attn.o_proj).__name__ == "FastLinear"
    assert cpu_runtime.draft_max == DRAFT_MAX
    rt = cpu_runtime.spawn()
    rt.prefill(list(range(100, 400)))
    layer = rt._cache.layers[0]
    assert isinstance(layer, DynamicLayer) and type(layer).__name__ == "GrowingLayer"
    buf = layer._k
    assert buf.shape[-2] >= 300 and layer.keys.shape[-2] == 300
    assert layer._k[..., 120:300, :].abs().sum() > 0
    rt.crop(120)
    assert layer.keys.shape[-2] == 120 and layer._k is buf  # a crop moves the end, copies nothing
    # ... and zeroes what it dropped (a forget's crop drops what a secret left in the cache)
    assert not layer._k[..., 120:300, :].any() and not layer._v[..., 120:300, :].any()
    assert layer._k[..., :120, :].abs().sum() > 0
    rt.prefill(list(range(500, 520)))
    assert layer.keys.shape[-2] == 140 and layer._k is buf


def test_appended_attention_matches_transformers_sdpa(cpu_runtime):
    """Several tokens after a cached prefix (a draft, a prompt after a reused
    prefix): the fast path's attention gives transformers' SDPA results."""
    _needs_fast(cpu_runtime)
    import torch

    from unsee.plugins.model.cpu_backend import ATTENTION

    ids = cpu_runtime.tokenize("Dana asked the support agent about ticket T-1001 and her refund. " * 30)[:400]
    model = cpu_runtime.model
    rows = {}
    try:
        for impl in ("sdpa", ATTENTION):
            model.set_attn_implementation(impl)
            for past, n in ((390, 9), (100, 300)):
                rt = cpu_runtime.spawn()
                rt.prefill(ids[:past])
                rows[(impl, past)] = rt._forward_rows(ids[past:past + n], min(n, 17))
    finally:
        model.set_attn_implementation(ATTENTION)
    for past in (390, 100):
        a, b = rows[("sdpa", past)], rows[(ATTENTION, past)]
        assert float((a - b).abs().max()) < 1e-3
        assert torch.equal(a.argmax(-1), b.argmax(-1))


def test_legacy_path_is_selectable(legacy_runtime, monkeypatch):
    from torch import nn
    from transformers.cache_utils import DynamicLayer

    from unsee.plugins.model.cpu_backend import fast_by_default

    assert not legacy_runtime.fast and legacy_runtime.draft_max == 0
    assert isinstance(legacy_runtime.model.lm_head, nn.Linear)
    rt = legacy_runtime.spawn()
    rt.prefill([100, 101, 102])
    assert type(rt._cache.layers[0]) is DynamicLayer
    monkeypatch.setenv("UNSEE_CPU_DECODE", "legacy")
    assert not fast_by_default()
    monkeypatch.setenv("UNSEE_CPU_DECODE", "fast")
    assert fast_by_default()
