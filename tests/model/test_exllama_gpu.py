"""ExLlamaV2 backend on CUDA: the CPU determinism tests, mirrored, on the real weights.

Skipped without CUDA (``bash scripts/gpu-check.sh b`` runs them on a lent machine, with the
wheels it carries). Logits are compared with a tolerance and tokens only where the lead is
clear (:mod:`unsee.plugins.model.smoke`): a re-prefill in other chunk sizes may flip an fp16
near-tie. Only the tool-call test needs langchain, imported there.
"""

from __future__ import annotations

import pytest
import torch

from unsee.plugins.model import smoke
from unsee.plugins.model.runtime import SamplingParams
from unsee.plugins.model.sampling import seed_for

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
]

N_NEW = 24


@pytest.fixture(scope="module")
def gpu_runtime(model_home):
    from unsee.plugins.model import load_runtime

    return load_runtime("exllamav2", cache_dir=model_home)


def _prompt(rt):
    return rt.apply_chat_template(
        [{"role": "user", "content": "The account number is 4417-2231. Tell me a short story about a cat."}]
    )


@pytest.fixture(scope="module")
def reference(gpu_runtime):
    rt = gpu_runtime.spawn()
    prompt = _prompt(rt)
    rt.prefill(prompt)
    return prompt, rt.decode(N_NEW, stop_token_ids=()).tokens


def test_backend_is_exllamav2_and_rope_theta(gpu_runtime):
    assert gpu_runtime.backend == "exllamav2"
    assert gpu_runtime._shared.config.rotary_embedding_base == 100000.0


def test_answers_a_context_question(gpu_runtime):
    rt = gpu_runtime.spawn()
    rt.prefill(rt.apply_chat_template([
        {"role": "user", "content": "The account number is 4417-2231. What is the account number?"}
    ]))
    assert "4417" in rt.decode(24).text


def test_one_shot_prefill_equals_token_by_token(gpu_runtime, reference):
    """Causal prefill: exllamav2's SDPA path without flash-attn is not (the backend avoids it)."""
    prompt, _ = reference
    check = smoke.check_causal_prefill(gpu_runtime, prompt)
    assert check.ok, check


@pytest.mark.parametrize("repeat", range(3))
def test_crop_then_prefill_reproduces_the_logits(gpu_runtime, reference, repeat):
    prompt, ref = reference
    tokens = list(prompt) + list(ref)
    n = len(prompt)
    check = smoke.check_crop_then_prefill(gpu_runtime, tokens, [n + 16, n + 5, n, n - 6])
    assert check.ok, check


def test_crop_then_decode_equals_fresh_run_where_clear(gpu_runtime, reference):
    """Greedy tokens after a crop equal the fresh run's, compared only while every step's lead
    is clear (a near-tie may flip in fp16; the logits check above covers the rest)."""
    prompt, ref = reference
    n = len(prompt)
    fresh = gpu_runtime.spawn()
    rows = fresh.prefill_logits(list(prompt) + list(ref))[n - 1:-1]
    clear = int(smoke.clear_lead(rows).long().cumprod(0).sum())
    rt = gpu_runtime.spawn()
    rt.prefill(prompt)
    rt.decode(N_NEW, stop_token_ids=())
    rt.crop(n - 6)
    rt.prefill(prompt[n - 6:])
    if clear:  # the first step a near-tie: only the logits check speaks
        assert rt.decode(clear, stop_token_ids=()).tokens == ref[:clear]


def test_seeded_sampling_is_reproducible(gpu_runtime, reference):
    prompt, _ = reference
    params = SamplingParams(temperature=0.9, top_p=0.95)

    def sample(step):
        rt = gpu_runtime.spawn()
        rt.prefill(prompt)
        return rt.decode(16, sampling=params, seed=seed_for("sess", step), stop_token_ids=()).tokens

    a, b, c = sample(3), sample(3), sample(4)
    assert a == b and a != c


def test_crop_is_constant_time_up_to_8k(gpu_runtime):
    check = smoke.check_crop_cost(gpu_runtime, 8000, [4096, 1024, 256], max_seconds=1e-3)
    assert check.ok, check


def test_constrained_tool_calls(gpu_runtime):
    from langchain_core.messages import HumanMessage
    from langchain_core.tools import tool

    from unsee.plugins.model import LocalChatModel

    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    model = LocalChatModel(runtime=gpu_runtime, max_tokens=48).bind_tools([add], tool_choice="any")
    for q in ("Add 2 and 3.", "What is 10 plus 32?", "Sum 7 and 8."):
        reply = model.invoke([HumanMessage(q)], session="gpu-tools")
        (call,) = reply.tool_calls
        assert call["name"] == "add"
        add.args_schema.model_validate(call["args"], strict=True)
