import os
from pathlib import Path

import pytest

from tests.support.agent_shapes import close_savers
from tests.support.needs import needs
from tests.support.safety_cases import Case


@pytest.fixture(scope="session")
@needs("model")
def local_model(cpu_runtime):
    """The CPU model on the session's weights (``cpu_runtime``: loaded once for every directory)."""
    from unsee.plugins.model.chat_model import LocalChatModel

    return LocalChatModel(runtime=cpu_runtime.spawn(), max_tokens=64)


@pytest.fixture(scope="session")
@needs("model", "gpu")
def gpu_local_model(tmp_path_factory):
    """The same weights on the ExLlamaV2 backend (CUDA only)."""
    from unsee.plugins.model.chat_model import LocalChatModel

    return LocalChatModel.from_spec("exllamav2", cache_dir=_model_home(tmp_path_factory), max_tokens=64)


def _model_home(tmp_path_factory) -> Path:
    env = os.environ.get("UNSEE_MODEL_CACHE")
    return Path(env) if env else tmp_path_factory.mktemp("model-home")


@pytest.fixture
def cases():
    """``cases(tmp, shape, saver, ...)``: a ``tests.support.safety_cases.Case``, closed after the test."""
    made: list[Case] = []

    def make(*args, **kwargs) -> Case:
        made.append(Case(*args, **kwargs))
        return made[-1]

    yield make
    for case in made:
        case.close()


@pytest.fixture(autouse=True)
def _savers_closed():
    """The SQLite savers a test made with ``agent_shapes.sqlite_saver`` are closed after it."""
    yield
    close_savers()
