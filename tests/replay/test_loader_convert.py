"""Backend selection errors and atomic conversion (no model load)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from unsee.plugins.replay import convert, load_runtime
from unsee.plugins.replay.errors import (
    BackendUnavailableError,
    ConversionError,
    ModelNotFoundError,
    UnknownBackendError,
)


def test_unknown_spec_is_a_value_error(tmp_path):
    with pytest.raises(UnknownBackendError) as info:
        load_runtime("llamacpp", tmp_path)
    assert isinstance(info.value, ValueError)
    assert "cpu" in str(info.value) and "exllamav2" in str(info.value)


def test_missing_folder(tmp_path):
    with pytest.raises(ModelNotFoundError):
        load_runtime(str(tmp_path / "nope"), tmp_path)


def test_exllamav2_without_cuda_names_what_to_install(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(BackendUnavailableError) as info:
        load_runtime("exllamav2", tmp_path)
    err = info.value
    assert isinstance(err, ImportError)
    assert "exllamav2==0.3.2" in str(err) and err.backend == "exllamav2"
    # failed before converting anything
    assert not (tmp_path / "models").exists()


def test_exllama_backend_module_imports_without_cuda():
    import importlib
    import sys

    importlib.import_module("unsee.plugins.replay.exllama_backend")
    assert "exllamav2" not in sys.modules


def test_conversion_is_atomic(tmp_path, monkeypatch):
    gguf = tmp_path / "fake.gguf"
    gguf.write_bytes(b"GGUF")

    def half_written(src: Path, out: Path) -> None:
        (out / "config.json").write_text("{}")
        raise OSError("disk full")

    monkeypatch.setattr(convert, "_convert", half_written)
    with pytest.raises(ConversionError):
        convert.ensure_converted(tmp_path, gguf=gguf)
    models = tmp_path / "models"
    assert list(models.iterdir()) == []  # no half folder, no temp debris


def test_conversion_marker_and_reuse(tmp_path, monkeypatch):
    gguf = tmp_path / "fake.gguf"
    gguf.write_bytes(b"GGUF")
    calls = []

    def fake(src: Path, out: Path) -> None:
        calls.append(src)
        for name in convert.REQUIRED_FILES:
            (out / name).write_text("{}")

    monkeypatch.setattr(convert, "_convert", fake)
    first = convert.ensure_converted(tmp_path, gguf=gguf)
    second = convert.ensure_converted(tmp_path, gguf=gguf)
    assert first == second == tmp_path / "models" / convert.MODEL_NAME
    assert convert.is_converted(first) and len(calls) == 1
    assert oct(first.stat().st_mode & 0o777) == oct(0o755)


def test_patch_config_adds_top_level_rope_theta(tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"rope_parameters": {"rope_theta": 100000.0}, "quantization_config": {}}))
    convert._patch_config(cfg)
    out = json.loads(cfg.read_text())
    assert out["rope_theta"] == 100000.0 and "quantization_config" not in out


def test_find_gguf_locates_the_shipped_weights():
    path = convert.find_gguf()
    assert path.name == convert.GGUF_FILE and path.stat().st_size > 50_000_000
