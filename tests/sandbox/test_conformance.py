"""The conformance suite (``unsee.sandbox.testing``) run on every built-in backend
(local, python, docker) and on a tiny third-party backend registered here.

A backend that declares it lacks a capability (``env.capabilities``) has the
tests for it skipped, and must raise NotSupported when the capability is used.
"""

from __future__ import annotations

import posixpath
import uuid

import pytest

from unsee.sandbox import (
    EXEC,
    FILES,
    SHADOW,
    SNAPSHOT,
    Environment,
    NotSupported,
    PathNotFound,
    SnapshotId,
    SnapshotNotFound,
    available_backends,
    backend_names,
    backend_options,
    open_environment,
    register_backend,
)
from unsee.sandbox.base import DEFAULT_FILE_MODE, as_bytes
from unsee.sandbox.testing import EnvironmentConformance


class TestLocal(EnvironmentConformance):
    @pytest.fixture
    def env(self, tmp_path):
        e = open_environment("local", root=tmp_path / "local-env", keep=False)
        yield e
        e.close()

    @pytest.fixture
    def keeping_env(self, tmp_path):
        e = open_environment("local", root=tmp_path / "kept-env", keep=True)
        yield e
        e.discard()


class TestPython(EnvironmentConformance):
    shell = False  # its exec runs the py_commands (echo, exit, sleep) on the object

    @pytest.fixture
    def env(self, py_commands):
        e = open_environment("python", obj={"balance": 100}, commands=py_commands)
        yield e
        e.close()


@pytest.mark.docker
class TestDocker(EnvironmentConformance):
    @pytest.fixture
    def env(self, docker_image):
        e = open_environment("docker", image=docker_image)
        yield e
        e.close()

    @pytest.fixture
    def keeping_env(self, docker_image):
        from unsee.sandbox.docker_env import cleanup

        e = open_environment("docker", image=docker_image, keep_snapshots=True)
        yield e
        e.discard()
        cleanup(env_id=e.env_id)  # what its closed shadows kept (labelled unsee.parent=<id>)


def test_exec_not_supported_is_typed():
    env = open_environment("python", obj={})
    assert EXEC not in env.capabilities
    with pytest.raises(NotSupported) as ei:
        env.exec("echo hi")
    assert isinstance(ei.value, NotImplementedError)


# -- a third-party backend: registered by name, runs the whole suite --------------------------


class MemoryEnvironment(Environment):
    """Files in a dict, snapshots in a ``store`` that outlives the environment when ``keep``.
    No exec. Declares no OPTIONS: the registry derives them from ``__init__``."""

    backend = "memory"
    capabilities = frozenset({FILES, SNAPSHOT, SHADOW})

    def __init__(self, *, store: dict | None = None, keep: bool = False, env_id: str | None = None,
                 _files: dict | None = None):
        self.env_id = env_id or uuid.uuid4().hex[:12]
        self._store = {} if store is None else store  # ref -> {path: (bytes, mode)}
        self._keep = keep
        self._files = dict(_files or {})
        self._seq = 0
        self._children: list[MemoryEnvironment] = []

    @staticmethod
    def _norm(path: str) -> str:
        return posixpath.normpath(posixpath.join("/", path))

    def exec(self, cmd, timeout=None):
        self._require(EXEC)

    def read_file(self, path):
        return self._entry(path)[0]

    def file_mode(self, path):
        return self._entry(path)[1]

    def _entry(self, path):
        self._require(FILES)
        try:
            return self._files[self._norm(path)]
        except KeyError:
            raise PathNotFound(path) from None

    def write_file(self, path, data, *, mode=None):
        self._require(FILES)
        self._files[self._norm(path)] = (as_bytes(data), DEFAULT_FILE_MODE if mode is None else mode)

    def remove_file(self, path):
        self._require(FILES)
        if self._files.pop(self._norm(path), None) is None:
            raise PathNotFound(path)

    def snapshot(self):
        self._require(SNAPSHOT)
        self._seq += 1
        ref = f"{self.env_id}/{self._seq}"
        self._store[ref] = dict(self._files)
        return SnapshotId(self.backend, self.env_id, self._seq, ref)

    def restore(self, snapshot):
        self._require(SNAPSHOT)
        if not isinstance(snapshot, SnapshotId) or snapshot.backend != self.backend \
                or snapshot.ref not in self._store:
            raise SnapshotNotFound(snapshot)
        self._files = dict(self._store[snapshot.ref])

    def shadow(self):
        self._require(SHADOW)
        child = MemoryEnvironment(store=self._store, keep=self._keep, _files=self._files)
        self._children.append(child)
        return child

    def close(self):
        if self._closed:
            return
        self._closed = True
        for child in self._children:
            child.close()
        if not self._keep:
            self._drop_snapshots()

    def discard(self):
        self.close()
        self._drop_snapshots()

    def _drop_snapshots(self):
        for ref in [r for r in self._store if r.startswith(self.env_id + "/")]:
            del self._store[ref]


register_backend("memory", MemoryEnvironment, replace=True)


class TestThirdPartyBackend(EnvironmentConformance):
    @pytest.fixture
    def env(self):
        e = open_environment("memory")
        yield e
        e.close()

    @pytest.fixture
    def keeping_env(self):
        e = open_environment("memory", store={}, keep=True)
        yield e
        e.discard()


def test_third_party_backend_is_registered_with_its_options():
    assert "memory" in backend_names()
    assert available_backends()["memory"] is None
    assert backend_options("memory") == {"store", "keep", "env_id"}  # from __init__, minus _files
