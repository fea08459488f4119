"""Sandbox fixtures: ``env`` (every built-in backend, for the tests that are not
the conformance suite), the docker image, and the python backend's commands.
The conformance suite itself is ``unsee.sandbox.testing`` (run per backend by
test_conformance.py).

Docker tests (``@pytest.mark.docker``) run wherever a daemon can be had:
``make test`` sources scripts/docker-up.sh, which starts one (the skip-or-fail
rule for them lives in tests/conftest.py).
"""

from __future__ import annotations

import os
import time

import pytest

# the packaged conformance suite's asserts get pytest's detailed messages
pytest.register_assert_rewrite("unsee.sandbox.testing")

from tests.support.needs import needs  # noqa: E402
from unsee.sandbox import open_environment  # noqa: E402


@pytest.fixture(scope="session")
@needs("docker")
def docker_image() -> str:
    """The image docker tests use: $UNSEE_TEST_IMAGE, else the busybox one (built if missing)."""
    from unsee.sandbox.image import build_image

    tag = os.environ.get("UNSEE_TEST_IMAGE")
    if tag:
        return tag
    return build_image("busybox")  # idempotent: ~0.5 s the first time, then a lookup


# -- the python backend speaks a tiny command dialect in the conformance suite --


def _echo(obj, *args):
    return " ".join(args) + "\n"


def _exit(obj, code="0"):
    return int(code)


def _sleep(obj, secs):
    time.sleep(float(secs))


PY_COMMANDS = {"echo": _echo, "exit": _exit, "sleep": _sleep}


@pytest.fixture
def py_commands():
    """``echo``, ``exit`` and ``sleep`` for the python backend (the suite uses them)."""
    return dict(PY_COMMANDS)


def open_backend(name: str, tmp_path, request):
    if name == "local":
        return open_environment("local", root=tmp_path / "local-env", keep=False)
    if name == "python":
        return open_environment("python", obj={"balance": 100}, commands=PY_COMMANDS)
    if name == "docker":
        image = request.getfixturevalue("docker_image")
        return open_environment("docker", image=image)
    raise ValueError(name)


BACKENDS = [
    pytest.param("local", id="local"),
    pytest.param("python", id="python"),
    pytest.param("docker", id="docker", marks=pytest.mark.docker),
]


@pytest.fixture(params=BACKENDS)
def env(request, tmp_path):
    e = open_backend(request.param, tmp_path, request)
    yield e
    e.close()
