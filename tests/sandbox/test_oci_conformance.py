"""The conformance suite (``unsee.sandbox.testing``) on the docker and local backends opened with
``registry=``: every snapshot is pushed to the private OCI registry before ``snapshot()`` returns."""

from __future__ import annotations

import uuid

import pytest

from unsee.sandbox import open_environment
from unsee.sandbox.testing import EnvironmentConformance


def _repo() -> str:
    return f"unsee/conf-{uuid.uuid4().hex[:8]}"


@pytest.mark.registry
class TestLocalRegistry(EnvironmentConformance):
    @pytest.fixture
    def env(self, tmp_path, registry):
        e = open_environment("local", root=tmp_path / "local-env", keep=False, registry=registry,
                             repository=_repo())
        yield e
        e.close()

    @pytest.fixture
    def keeping_env(self, tmp_path, registry):
        e = open_environment("local", root=tmp_path / "kept-env", keep=True, registry=registry,
                             repository=_repo())
        yield e
        e.discard()


@pytest.mark.docker
@pytest.mark.registry
class TestDockerRegistry(EnvironmentConformance):
    @pytest.fixture
    def env(self, docker_image, registry):
        e = open_environment("docker", image=docker_image, registry=registry, repository=_repo())
        yield e
        e.close()

    @pytest.fixture
    def keeping_env(self, docker_image, registry):
        from unsee.sandbox.docker_env import cleanup

        e = open_environment("docker", image=docker_image, keep_snapshots=True, registry=registry,
                             repository=_repo())
        yield e
        e.discard()
        cleanup(env_id=e.env_id)
