"""ExLlamaV2 backend on CUDA: the CPU determinism tests, mirrored.

Skipped without CUDA (``scripts/gpu-check.sh`` installs exllamav2 and runs
these on an NVIDIA machine). Each runtime is compared only with itself.
"""

from __future__ import annotations

import time

import pytest
import torch
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool

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

    return load_runtime("exllamav2", model_home)


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


@pytest.mark.parametrize("repeat", range(3))
def test_crop_then_decode_equals_fresh_run(gpu_runtime, reference, repeat):
    prompt, ref = reference
    n = len(prompt)
    rt = gpu_runtime.spawn()
    rt.prefill(prompt)
    rt.decode(N_NEW, stop_token_ids=())
    for cut in (n + 16, n + 5, n, n - 6):
        rt.crop(cut)
        if cut < n:
            rt.prefill(prompt[cut:])
        done = max(0, cut - n)
        assert rt.decode(N_NEW - done, stop_token_ids=()).tokens == ref[done:], cut


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
    rt = gpu_runtime.spawn()
    rt.prefill(list(range(100, 100 + 8000)))
    times = []
    for cut in (8000, 4096, 1024, 256):
        rt.crop(cut)
        t0 = time.perf_counter()
        rt.crop(cut - 1)
        times.append(time.perf_counter() - t0)
    assert max(times) < 0.001, times


def test_constrained_tool_calls(gpu_runtime):
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
