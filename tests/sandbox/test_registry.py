"""The registry: built-ins by table, third-party registration, and options each
backend declares (an undeclared one is an InvalidOption, a TypeError)."""

from __future__ import annotations

import pytest

from unsee.sandbox import (
    BackendNotFound,
    InvalidOption,
    backend_options,
    open_environment,
    register_backend,
)
from unsee.sandbox.base import _signature_options, options_of
from unsee.sandbox.docker_env import DockerEnvironment
from unsee.sandbox.local import LocalEnvironment
from unsee.sandbox.pyobject import PythonObjectEnvironment
from unsee.sandbox.registry import BUILTIN_BACKENDS


@pytest.mark.parametrize("cls", [LocalEnvironment, PythonObjectEnvironment, DockerEnvironment])
def test_declared_options_match_the_constructor(cls):
    assert cls.OPTIONS == _signature_options(cls)
    assert options_of(cls) == cls.OPTIONS


def test_builtin_table_names_each_backend_class():
    assert {name: b.target.split(":")[1] for name, b in BUILTIN_BACKENDS.items()} == {
        "docker": "DockerEnvironment", "local": "LocalEnvironment", "python": "PythonObjectEnvironment",
    }
    assert backend_options("local") == {"root", "env", "keep", "env_id", "registry", "repository", "snapshot_store"}
    assert backend_options("python") == {"obj", "files", "commands", "env_id"}
    assert {"image", "keep_snapshots", "mem_limit"} <= backend_options("docker")
    assert backend_options("auto") == backend_options("docker") | backend_options("local")
    with pytest.raises(BackendNotFound):
        backend_options("no-such-backend")


@pytest.mark.parametrize("backend, opts", [
    ("local", {"image": "x"}),
    ("python", {"root": "/tmp"}),
    ("docker", {"keep": True}),  # checked before the daemon is even asked
    ("auto", {"obj": {}}),       # neither docker nor local takes it
])
def test_an_undeclared_option_is_an_invalid_option(backend, opts):
    with pytest.raises(InvalidOption) as ei:
        open_environment(backend, **opts)
    err = ei.value
    assert isinstance(err, TypeError)
    assert err.backend == backend and err.unknown == sorted(opts)
    assert repr(backend) in str(err) and "accepts:" in str(err)


def test_auto_gives_local_only_what_local_declares(monkeypatch, tmp_path):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/nobody-home.sock")
    env = open_environment("auto", root=tmp_path / "ws", keep=True, keep_snapshots=True, image="unused")
    assert env.backend == "local" and env.root == (tmp_path / "ws").resolve()
    env.write_file("f", b"kept")
    env.close()
    assert (tmp_path / "ws" / "workspace" / "f").read_bytes() == b"kept"  # keep=True reached it
    env.discard()
    assert not (tmp_path / "ws").exists()


@pytest.mark.docker
def test_auto_gives_docker_only_what_docker_declares(tmp_path, docker_image):
    env = open_environment("auto", root=tmp_path / "ws", keep=True, keep_snapshots=True, image=docker_image)
    try:
        assert env.backend == "docker" and env.keep_snapshots and env.image == docker_image
    finally:
        env.discard()


def test_third_party_registration(tmp_path):
    opened = []

    def open_anything(**opts):  # **kwargs: the registry passes every option through
        opened.append(opts)
        return open_environment("local", root=tmp_path / "w", keep=False)

    register_backend("test-anything", open_anything, replace=True)
    assert backend_options("test-anything") is None
    open_environment("test-anything", whatever=1).close()
    assert opened == [{"whatever": 1}]

    register_backend("test-declared", open_anything, options={"colour"}, replace=True)
    with pytest.raises(InvalidOption):
        open_environment("test-declared", whatever=1)

    with pytest.raises(ValueError, match="already registered"):
        register_backend("test-declared", open_anything)
    with pytest.raises(ValueError, match="already registered"):
        register_backend("local", open_anything)  # built-ins count as registered
    with pytest.raises(ValueError, match="reserved"):
        register_backend("auto", open_anything)
