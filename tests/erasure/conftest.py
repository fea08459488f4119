"""The erasure scenario, recorded: ``recorded`` is (home, u, agent, close) after one run of
``tests.support.erasure_agents`` on thread "t1" (a module may define its own, as test_retention does)."""

import pytest

from tests.support.erasure_agents import build, run


@pytest.fixture
def recorded(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    u, agent, close = build(home)
    run(agent, "t1")
    yield home, u, agent, close
    close()
