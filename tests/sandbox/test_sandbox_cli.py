"""``unsee sandbox ...`` errors exit non-zero and say what to do."""

from __future__ import annotations

import pytest

from unsee.cli import main
from unsee.sandbox import image
from unsee.sandbox.errors import ImageBuildError


def test_build_image_without_a_daemon_exits_3(monkeypatch, capsys):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    assert main(["sandbox", "build-image", "--flavor", "busybox"]) == 3  # an environment problem
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Docker daemon" in err


def test_build_image_bad_flavor_exits_2(capsys):
    assert main(["sandbox", "build-image", "--flavor", "nope"]) == 2


def test_missing_host_package_names_the_command_when_not_root(monkeypatch):
    monkeypatch.setattr(image.shutil, "which", lambda name: None)
    monkeypatch.setattr(image.os, "geteuid", lambda: 1000)
    with pytest.raises(ImageBuildError, match=r"apt-get install -y debootstrap"):
        image.ensure_host_package("debootstrap", "debootstrap")


def test_missing_host_package_is_installed_when_root(monkeypatch):
    calls, found = [], {"apt-get": "/usr/bin/apt-get"}
    monkeypatch.setattr(image.shutil, "which", lambda name: found.get(name))
    monkeypatch.setattr(image.os, "geteuid", lambda: 0)

    class Done:
        returncode, stderr = 0, ""

    def run(argv, **kw):
        calls.append(argv)
        if "install" in argv:
            found["debootstrap"] = "/usr/sbin/debootstrap"
        return Done()

    monkeypatch.setattr(image.subprocess, "run", run)
    assert image.ensure_host_package("debootstrap", "debootstrap") == "/usr/sbin/debootstrap"
    assert calls == [["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "debootstrap"]]
