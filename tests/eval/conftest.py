"""Fixtures of the eval tests: unsee's OpenAI-compatible server on the local CPU model."""

import os
from pathlib import Path

import pytest

from tests.support.endpoint_server import serve
from tests.support.needs import needs


@pytest.fixture(scope="session")
@needs("model")
def endpoint(tmp_path_factory):
    """The OpenAI-compatible server on the CPU model, in this process (converted folder shared
    via $UNSEE_MODEL_CACHE when set, as in the other model tests)."""
    from unsee.plugins.model.chat_model import LocalChatModel

    env = os.environ.get("UNSEE_MODEL_CACHE")
    home = Path(env) if env else tmp_path_factory.mktemp("model-home")
    server, url = serve(LocalChatModel.from_spec("cpu", cache_dir=home, max_tokens=32))
    yield url
    server.shutdown()
    server.server_close()
