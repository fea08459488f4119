"""Two "machines" on this one, for tests/forget/test_machines.py: a private Docker daemon each
(its own data root, socket and containerd; no network, like scripts/docker-up.sh's) and the
sandbox image built on it from the cached rootfs (what a fresh worker machine does)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path


class PrivateDockerd:
    """``dockerd`` under a short temp dir (unix socket paths are limited to 108 bytes)."""

    def __init__(self, name: str):
        self.dir = Path(tempfile.mkdtemp(prefix=f"/tmp/ud-{name}-"))
        self.host = f"unix://{self.dir}/docker.sock"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 60.0) -> "PrivateDockerd":
        for sub in ("data", "exec"):
            (self.dir / sub).mkdir(exist_ok=True)
        log = open(self.dir / "dockerd.log", "ab")
        self.proc = subprocess.Popen(
            ["dockerd", "--bridge=none", "--iptables=false", "--ip6tables=false", "--live-restore",
             "--data-root", str(self.dir / "data"), "--exec-root", str(self.dir / "exec"),
             "--pidfile", str(self.dir / "dockerd.pid"), "-H", self.host],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while not self.reachable():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"dockerd did not come up: {(self.dir / 'dockerd.log').read_text()[-2000:]}")
            time.sleep(0.2)
        return self

    def reachable(self) -> bool:
        import docker

        try:
            docker.DockerClient(base_url=self.host, timeout=5).ping()
            return True
        except Exception:
            return False

    def client(self):
        import docker

        return docker.DockerClient(base_url=self.host, timeout=120)

    def build_image(self) -> None:
        """The default sandbox image (Debian + python3), as `unsee sandbox build-image` makes it."""
        subprocess.run([sys.executable, "-m", "unsee.sandbox.cli", "build-image", "--flavor", "python"],
                       env={**os.environ, "DOCKER_HOST": self.host}, check=True, capture_output=True,
                       timeout=600)

    def env(self) -> dict[str, str]:
        return {"DOCKER_HOST": self.host}

    def stop(self) -> None:
        """The machine is gone: containers removed, the daemon stopped, its data root deleted."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                c = self.client()
                for container in c.containers.list(all=True):
                    container.remove(force=True)
            except Exception:
                pass
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()
                  if len(line.split()) > 1 and line.split()[1].startswith(str(self.dir))]
        for m in sorted(mounts, reverse=True):
            subprocess.run(["umount", "-l", m], capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)


def can_run_daemons() -> str | None:
    """None when private daemons can be started here (root and dockerd), else why not."""
    if os.geteuid() != 0:
        return "starting private Docker daemons needs root"
    if shutil.which("dockerd") is None:
        return "no dockerd (apt-get install docker.io; make test does)"
    return None
