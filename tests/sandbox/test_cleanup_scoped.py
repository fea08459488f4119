"""``unsee sandbox cleanup`` stays in its home: two homes on one daemon, one home's
cleanup leaves the other's containers and images; ``--all`` asks, then removes both.

The Docker test's ``--all --yes`` removes every unsee object on the daemon (base
images aside), as a user's would: it runs only on a daemon scripts/run-tests.sh
started for the suite ($UNSEE_DOCKERD_STARTED), where nothing else is live; on a
developer's own daemon that step is replaced by home B's own cleanup.
"""

from __future__ import annotations

import io
import json
import os

import pytest

from unsee.cli import main
from unsee.sandbox import OwnerIdError, owner_id
from unsee.sandbox.docker_env import LABEL_HOME, LABEL_ROLE, DockerEnvironment


def test_home_id_is_made_once_and_kept(tmp_path):
    home = tmp_path / "home"
    assert owner_id(home, create=False) is None and not home.exists()  # reading makes nothing
    first = owner_id(home)
    assert owner_id(home) == first == owner_id(home, create=False)
    assert [p.name for p in home.iterdir()] == ["home_id"]  # no temp file left behind
    (tmp_path / "garbled").mkdir()
    (tmp_path / "garbled" / "home_id").write_text("not an id")
    with pytest.raises(OwnerIdError, match="does not hold a home id"):
        owner_id(tmp_path / "garbled")
    assert (tmp_path / "garbled" / "home_id").read_text() == "not an id"  # never overwritten


def _cleanup(home, *flags: str) -> int:
    return main(["--home", str(home), "sandbox", "cleanup", *flags])


def test_bad_flags_exit_2_and_no_daemon_exits_3(tmp_path, monkeypatch, capsys):
    assert _cleanup(tmp_path, "--include-base") == 2  # the base images are every home's
    err = capsys.readouterr().err
    assert err.startswith("error: --include-base needs --all") and err.count("\n") == 1
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    assert _cleanup(tmp_path) == 3
    err = capsys.readouterr().err
    assert err.startswith("error: no Docker daemon") and err.count("\n") == 1
    assert not (tmp_path / "home_id").exists()  # a cleanup never makes a home id


@pytest.mark.docker
def test_cleanup_of_one_home_leaves_the_other(docker_image, tmp_path, monkeypatch, capsys):
    homes = {name: tmp_path / name for name in "ab"}
    envs = []
    for name, home in homes.items():  # a crashed process per home: a container, a snapshot, a shadow
        env = DockerEnvironment(docker_image, owner=owner_id(home), keep_snapshots=True)
        envs.append(env)
        env.write_file("x", name)
        env.snapshot()
        env.shadow()
    client = envs[0].client

    def left(name: str) -> tuple[int, int]:
        sel = {"label": [f"{LABEL_HOME}={owner_id(homes[name])}"]}
        return len(client.containers.list(all=True, filters=sel)), len(client.images.list(all=True, filters=sel))

    try:
        assert left("a") == left("b") == (2, 2)  # container + shadow's; snapshot + shadow's image
        assert _cleanup(homes["a"], "--json") == 0
        report = json.loads(capsys.readouterr().out)
        assert (report["scope"], report["containers"], report["images"]) == ("home", 2, 2), report
        assert left("a") == (0, 0) and left("b") == (2, 2)

        monkeypatch.setattr("sys.stdin", io.StringIO("n\n"))  # --all asks; "no" removes nothing
        assert _cleanup(homes["a"], "--all") == 1
        assert left("b") == (2, 2)

        if not os.environ.get("UNSEE_DOCKERD_STARTED"):  # a developer's own daemon: never wipe it
            assert _cleanup(homes["b"], "--json") == 0 and left("b") == (0, 0)
            return
        assert _cleanup(homes["a"], "--all", "--yes", "--json") == 0
        report = json.loads(capsys.readouterr().out)
        assert report["scope"] == "all" and report["containers"] >= 2 and report["images"] >= 2, report
        assert left("b") == (0, 0)
        assert client.images.list(filters={"label": [f"{LABEL_ROLE}=base"]})  # base images kept
    finally:
        for env in envs:  # whatever a failed assert left (already removed: no error)
            env.close()
