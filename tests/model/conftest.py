"""Fixtures of the replay-runtime tests.

The CPU model is loaded once per test session. Its converted folder lives in
``$UNSEE_MODEL_CACHE`` when set (to share one conversion across runs and test
directories: the first conversion takes ~20–40 s on 2 cores, later loads
~3 s), else in a model cache made for the test session.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.needs import needs


@pytest.fixture(scope="session")
def model_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    env = os.environ.get("UNSEE_MODEL_CACHE")
    if env:
        path = Path(env).expanduser()
        path.mkdir(parents=True, exist_ok=True)
        return path
    return tmp_path_factory.mktemp("model-cache")


@pytest.fixture(scope="session")
@needs("model")
def cpu_runtime(model_home: Path):
    from unsee.plugins.model import load_runtime

    return load_runtime("cpu", cache_dir=model_home)


@pytest.fixture()
def runtime(cpu_runtime):
    """A fresh cache on the shared CPU weights."""
    return cpu_runtime.spawn()


@pytest.fixture()
def chat_model(cpu_runtime):
    from unsee.plugins.model import LocalChatModel

    return LocalChatModel(runtime=cpu_runtime, max_tokens=24)
