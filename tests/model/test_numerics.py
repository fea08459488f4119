"""Numerics fingerprints: what a runtime's logits depend on, as one string.

A replay compares the fingerprint it runs under with the recorded one; the
string must therefore be the same in every process on the same machine and
packages, name what changes the bits (kernel mode, versions, weights, CPU),
and leave out what does not (the thread count of the invariant kernels, the
machine's load)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from unsee.plugins.model import numerics

from tests.support.model_fakes import FakeRuntime


# -- the string (no model) ------------------------------------------------------

def test_fingerprint_is_ordered_pairs_that_parse_back():
    info = {"backend": "cpu", "kernels": "thread-invariant-1", "cpu": "AMD EPYC; 9R14 = x",
            "torch": "2.13.0+cpu"}
    text = numerics.fingerprint(info)
    assert text == "backend=cpu;kernels=thread-invariant-1;cpu=AMD EPYC, 9R14 : x;torch=2.13.0+cpu"
    assert numerics.parse(text) == {"backend": "cpu", "kernels": "thread-invariant-1",
                                     "cpu": "AMD EPYC, 9R14 : x", "torch": "2.13.0+cpu"}
    other = numerics.fingerprint({**info, "torch": "2.14.0+cpu", "isa": "AVX2"})
    assert numerics.differences(text, other) == {"torch": ("2.13.0+cpu", "2.14.0+cpu"), "isa": (None, "AVX2")}
    assert numerics.differences(text, text) == {}


def test_weights_digest_follows_the_files(tmp_path):
    (tmp_path / "config.json").write_text('{"a": 1}')
    (tmp_path / "model.safetensors").write_bytes(b"\0" * 1000)
    (tmp_path / "tokenizer.json").write_text("{}")  # not a weight: not in the digest
    first = numerics.weights_digest(tmp_path)
    assert len(first) == 16 and first == numerics.weights_digest(tmp_path)
    (tmp_path / "tokenizer.json").write_text('{"b": 2}')
    assert numerics.weights_digest(tmp_path) == first
    (tmp_path / "model.safetensors").write_bytes(b"\1" + b"\0" * 999)
    changed = numerics.weights_digest(tmp_path)
    assert changed != first
    (tmp_path / "config.json").write_text('{"a": 2}')
    assert numerics.weights_digest(tmp_path) not in (first, changed)
    assert numerics.weights_digest(None) == "unknown"


def test_cpu_math_settings_name_only_what_is_not_the_default(monkeypatch):
    torch = pytest.importorskip("torch")
    for name in numerics.CPU_MATH_ENV:
        monkeypatch.delenv(name, raising=False)
    assert numerics.cpu_math_settings(torch) == {}
    monkeypatch.setenv("MKL_CBWR", "AVX2,STRICT")
    assert numerics.cpu_math_settings(torch) == {"mkl_cbwr": "AVX2,STRICT"}
    saved = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("medium")
        assert numerics.cpu_math_settings(torch)["fp32_matmul"] == "medium"
    finally:
        torch.set_float32_matmul_precision(saved)


def test_a_runtime_without_its_own_fingerprint_names_its_backend():
    rt = FakeRuntime()
    assert numerics.parse(rt.numerics()) == {"backend": rt.backend, "runtime": "FakeRuntime", "drafts": "0"}


def test_the_exllamav2_fingerprint_is_made_without_running_it(tmp_path, monkeypatch):
    """GPU backend: backend, attention path, fp16, prefill chunk, versions, CUDA,
    the GPU and the weights, from what the load recorded (no CUDA here)."""
    torch = pytest.importorskip("torch")
    from unsee.plugins.model.exllama_backend import ExLlamaRuntime, gpu_name

    (tmp_path / "config.json").write_text(json.dumps({"rope_theta": 100000.0}))
    (tmp_path / "model.safetensors").write_bytes(b"weights")
    fake_torch = SimpleNamespace(cuda=SimpleNamespace(get_device_capability=lambda i: (9, 0),
                                                      get_device_name=lambda i: "NVIDIA H200"))
    assert gpu_name(fake_torch) == "NVIDIA H200 sm_90"
    assert gpu_name(SimpleNamespace(cuda=SimpleNamespace())) == "unknown"
    shared = SimpleNamespace(attention="matmul", config=SimpleNamespace(max_input_len=2048), folder=tmp_path,
                             cuda="13.0", device="NVIDIA H200 sm_90")
    rt = ExLlamaRuntime(_shared=shared)
    info = numerics.parse(rt.numerics())
    assert info["backend"] == "exllamav2" and info["attention"] == "matmul" and info["dtype"] == "fp16"
    assert info["chunk"] == "2048" and info["cuda"] == "13.0" and info["device"] == "NVIDIA H200 sm_90"
    assert info["torch"] == torch.__version__ and "exllamav2" in info  # "none" where it is not installed
    assert info["weights"] == numerics.weights_digest(tmp_path) and info["drafts"] == "0"
    before = rt.numerics()
    assert before == ExLlamaRuntime(_shared=shared).numerics()  # made once per load
    other = SimpleNamespace(**{**vars(shared), "numerics": None, "device": "NVIDIA H100 80GB HBM3 sm_90"})
    assert numerics.differences(before, ExLlamaRuntime(_shared=other).numerics()) == {
        "device": ("NVIDIA H200 sm_90", "NVIDIA H100 80GB HBM3 sm_90")}


# -- the CPU model ------------------------------------------------------------------

CHILD = """
import sys
from unsee.plugins.model import load_runtime
print("NUMERICS " + load_runtime("cpu", cache_dir=sys.argv[1]).numerics())
"""


@pytest.mark.model
def test_cpu_fingerprint_names_what_the_logits_depend_on(cpu_runtime):
    import torch
    import transformers

    from unsee.plugins.model.cpu_backend import KERNELS

    info = numerics.parse(cpu_runtime.numerics())
    assert info["backend"] == "cpu"
    if cpu_runtime.fast and cpu_runtime.invariant:
        assert info["path"] == "fast" and info["kernels"] == KERNELS
        assert "threads" not in info  # the bits do not depend on the count
    else:
        assert "threads" in info
    assert info["torch"] == torch.__version__ and info["transformers"] == transformers.__version__
    assert info["isa"] == torch.backends.cpu.get_cpu_capability() and info["cpu"] == numerics.cpu_model()
    assert info["weights"] == numerics.weights_digest(cpu_runtime.folder)
    assert info["drafts"] == str(cpu_runtime.draft_max)


@pytest.mark.model
def test_cpu_fingerprint_is_the_same_in_another_process(cpu_runtime, model_home):
    """Two runtimes, two processes (another thread count, another load): the same string."""
    mine = cpu_runtime.numerics()
    assert cpu_runtime.spawn().numerics() == mine
    env = {**os.environ, "UNSEE_TORCH_THREADS": "1"}
    res = subprocess.run([sys.executable, "-c", CHILD, str(model_home)], capture_output=True, text=True,
                         timeout=600, env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    theirs = [line[len("NUMERICS "):] for line in res.stdout.splitlines() if line.startswith("NUMERICS ")]
    if cpu_runtime.invariant:
        assert theirs == [mine]
    else:  # a fixed count is named where the bits depend on it
        assert numerics.differences(mine, theirs[0]).keys() <= {"threads"}


@pytest.mark.model
def test_cpu_fingerprint_changes_with_what_changes_the_bits(cpu_runtime):
    """No drafts (other pass shapes), the legacy path, thread-dependent kernels:
    each a different fingerprint, naming what differs."""
    from unsee.plugins.model.cpu_backend import TorchRuntime

    if not (cpu_runtime.fast and cpu_runtime.invariant):
        pytest.skip("the default is not the fast path's invariant kernels here")
    rt = cpu_runtime.spawn()
    rt.draft_max = 0
    assert numerics.differences(cpu_runtime.numerics(), rt.numerics()) == {"drafts": ("16", "0")}
    shared = cpu_runtime._shared
    for fast, invariant, kernels in ((True, False, "thread-dependent"), (False, True, "transformers")):
        other = TorchRuntime(_shared=SimpleNamespace(**{**vars(shared), "fast": fast, "invariant": invariant,
                                                          "numerics": None}))
        diff = numerics.differences(cpu_runtime.numerics(), other.numerics())
        assert diff["kernels"] == (cpu_runtime.numerics_info()["kernels"], kernels)
        assert diff["threads"][0] is None and diff["threads"][1]
        assert set(diff) <= {"kernels", "threads", "path", "drafts"}


@pytest.mark.model
def test_every_reply_carries_the_fingerprint(chat_model, cpu_runtime):
    from langchain_core.messages import HumanMessage

    reply = chat_model.invoke([HumanMessage("Say hi.")], session="numerics-test")
    meta = reply.response_metadata["unsee"]
    assert meta["numerics"] == cpu_runtime.numerics() == chat_model.numerics()
    assert chat_model.numerics("numerics-test") == meta["numerics"]
    assert "numerics-never-used" not in chat_model.pool.sessions
    assert chat_model.numerics("numerics-never-used") == meta["numerics"]
    assert "numerics-never-used" not in chat_model.pool.sessions  # asking made no session


def test_the_numerics_module_needs_only_the_standard_library():
    path = Path(numerics.__file__)
    code = path.read_text()
    assert "import torch" not in code and "langchain" not in code
