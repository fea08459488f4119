"""The ExLlamaV2 backend makes prefill causal (on the CPU: exllamav2 itself replaced by fakes).

exllamav2 0.3.2's SDPA path attends without a causal mask when flash-attn and
xformers are absent (the lent GPU machine has neither), so the backend sets
``config.no_sdpa`` before the model is built. What the GPU must still show
(one-shot prefill equals token by token) is in ``test_exllama_gpu.py``.
"""

from __future__ import annotations

import json
import sys
import types
from types import SimpleNamespace

import pytest

from unsee.plugins.model.exllama_backend import _Shared, causal_attention


@pytest.mark.parametrize("attn,path", [
    (None, "matmul"),
    (SimpleNamespace(has_flash_attn=False, has_xformers=False), "matmul"),
    (SimpleNamespace(has_flash_attn=True, has_xformers=False), "flash-attn"),
    (SimpleNamespace(has_flash_attn=False, has_xformers=True), "xformers"),
])
def test_the_config_leaves_the_sdpa_path(attn, path):
    config = SimpleNamespace(no_sdpa=False)
    assert causal_attention(config, attn) == path
    assert config.no_sdpa is True


def test_the_model_is_built_from_a_config_that_already_avoids_sdpa(tmp_path, monkeypatch):
    import torch

    seen = {}

    class Config:
        def __init__(self, folder):
            self.no_sdpa, self.max_seq_len = False, 8192

    class Model:
        def __init__(self, config):
            seen["no_sdpa"] = config.no_sdpa

        def load(self):
            seen["loaded"] = True

    fake = types.ModuleType("exllamav2")
    fake.ExLlamaV2, fake.ExLlamaV2Config = Model, Config
    fake.attn = SimpleNamespace(has_flash_attn=False, has_xformers=False)
    monkeypatch.setitem(sys.modules, "exllamav2", fake)
    monkeypatch.setitem(sys.modules, "exllamav2.attn", fake.attn)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    import transformers

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", staticmethod(lambda *a, **k: object()))
    (tmp_path / "config.json").write_text(json.dumps({"rope_theta": 100000.0}))
    shared = _Shared(tmp_path, None)
    assert seen == {"no_sdpa": True, "loaded": True}
    assert shared.attention == "matmul" and shared.config.no_sdpa is True
