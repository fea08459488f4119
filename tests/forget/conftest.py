import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def local_model(tmp_path_factory):
    """The CPU model, loaded once (converted folder shared via $UNSEE_MODEL_CACHE when set)."""
    from unsee.plugins.model.chat_model import LocalChatModel

    env = os.environ.get("UNSEE_MODEL_CACHE")
    home = Path(env) if env else tmp_path_factory.mktemp("model-home")
    return LocalChatModel.from_spec("cpu", cache_dir=home, max_tokens=64)
