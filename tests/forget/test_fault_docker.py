"""The Docker daemon goes away under a forget (a real SIGTERM of the private dockerd that
``scripts/docker-up.sh`` started, then a real restart with the same command line and data-root).

Whatever step of the replay meets the stopped daemon, the forget ends in seconds with a typed
error: before any commit began (``DaemonLost`` from the replay's sandboxed write, or
``ReplayIncomplete`` when only the replay's sandbox snapshots failed) the old state is intact;
once the commit began (``CommitInterrupted``) it is journaled. Once the daemon is back, a retry
with the same event completes it (rolls it forward), the external refund never fires again, and
the session, its sandbox (as a later process restores it) and its records hold no copy of the
target."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from unsee import RevocationEvent
from unsee.middleware.errors import UnseeError
from unsee.middleware import faults
from unsee.plugins.forget import CommitInterrupted, ReplayIncomplete
from unsee.sandbox.errors import DaemonLost, SandboxError

pytestmark = pytest.mark.docker

CFG = {"configurable": {"thread_id": "t1"}}
FORGET_BOUND_S = 60  # a forget against a stopped daemon must end (with an error) well within this


def _erasure_agents():
    """tests/support/erasure_agents.py (the real create_agent scenario with a sandboxed tool)."""
    from tests.support import erasure_agents

    return erasure_agents


# -- the private daemon ---------------------------------------------------------------------


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie is gone (not yet reaped)
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def _docker_answers() -> bool:
    if shutil.which("docker"):
        try:
            return subprocess.run(["docker", "info"], capture_output=True, timeout=10).returncode == 0
        except subprocess.TimeoutExpired:
            return False
    from unsee.sandbox.docker_env import daemon_unavailable_reason

    return daemon_unavailable_reason() is None


class PrivateDaemon:
    """The dockerd that docker-up.sh started: stopped for real, restarted with its own command line
    (same data-root, so the images survive; --live-restore keeps the session's container running)."""

    def __init__(self) -> None:
        d = os.environ.get("UNSEE_DOCKERD_DIR", "")
        pidfile = Path(d) / "dockerd.pid" if d else None
        if not d or not pidfile.is_file():
            pytest.skip("the Docker daemon is not one this run started (no $UNSEE_DOCKERD_DIR/dockerd.pid "
                        "from scripts/docker-up.sh): it is not ours to stop")
        pid = int(pidfile.read_text().strip())
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:-1]
        except OSError:
            pytest.skip(f"the private dockerd (pid {pid} in {pidfile}) is not running")
        if not argv or not os.path.basename(argv[0]).startswith(b"dockerd"):
            pytest.skip(f"pid {pid} in {pidfile} is not a dockerd ({argv[:1]!r})")
        self.dir, self.pidfile, self.pid, self.argv = Path(d), pidfile, pid, [a.decode() for a in argv]

    def stop(self, timeout: float = 30.0) -> None:
        os.kill(self.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while _alive(self.pid):
            if time.monotonic() > deadline:
                os.kill(self.pid, signal.SIGKILL)
                deadline += 10
            time.sleep(0.05)

    def start(self, timeout: float = 60.0) -> None:
        """The same command line, detached (it outlives this test, as the one docker-up.sh started)."""
        with open(self.dir / "dockerd.log", "ab") as log:
            proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        self.pid = proc.pid
        (self.dir / "dockerd.launcher.pid").write_text(f"{proc.pid}\n")
        deadline = time.monotonic() + timeout
        while not _docker_answers():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"dockerd did not come back (rc={proc.poll()}); see {self.dir / 'dockerd.log'}")
            time.sleep(0.2)

    def ensure_running(self) -> None:
        if not _alive(self.pid):
            self.start()


# -- the old state ---------------------------------------------------------------------------


def live(agent) -> list:
    msgs = agent.get_state(CFG).values.get("messages", [])
    return [(type(m).__name__, str(m.content), [(c["name"], c["args"]) for c in getattr(m, "tool_calls", []) or []])
            for m in msgs]


def payments(home: Path) -> list[str]:
    p = home / "payments.log"
    return p.read_text().splitlines() if p.exists() else []


def old_state(u, agent, home: Path) -> dict:
    SECRET = _erasure_agents().SECRET
    info = u.session("t1")
    state = {
        "live": live(agent),
        "sandbox": u.environments.env("t1").read_file("case/notes.txt"),
        "ledger": {c.call_id: (c.tool, c.effect, c.status, c.args_json) for c in u.ledger.calls()},
        "session": (info.incomplete, info.failures),
        "sessions": sorted(s.session_id for s in u.sessions()),
        "artifacts": [a.id for a in u.store.artifacts("t1")],
        "contents": u.store.contents("t1"),
        "checkpoints": [c.id for c in u.store.checkpoints("t1")],
        "pending": u.store.commits.pending("t1"),
        "store": sorted((tuple(i.namespace), i.key, json.dumps(i.value))
                        for i in agent.store.inner.search((), limit=100)),
        "payments": payments(home),
    }
    assert SECRET in json.dumps(state["live"]) and SECRET.encode() in state["sandbox"]
    return state


def _forget_bounded(u, event):
    """``u.forget`` in a thread: (its result or exception, seconds); fails the test if it hangs."""
    box: dict = {}

    def go():
        t0 = time.monotonic()
        try:
            box["result"] = u.forget("t1", event)
        except BaseException as exc:  # noqa: BLE001 - what the forget raised is the subject
            box["error"] = exc
        box["s"] = time.monotonic() - t0

    t = threading.Thread(target=go, name="forget-under-fault", daemon=True)
    t.start()
    t.join(FORGET_BOUND_S)
    assert not t.is_alive(), f"the forget hung (> {FORGET_BOUND_S} s) with the Docker daemon stopped"
    return box.get("result"), box.get("error"), box["s"]


def _made_by_unsee() -> tuple[set[str], set[str]]:
    """(container ids, image ids) the daemon holds with unsee's label (base images excluded)."""
    from unsee.sandbox.docker_env import LABEL_ROLE, LABEL_SANDBOX, docker_client

    client, label = docker_client(), {"label": f"{LABEL_SANDBOX}=1"}
    return ({c.id for c in client.containers.list(all=True, filters=label)},
            {i.id for i in client.images.list(all=True, filters=label) if (i.labels or {}).get(LABEL_ROLE) != "base"})


def _remove_made_since(before: tuple[set[str], set[str]]) -> None:
    """Remove the containers and images made since ``before`` (the failed replay's shadow could not
    be removed while the daemon was down: docker_env logs "cleanup() removes leftovers")."""
    import docker.errors

    from unsee.sandbox.docker_env import docker_client

    client = docker_client()
    containers, images = _made_by_unsee()
    for cid in containers - before[0]:
        try:
            client.api.remove_container(cid, force=True)
        except docker.errors.APIError:
            pass
    new = [i for i in client.images.list(all=True) if i.id in images - before[1]]
    for img in sorted(new, key=lambda i: i.attrs.get("Created", ""), reverse=True):  # children first
        try:
            client.images.remove(img.id, force=True)
        except docker.errors.APIError:
            pass


def _later_process_sandbox(home: Path) -> bytes:
    """The case note as a later process sees it: the sandbox restored from the session's latest
    snapshot in the on-disk registry (what ``unsee forget --agent`` in another process restores)."""
    from unsee.sandbox.docker_env import DockerEnvironment

    reg = json.loads((home / "sandboxes" / "registry.json").read_text())
    _, _, _, ref = reg["snapshots"][reg["latest"]["t1"]]
    env = DockerEnvironment(ref)
    try:
        return env.read_file("case/notes.txt")
    finally:
        env.close()


def _checkpoints(u) -> list:
    """The session's checkpoints as (kind, turn, has a sandbox snapshot)."""
    return [(c.kind.value, c.turn, bool(c.env_snapshot_id)) for c in u.store.checkpoints("t1")]


# Where the daemon stops, and what the forget raises then:
# - at the first replayed turn: the replay's sandboxed write (save_case) meets it -> DaemonLost;
# - at the last one (after that write): only the replay's turn-boundary sandbox snapshot fails,
#   which the recorder counts without stopping the run -> ReplayIncomplete, nothing committed;
# - once the replay is done: the snapshot of the new sandbox, taken before the commit begins (its
#   key goes into the commit's journal row, for a roll-forward on another machine) -> DaemonLost,
#   nothing begun.
@pytest.mark.parametrize(("step", "raised"), [("replay:turn:2", DaemonLost), ("replay:turn:6", ReplayIncomplete),
                                              ("replay:done", DaemonLost)])
def test_daemon_stopped_mid_replay_then_retry(tmp_path, monkeypatch, step, raised):
    daemon = PrivateDaemon()  # skips when the daemon is not ours
    ea = _erasure_agents()
    home = tmp_path / "home"
    home.mkdir()
    preexisting = _made_by_unsee()
    u, agent, close = ea.build(home, sandbox="docker")
    try:
        ea.run(agent, "t1")
        before = old_state(u, agent, home)
        checkpoints_before = _checkpoints(u)
        assert len(before["payments"]) == 1  # the refund fired once, when recorded

        stopped: list[str] = []
        real_point = faults.point

        def point(name: str) -> None:
            if name == step and not stopped:
                stopped.append(name)
                daemon.stop()  # a real SIGTERM; returns once the daemon is gone
            real_point(name)

        monkeypatch.setattr(faults, "point", point)
        event = RevocationEvent(target=ea.SECRET)
        try:
            result, error, seconds = _forget_bounded(u, event)
        finally:
            monkeypatch.undo()
            daemon.ensure_running()  # the rest of the suite needs it, whatever happened above
        assert stopped == [step], f"the forget never reached {step}"
        assert result is None, f"the forget committed with the Docker daemon stopped: {result}"
        assert isinstance(error, (UnseeError, SandboxError)), (
            f"untyped error from a forget with the daemon stopped: {type(error).__module__}."
            f"{type(error).__name__}: {error}")
        assert isinstance(error, raised), f"{type(error).__name__}: {error}"
        assert seconds < FORGET_BOUND_S
        print(f"\nforget with the daemon stopped at {step}: {type(error).__module__}."
              f"{type(error).__name__} after {seconds:.2f} s: {error}")

        after = old_state(u, agent, home) if not isinstance(error, CommitInterrupted) else None
        if after is None:
            # A begun commit: journaled under the event's id, the retry rolls it forward.
            assert error.event_id == event.event_id
            assert [p[0] for p in u.store.commits.pending("t1")] == [event.event_id]
            assert payments(home) == before["payments"]
        else:
            # Nothing begun: the old state is intact (live state, sandbox, records, store, journal).
            ledger_before, ledger_after = before.pop("ledger"), after.pop("ledger")
            assert after == before
            # The ledger logs every real execution: the recorded calls keep their facts; the only
            # new rows are the replay's own sandbox-local (read/write) attempts against its shadow,
            # recorded as they ended (the write that met the stopped daemon: "failed"); never an
            # external call.
            assert {k: v for k, v in ledger_after.items() if k in ledger_before} == ledger_before
            new = {k: v for k, v in ledger_after.items() if k not in ledger_before}
            assert all(effect in ("read", "write") for _, effect, _, _ in new.values()), new
            assert not any(ea.SECRET in args for *_, args in new.values())  # sanitized inputs

        # The daemon is back: the retry (same event) completes it.
        report = u.forget("t1", event)
        assert report.committed
        assert ea.SECRET not in json.dumps(live(agent))
        assert ea.SECRET.encode() not in u.environments.env("t1").read_file("case/notes.txt")
        assert payments(home) == before["payments"]  # the external refund never fired again
        refunds = [c for c in u.ledger.calls() if c.effect == "external"]
        assert [(c.tool, c.status) for c in refunds] == [("refund", "done")]
        assert not u.store.commits.pending("t1")
        assert sorted(s.session_id for s in u.sessions()) == before["sessions"]  # no scratch thread left
        # the committed recording is complete: every checkpoint that had a sandbox snapshot has one
        info = u.session("t1")
        assert not info.incomplete and _checkpoints(u) == checkpoints_before
        # a later process continues from the forgotten sandbox, and no copy of the target is left
        assert ea.SECRET.encode() not in _later_process_sandbox(home)
        assert report.erased_clean and u.audit("t1", ea.SECRET).clean, report.notes
    finally:
        close()
        _remove_made_since(preexisting)
