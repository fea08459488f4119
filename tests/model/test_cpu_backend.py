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
