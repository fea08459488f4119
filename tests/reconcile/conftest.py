"""Fixtures of the reconciliation tests: a world per kind (files, a local HTTP service), the
reference world, and worker processes that reconcile a forget (tests/support/reconcile_worlds.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.reconcile_worlds import COMPENSATOR_SAW, FileWorld, PaymentService, reference_net

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _compensator_log_cleared():
    COMPENSATOR_SAW.clear()
    yield
    COMPENSATOR_SAW.clear()


@pytest.fixture
def service():
    """The local HTTP payment service (stopped after the test)."""
    s = PaymentService().start()
    yield s
    s.stop()


@pytest.fixture(params=["file", "http"])
def world(request, tmp_path):
    """The original world (its inbox holds the target): the bank as files, or as an HTTP service."""
    if request.param == "file":
        yield FileWorld.create(tmp_path / "world")
        return
    s = PaymentService().start()
    yield s
    s.stop()


@pytest.fixture
def reference(tmp_path):
    """``reference(kind, aio=False)``: the world's net state had the agent never seen the target
    (``reference_net``: a fresh agent on a fresh world without it)."""
    return lambda kind, aio=False: reference_net(kind, tmp_path / "reference", aio=aio)


class Workers:
    """Worker processes reconciling a forget (``python -m tests.support.reconcile_worlds``)."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
                    "UNSEE_LOG_LEVEL": "ERROR"}
        self.started: list[subprocess.Popen] = []

    def args(self, home, world: str, event_id: str, *, store=None, run="all", crash=None, idempotent=False,
             retry=False, ready=None, go=None) -> list[str]:
        argv = [sys.executable, "-m", "tests.support.reconcile_worlds", "--home", str(home), "--world", world,
                "--event", event_id, "--run", run]
        argv += ["--store", store] if store else []
        argv += ["--crash", crash] if crash else []
        argv += ["--idempotent"] if idempotent else []
        argv += ["--retry"] if retry else []
        argv += ["--ready", str(ready), "--go", str(go)] if ready else []
        return argv

    def start(self, *a, **kw) -> subprocess.Popen:
        p = subprocess.Popen(self.args(*a, **kw), cwd=ROOT, env=self.env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        self.started.append(p)
        return p

    def finish(self, p: subprocess.Popen, rc: int = 0) -> dict | None:
        out, err = p.communicate(timeout=120)
        assert p.returncode == rc, f"worker exited {p.returncode}, expected {rc}:\n{err[-3000:]}"
        lines = [line for line in out.splitlines() if line.startswith("{")]
        return json.loads(lines[-1]) if lines else None

    def run(self, *a, rc: int = 0, **kw) -> dict | None:
        """Run one worker to its end: its JSON line (None when it printed none: it died)."""
        return self.finish(self.start(*a, **kw), rc)

    def close(self) -> None:
        for p in self.started:
            if p.poll() is None:
                p.kill()
            p.communicate()


@pytest.fixture
def workers(tmp_path):
    w = Workers(tmp_path)
    yield w
    w.close()
