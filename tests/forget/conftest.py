import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def local_model(tmp_path_factory):
    """The CPU model, loaded once (converted folder shared via $UNSEE_MODEL_CACHE when set)."""
    from unsee.plugins.model.chat_model import LocalChatModel

    return LocalChatModel.from_spec("cpu", cache_dir=_model_home(tmp_path_factory), max_tokens=64)


@pytest.fixture(scope="session")
def gpu_local_model(tmp_path_factory):
    """The same weights on the ExLlamaV2 backend (CUDA only)."""
    from unsee.plugins.model.chat_model import LocalChatModel

    return LocalChatModel.from_spec("exllamav2", cache_dir=_model_home(tmp_path_factory), max_tokens=64)


def _model_home(tmp_path_factory) -> Path:
    env = os.environ.get("UNSEE_MODEL_CACHE")
    return Path(env) if env else tmp_path_factory.mktemp("model-home")
