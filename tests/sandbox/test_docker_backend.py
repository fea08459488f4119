"""Docker-only behaviour: isolation settings, labels/cleanup, flattening,
shadow runs leaving the real container untouched, and daemon loss."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest

from unsee.sandbox import DaemonLost, SandboxUnavailable, open_environment
from unsee.sandbox.docker_env import LABEL_ENV, LABEL_ROLE, LABEL_SANDBOX, DockerEnvironment, cleanup
from unsee.sandbox.ledger import Ledger

docker = pytest.mark.docker


@pytest.fixture
def denv(docker_image):
    env = open_environment("docker", image=docker_image)
    yield env
    env.close()


def fs_digest(env) -> str:
    """Every file under the workspace with its mode and checksum (one string)."""
    res = env.exec("find . -print | sort | while read f; do "
                   "if [ -f \"$f\" ]; then echo \"$f $(stat -c %a \"$f\") $(md5sum < \"$f\")\"; "
                   "else echo \"$f $(stat -c %a \"$f\")\"; fi; done").check()
    return res.text


@docker
def test_container_is_locked_down(denv):
    denv.container.reload()
    attrs = denv.container.attrs
    host = attrs["HostConfig"]
    assert host["NetworkMode"] == "none"
    assert host["Memory"] > 0 and host["PidsLimit"] > 0 and host["NanoCpus"] > 0
    assert host["CapDrop"] == ["ALL"]
    assert "no-new-privileges" in host["SecurityOpt"]
    labels = attrs["Config"]["Labels"]
    assert labels[LABEL_SANDBOX] == "1" and labels[LABEL_ENV] == denv.env_id
    assert denv.exec("id -u").text.strip() == "1000"  # non-root

@docker
def test_no_network(denv):
    """Only the loopback interface exists."""
    out = denv.exec("ls /sys/class/net").text.split()
    assert out == ["lo"]


@docker
def test_cleanup_removes_labelled_leftovers(docker_image):
    env = DockerEnvironment(docker_image, keep_snapshots=True)
    env.write_file("x", b"1")
    snap = env.snapshot()
    sh = env.shadow()
    client = env.client
    env_filter = {"label": [f"{LABEL_ENV}={env.env_id}"]}
    assert client.containers.list(all=True, filters=env_filter)
    # simulate a crashed process: nothing closed, then cleanup() by label
    report = cleanup(env_id=env.env_id)
    assert report.containers >= 1 and report.images >= 1 and not report.failed
    assert client.containers.list(all=True, filters=env_filter) == []
    assert client.images.list(all=True, filters=env_filter) == []
    assert client.containers.list(all=True, filters={"label": [f"{LABEL_ENV}={sh.env_id}"]}) == []  # its shadow too
    assert client.images.list(filters={"label": [f"{LABEL_ROLE}=base"]})  # base image kept
    env._closed = sh._closed = True  # already removed behind their back
    del snap


@docker
def test_close_removes_container_and_snapshots(docker_image):
    env = DockerEnvironment(docker_image)
    env.snapshot()
    sh = env.shadow()
    ids = [env.env_id, sh.env_id]
    env.close()  # closes the shadow too
    client = env.client
    for i in ids:
        assert client.containers.list(all=True, filters={"label": [f"{LABEL_ENV}={i}"]}) == []
        assert client.images.list(all=True, filters={"label": [f"{LABEL_ENV}={i}", f"{LABEL_ROLE}=snapshot"]}) == []


@docker
def test_flatten_keeps_depth_bounded(docker_image):
    env = DockerEnvironment(docker_image, flatten_every=4)
    try:
        snaps = []
        for i in range(7):
            env.write_file(f"f{i}", str(i).encode(), mode=0o700 if i % 2 else 0o644)
            if i == 0:
                env.write_file("doomed", b"d")
            if i == 1:
                env.remove_file("doomed")  # a deletion inside the flattened chain
            snaps.append(env.snapshot())
        depths = [len(env.client.images.get(s.ref).attrs["RootFS"]["Layers"]) for s in snaps]
        assert max(depths) < 4, depths
        assert 1 in depths  # at least one flattened snapshot
        flat = snaps[depths.index(1)]
        env.write_file("f0", b"clobbered")
        env.restore(flat)
        assert env.read_file("f0") == b"0"
        with pytest.raises(FileNotFoundError):
            env.read_file("doomed")
        assert env.file_mode("f1") == 0o700
        env.container.reload()
        assert env.user == env.container.attrs["Config"]["User"]  # flatten kept USER
        assert env.exec("pwd").text.strip() == "/workspace"  # and WORKDIR
    finally:
        env.close()


@docker
def test_shadow_run_leaves_real_container_untouched(denv):
    denv.write_file("ledger.txt", b"balance=100\n")
    denv.write_file("bin/tool", b"#!/bin/sh\necho tool\n", mode=0o755)
    denv.exec("mkdir -p data && echo keep > data/k").check()
    before = fs_digest(denv)
    real_id = denv.container.id
    with denv.shadow() as sh:
        assert fs_digest(sh) == before
        sh.exec("rm -rf ./* && echo hacked > ledger.txt && chmod 600 ledger.txt").check()
        sh.write_file("new", b"n")
        assert sh.read_file("ledger.txt") == b"hacked\n"
        assert sh.container.id != real_id
    assert denv.container.id == real_id
    assert fs_digest(denv) == before


def test_no_daemon_is_a_typed_error(monkeypatch, tmp_path):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/nobody-home.sock")
    with pytest.raises(SandboxUnavailable) as ei:
        open_environment("docker")
    assert "dockerd" in str(ei.value) or "docker.io" in str(ei.value)
    env = open_environment("auto", root=tmp_path / "ws", image="ignored")
    try:
        assert env.backend == "local"
    finally:
        env.close()


# -- daemon loss, on a private dockerd this test starts and kills ----------------------


def _dockerd_cmd(d: Path) -> list[str]:
    return ["dockerd", "--bridge=none", "--iptables=false", "--ip6tables=false", "--live-restore",
            "--data-root", str(d / "data"), "--exec-root", str(d / "exec"),
            "--pidfile", str(d / "pid"), "-H", f"unix://{d}/docker.sock"]


def _reap_containerd(d: Path) -> None:
    """A killed dockerd's containerd may outlive it; a restart must not find it."""
    pidfile = d / "exec" / "containerd" / "containerd.pid"
    try:
        pid = int(pidfile.read_text().strip())
    except (OSError, ValueError):
        return
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, signal.SIGTERM if time.monotonic() < deadline - 5 else signal.SIGKILL)
        except ProcessLookupError:
            return
        time.sleep(0.1)


def _start_dockerd(d: Path):
    import docker as sdk

    _reap_containerd(d)
    log = open(d / "dockerd.log", "ab")
    proc = subprocess.Popen(_dockerd_cmd(d), stdout=log, stderr=log, start_new_session=True)
    deadline = time.monotonic() + 30
    while True:
        try:
            client = sdk.DockerClient(base_url=f"unix://{d}/docker.sock", timeout=60)
            client.ping()
            return proc, client
        except Exception:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"private dockerd did not start: {(d / 'dockerd.log').read_text()[-500:]}")
            time.sleep(0.1)


@pytest.fixture
def private_dockerd():
    if os.geteuid() != 0 or not shutil.which("dockerd"):
        pytest.skip("needs root and dockerd to run a private daemon")
    d = Path(tempfile.mkdtemp(prefix="unsee-dockerd-test."))
    state = {"dir": d}
    state["proc"], state["client"] = _start_dockerd(d)
    yield state
    # bring it back if the test killed it, remove its containers, stop it for good
    if state["proc"].poll() is not None:
        state["proc"], state["client"] = _start_dockerd(d)
    try:
        for c in state["client"].containers.list(all=True):
            c.remove(force=True)
    finally:
        state["proc"].send_signal(signal.SIGTERM)
        try:
            state["proc"].wait(timeout=20)
        except subprocess.TimeoutExpired:
            state["proc"].kill()
            state["proc"].wait()
        subprocess.run(["sh", "-c", f"grep -o ' {d}[^ ]*' /proc/mounts | sort -r | xargs -r umount -l"],
                       check=False)
        shutil.rmtree(d, ignore_errors=True)


@docker
def test_daemon_lost_mid_exec(private_dockerd, tmp_path):
    from unsee.sandbox.image import build_image

    client = private_dockerd["client"]
    tag = build_image("busybox", client=client)
    env = DockerEnvironment(tag, client=client)
    ledger = Ledger(tmp_path / "ledger.sqlite")
    fired = []

    def deploy():
        fired.append(1)
        return env.exec("sleep 20; echo done", timeout=60).text

    err: list[BaseException] = []

    def call():
        try:
            ledger.run("s1", "deploy", {"v": 1}, deploy, effect="external")
        except BaseException as exc:  # noqa: BLE001
            err.append(exc)

    t = threading.Thread(target=call)
    t.start()
    time.sleep(1.0)  # the exec is in flight
    private_dockerd["proc"].send_signal(signal.SIGKILL)
    private_dockerd["proc"].wait()
    t.join(timeout=30)
    assert not t.is_alive()
    assert len(err) == 1 and isinstance(err[0], DaemonLost), err
    assert isinstance(err[0], ConnectionError)
    # later calls fail the same typed way
    with pytest.raises(DaemonLost):
        env.snapshot()
    # the ledger is intact and will not fire the call again
    assert ledger.integrity_ok()
    (rec,) = ledger.calls(session="s1")
    assert rec.status == "failed" and "DaemonLost" in rec.error
    ledger2 = Ledger(tmp_path / "ledger.sqlite")  # a retry in a "new process"
    out = ledger2.run("s1", "deploy", {"v": 1}, deploy, effect="external")
    assert out.disposition == "failed"
    assert fired == [1]
    env._closed = True  # its daemon is gone; the fixture removes the container
    ledger.close()
    ledger2.close()
