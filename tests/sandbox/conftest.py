"""Sandbox fixtures: one backend fixture every conformance test runs against.

Docker tests (``@pytest.mark.docker``) run wherever a daemon can be had:
``make test`` sources scripts/docker-up.sh, which starts one. Reachability is
checked ONCE per session; without a daemon every docker test is skipped and a
single summary line says why.
"""

from __future__ import annotations

import os
import time

import pytest

from unsee.sandbox import open_environment

_docker_state: dict[str, object] = {}


def docker_unavailable() -> str | None:
    """None when a daemon answers (checked once per session), else why not."""
    if "reason" not in _docker_state:
        from unsee.sandbox.docker_env import daemon_unavailable_reason

        why = daemon_unavailable_reason()
        _docker_state["reason"] = (
            None if why is None else f"{why}; start one with `source scripts/docker-up.sh` (make test does)"
        )
    return _docker_state["reason"]  # type: ignore[return-value]


def pytest_collection_modifyitems(config, items):
    docker_items = [i for i in items if "docker" in i.keywords]
    if not docker_items:
        return
    why = docker_unavailable()
    if why is None:
        return
    skip = pytest.mark.skip(reason="no Docker daemon")
    for item in docker_items:
        item.add_marker(skip)
    _docker_state["skipped"] = len(docker_items)


def pytest_terminal_summary(terminalreporter):
    n = _docker_state.get("skipped")
    if n:
        terminalreporter.write_line(f"docker: {n} sandbox tests skipped: {_docker_state['reason']}", yellow=True)


@pytest.fixture(scope="session")
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
