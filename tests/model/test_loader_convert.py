"""Backend selection errors and atomic conversion (no model load)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from unsee.plugins.model import convert, load_runtime
from unsee.plugins.model.errors import (
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

    importlib.import_module("unsee.plugins.model.exllama_backend")
    assert "exllamav2" not in sys.modules


def _fake_gguf(tmp_path: Path) -> Path:
    gguf = tmp_path / "src" / "fake.gguf"
    gguf.parent.mkdir()
    gguf.write_bytes(b"GGUF")
    return gguf


def _complete(src: Path, out: Path) -> None:
    for name in convert.REQUIRED_FILES:
        (out / name).write_text("{}")


def test_conversion_is_atomic(tmp_path, monkeypatch):
    gguf = _fake_gguf(tmp_path)
    cache = tmp_path / "cache"

    def half_written(src: Path, out: Path) -> None:
        (out / "config.json").write_text("{}")
        raise OSError("disk full")

    monkeypatch.setattr(convert, "_convert", half_written)
    with pytest.raises(ConversionError):
        convert.ensure_converted(cache, gguf=gguf)
    # no half folder, no temp debris: only the hash index and the lock file
    assert sorted(p.name for p in cache.iterdir() if p.is_dir()) == []


def test_conversion_marker_reuse_and_hash_key(tmp_path, monkeypatch):
    gguf = _fake_gguf(tmp_path)
    cache = tmp_path / "cache"
    calls = []
    monkeypatch.setattr(convert, "_convert", lambda src, out: (calls.append(src), _complete(src, out)))
    first = convert.ensure_converted(cache, gguf=gguf)
    second = convert.ensure_converted(cache, gguf=gguf)
    digest = hashlib.sha256(b"GGUF").hexdigest()
    assert first == second == cache / f"{convert.MODEL_NAME}-{digest[:12]}"
    assert convert.is_converted(first) and len(calls) == 1
    assert oct(first.stat().st_mode & 0o777) == oct(0o755)


def test_cache_dir_is_per_user_not_per_home(tmp_path, monkeypatch):
    monkeypatch.delenv("UNSEE_MODEL_CACHE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    monkeypatch.setenv("UNSEE_HOME", str(tmp_path / "project"))
    assert convert.default_cache_dir() == tmp_path / "user" / ".unsee" / "models"
    monkeypatch.setenv("UNSEE_MODEL_CACHE", str(tmp_path / "shared"))
    assert convert.default_cache_dir() == tmp_path / "shared"
    gguf = _fake_gguf(tmp_path)
    monkeypatch.setattr(convert, "_convert", _complete)
    monkeypatch.setattr(convert, "find_gguf", lambda: gguf)
    # two homes, one copy: the home passed to load_runtime is not where the weights go
    import unsee.plugins.model.loader as loader

    loaded = []
    monkeypatch.setattr(loader, "_construct", lambda backend, folder, **kw: loaded.append(folder))
    for home in ("a", "b"):
        load_runtime("cpu", tmp_path / home)
    assert loaded[0] == loaded[1] and loaded[0].parent == tmp_path / "shared"
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    load_runtime("cpu", tmp_path / "a", cache_dir=tmp_path / "explicit")
    assert loaded[2].parent == tmp_path / "explicit"


def test_file_hash_is_remembered_by_path_size_mtime(tmp_path, monkeypatch):
    gguf = _fake_gguf(tmp_path)
    cache = tmp_path / "cache"
    d1 = convert.file_digest(gguf, cache)
    assert d1 == hashlib.sha256(b"GGUF").hexdigest()
    index = json.loads((cache / convert.HASH_INDEX).read_text())
    assert index[str(gguf.resolve())]["sha256"] == d1
    # same size and mtime: the remembered hash is used (the file is not read again)
    st = gguf.stat()
    gguf.write_bytes(b"FUGG")
    import os

    os.utime(gguf, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert convert.file_digest(gguf, cache) == d1
    # a changed mtime is hashed again
    os.utime(gguf, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert convert.file_digest(gguf, cache) == hashlib.sha256(b"FUGG").hexdigest()
    # a corrupt index is ignored and rewritten
    (cache / convert.HASH_INDEX).write_text("{not json")
    assert convert.file_digest(gguf, cache) == hashlib.sha256(b"FUGG").hexdigest()


def test_concurrent_converters_convert_once(tmp_path, monkeypatch):
    import threading
    import time

    gguf = _fake_gguf(tmp_path)
    cache = tmp_path / "cache"
    calls = []

    def slow(src: Path, out: Path) -> None:
        calls.append(src)
        time.sleep(0.3)
        _complete(src, out)

    monkeypatch.setattr(convert, "_convert", slow)
    results: list[Path] = []
    threads = [threading.Thread(target=lambda: results.append(convert.ensure_converted(cache, gguf=gguf)))
               for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and len(set(results)) == 1 and convert.is_converted(results[0])
    assert not list(cache.glob(".*tmp-*"))


def test_conversion_reports_progress(tmp_path, monkeypatch, caplog):
    import logging

    gguf = _fake_gguf(tmp_path)
    monkeypatch.setattr(convert, "_convert", _complete)
    said: list[str] = []
    with caplog.at_level(logging.INFO, logger=convert.__name__):
        folder = convert.ensure_converted(tmp_path / "cache", gguf=gguf, progress=said.append)
    assert said[0].startswith("converting the model once (~60 s) into ") and str(folder) in said[0]
    assert said[1].startswith("model converted in ")
    assert any("converting the model once" in r.getMessage() for r in caplog.records)
    said.clear()
    convert.ensure_converted(tmp_path / "cache", gguf=gguf, progress=said.append)
    assert said == []  # nothing to say when the copy exists


def test_quiet_transformers_is_scoped():
    import warnings

    from transformers.utils import logging as hf_logging

    before = hf_logging.get_verbosity()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with convert.quiet_transformers():
            assert hf_logging.get_verbosity() == hf_logging.ERROR
            warnings.warn("`torch_dtype` is deprecated! Use `dtype` instead!", FutureWarning)
        warnings.warn("other", UserWarning)
    assert hf_logging.get_verbosity() == before
    assert [str(w.message) for w in seen] == ["other"]


def test_patch_config_adds_top_level_rope_theta(tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"rope_parameters": {"rope_theta": 100000.0}, "quantization_config": {}}))
    convert._patch_config(cfg)
    out = json.loads(cfg.read_text())
    assert out["rope_theta"] == 100000.0 and "quantization_config" not in out


def test_find_gguf_locates_the_shipped_weights():
    path = convert.find_gguf()
    assert path.name == convert.GGUF_FILE and path.stat().st_size > 50_000_000
