"""Fixtures of the eval tests: unsee's OpenAI-compatible server on the local CPU model."""

import pytest

from tests.support.endpoint_server import serve
from tests.support.needs import needs


@pytest.fixture(scope="session")
@needs("model")
def endpoint(cpu_runtime):
    """The OpenAI-compatible server on the CPU model, in this process, on the session's weights
    (``cpu_runtime``: loaded once for every directory)."""
    from unsee.plugins.model.chat_model import LocalChatModel

    server, url = serve(LocalChatModel(runtime=cpu_runtime.spawn(), max_tokens=32))
    yield url
    server.shutdown()
    server.server_close()
