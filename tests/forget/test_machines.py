"""Any worker can forget any session (issue 33): two "machines" on this one — two homes, two
private Docker daemons — share one PostgreSQL store and one OCI registry (Debian's
docker-registry). Worker A runs a session with a read tool that returns a secret, a sandboxed
write that files it, and an external refund; then A is destroyed (its home deleted, its daemon
stopped and its data root removed). The revocation arrives at worker B through ``unsee serve``:
B7 completes, the state equals B5's counterfactual (a reference machine of its own), the refund
has fired exactly once in the world, B's sandbox came from the registry, B's audit finds no copy
on any route (the registry included, and the registry's blob files themselves after its garbage
collection), and a third process that has only the store URL verifies the receipt. Also: A is
SIGKILLed in the middle of its own forget (mid-commit, mid-erasure) and B finishes it."""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tarfile
import textwrap
import urllib.request
from pathlib import Path

import pytest

from tests.support.machines import PrivateDockerd, can_run_daemons

pytestmark = [pytest.mark.docker, pytest.mark.postgres, pytest.mark.registry]

WORKER = textwrap.dedent('''
    import json, os, re, signal, sys
    from pathlib import Path
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    from unsee import Unsee
    from unsee.core import resolve_home
    from unsee.plugins.forget import RevocationEvent
    from unsee.plugins.model import ScriptedChatModel, call_id

    SECRET = os.environ["X_SECRET"]
    WORLD = Path(os.environ["X_WORLD"])  # outside every machine: the payments the refunds made
    TURNS = ["Hello, I'm Dana.", "Please look up T1.", "File it in my case.", "refund 5521 please",
             "What is the status?"]

    def policy(messages, tools):
        last = messages[-1]
        if isinstance(last, ToolMessage):
            return AIMessage(content=f"Result: {last.content}")
        text = str(last.content)
        results = [str(m.content) for m in messages if isinstance(m, ToolMessage)]
        call = None
        if t := re.search(r"\\bT\\d\\b", text):
            call = ("lookup", {"ticket": t.group(0)})
        elif "file it" in text.lower():
            found = [r for r in results if r.startswith("ticket")]
            call = ("save_case", {"note": found[-1] if found else "nothing"})
        elif m := re.search(r"refund (\\d+)", text):
            call = ("refund", {"order": m.group(1), "reason": "broken blender"})
        if call:
            return AIMessage(content="", tool_calls=[{"name": call[0], "args": call[1], "id": call_id(messages),
                                                      "type": "tool_call"}])
        seen = [str(x.content) for x in messages if isinstance(x, (HumanMessage, ToolMessage))]
        return AIMessage(content=f"Noted. So far: {' | '.join(seen[-3:])}")

    def saver():
        url = os.environ.get("UNSEE_STORE")
        if not url:
            from langgraph.checkpoint.memory import InMemorySaver
            return InMemorySaver()
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg.rows import dict_row
        from psycopg_pool import ConnectionPool
        pool = ConnectionPool(url, kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
                              max_size=4)
        s = PostgresSaver(pool)
        s.setup()
        return s

    def build():
        u = Unsee(home=resolve_home(), sandbox=os.environ.get("X_SANDBOX", "docker"))

        @u.tool(effect="read")
        def lookup(ticket: str) -> str:
            """Look up a ticket."""
            return f"ticket {ticket}: card {SECRET} on file, blender broken"

        @u.tool(effect="write", sandboxed=True)
        def save_case(note: str, env) -> str:
            """File a note in the customer's case."""
            env.write_file("case/notes.txt", note.encode())
            return "saved case/notes.txt"

        @u.tool(effect="external")
        def refund(order: str, reason: str) -> str:
            """Refund an order (moves money)."""
            with open(WORLD / os.environ.get("X_PAYMENTS", "payments.log"), "a") as f:
                f.write(f"refund {order} by {os.environ['X_MACHINE']}\\n")
            return f"refund of {order} issued"

        agent = create_agent(ScriptedChatModel(policy=policy), [lookup, save_case, refund],
                             system_prompt="You are support.", middleware=[u.middleware()], checkpointer=saver())
        return u, agent

    def factory():
        return build()[1]

    def die_at(step):
        """SIGKILL this process when the forget or the erasure reaches ``step`` (a real crash)."""
        from unsee.middleware import faults
        original = faults.point
        def point(name):
            if name == step:
                os.kill(os.getpid(), signal.SIGKILL)
            original(name)
        for mod in list(sys.modules.values()):
            for attr in ("point", "fault_point"):
                if getattr(mod, attr, None) is original:
                    setattr(mod, attr, point)

    def state(u, agent):
        cfg = {"configurable": {"thread_id": "dana"}}
        msgs = agent.get_state(cfg).values["messages"]
        note = u.environments.env("dana").read_file("case/notes.txt").decode()
        return {"messages": [[type(m).__name__, str(m.content)] for m in msgs], "note": note}

    if __name__ == "__main__":
        mode = sys.argv[1]
        u, agent = build()
        if mode in ("run", "die"):
            for text in TURNS:
                agent.invoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": "dana"}})
            u.flush()
            if mode == "die":
                die_at(sys.argv[2])
                u.forget("dana", RevocationEvent(target=SECRET, event_id=sys.argv[3]))
                raise SystemExit("the forget was not killed")
            print("RAN", flush=True)
        elif mode == "reference":  # B5 on a machine of its own: reset and replay from scratch
            for text in TURNS:
                agent.invoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": "dana"}})
            u.forget("dana", RevocationEvent(target=SECRET), "B5")
            print("STATE" + json.dumps(state(u, agent)), flush=True)
        elif mode == "check":
            out = state(u, agent)
            audit = u.audit("dana", SECRET, agent=agent)
            out["audit"] = {r.route: r.copies for r in audit.routes}
            out["audit_notes"] = {r.route: r.notes for r in audit.routes if r.notes}
            out["unreachable"] = audit.unreachable
            print("STATE" + json.dumps(out), flush=True)
        u.close()
''')

EVENT = "ev-machines"


@pytest.fixture
def machines(request):
    why = can_run_daemons()
    if why:
        pytest.skip(why) if os.environ.get("UNSEE_REQUIRE_DOCKER") != "1" else pytest.fail(why)
    made = []

    def make(name: str) -> PrivateDockerd:
        d = PrivateDockerd(name)
        made.append(d)
        d.start()
        d.build_image()
        return d

    yield make
    for d in made:
        d.stop()


def _env(tmp_path: Path, machine: str, home: Path, daemon: PrivateDockerd | None, store: str, registry: str,
         secret: str) -> dict[str, str]:
    env = {**os.environ, "UNSEE_HOME": str(home), "UNSEE_STORE": store, "UNSEE_REGISTRY": registry,
           "X_SECRET": secret, "X_WORLD": str(tmp_path / "world"), "X_MACHINE": machine,
           "UNSEE_LEASE_TTL": "3", "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    if daemon is not None:
        env.update(daemon.env())
    return env


def _run(env: dict, *args: str, cwd: Path, expect_kill: bool = False) -> str:
    res = subprocess.run([sys.executable, str(cwd / "xmachines.py"), *args], env=env, cwd=cwd,
                         capture_output=True, text=True, timeout=900)
    if expect_kill:
        assert res.returncode == -9, (res.returncode, res.stdout, res.stderr[-3000:])
    else:
        assert res.returncode == 0, res.stdout + res.stderr[-4000:]
    return res.stdout


def _state(out: str) -> dict:
    line = next(ln for ln in out.splitlines() if ln.startswith("STATE"))
    return json.loads(line[5:])


def _serve_and_revoke(env: dict, cwd: Path, secret: str) -> dict:
    token = "t0ken"
    serve = subprocess.Popen([sys.executable, "-m", "unsee", "serve", "--token", token, "--port", "0",
                              "--agent", "xmachines:factory"], env=env, cwd=cwd,
                             stdout=subprocess.PIPE, stderr=open(cwd / "serve.err", "w"), text=True)
    try:
        line = serve.stdout.readline()
        m = re.search(r":(\d+)/v1/revocations", line)
        assert m, line + (cwd / "serve.err").read_text()
        body = json.dumps({"session_id": "dana", "event": {"target": secret, "event_id": EVENT}}).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{m.group(1)}/v1/revocations", data=body, method="POST",
                                     headers={"Authorization": f"Bearer {token}",
                                              "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=600) as res:
                return {"status": res.status, **json.loads(res.read())}
        except urllib.error.HTTPError as e:
            return {"status": e.code, **json.loads(e.read() or b"{}"), "log": (cwd / "serve.err").read_text()}
    finally:
        serve.terminate()
        serve.wait(timeout=60)


def _registry_blob_copies(needle: bytes) -> int:
    """Copies of ``needle`` in the registry's own blob files (gzip layers opened, tars read): what
    is left on its disk, independent of unsee's audit."""
    root = Path(os.environ["UNSEE_REGISTRY_DIR"]) / "storage"
    n = 0
    for p in root.rglob("data"):
        raw = p.read_bytes()
        n += raw.count(needle)
        try:
            raw = gzip.decompress(raw)
            n += raw.count(needle)
        except (OSError, EOFError):
            pass
        try:
            with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
                for member in tar:
                    if member.isfile():
                        n += tar.extractfile(member).read().count(needle)
        except (tarfile.TarError, EOFError, OSError):  # not a tar (a manifest, a config), or one being uploaded
            pass
    return n


def _reference(tmp_path: Path, secret: str) -> dict:
    """B5 on a machine of its own (a SQLite home, a local sandbox, its own payments file)."""
    env = {**os.environ, "UNSEE_HOME": str(tmp_path / "ref-home"), "X_SECRET": secret,
           "X_WORLD": str(tmp_path / "world"), "X_MACHINE": "ref", "X_SANDBOX": "local",
           "X_PAYMENTS": "reference-payments.log",
           "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    for k in ("UNSEE_STORE", "UNSEE_REGISTRY"):
        env.pop(k, None)
    return _state(_run(env, "reference", cwd=tmp_path))


@pytest.mark.parametrize("die_at", [None, "commit:store", "erase:sandbox"])
def test_a_session_is_forgotten_on_another_machine(tmp_path, machines, pg_url, registry, die_at):
    secret = f"5309-{secrets.randbelow(10**6):06d}"  # nothing else in the shared registry holds it
    (tmp_path / "xmachines.py").write_text(WORKER)
    (tmp_path / "world").mkdir()
    home_a, home_b = tmp_path / "machine-a", tmp_path / "machine-b"
    daemon_a = machines("a")
    env_a = _env(tmp_path, "a", home_a, daemon_a, pg_url, registry, secret)
    if die_at is None:
        _run(env_a, "run", cwd=tmp_path)
    else:  # A begins the forget itself and is SIGKILLed at that step
        _run(env_a, "die", die_at, EVENT, cwd=tmp_path, expect_kill=True)
    assert (tmp_path / "world" / "payments.log").read_text().splitlines() == ["refund 5521 by a"]
    assert _registry_blob_copies(secret.encode()) > 0  # A's sandbox snapshots, off the machine

    # machine A is gone: its home, its daemon and every image and container on it
    shutil.rmtree(home_a)
    daemon_a.stop()

    daemon_b = machines("b")
    env_b = _env(tmp_path, "b", home_b, daemon_b, pg_url, registry, secret)
    home_b.mkdir()
    answer = _serve_and_revoke(env_b, tmp_path, secret)
    assert answer["status"] == 200 and answer.get("committed"), answer

    # B7 at B == B5 at a reference machine; the refund fired once in the world
    after = _state(_run(env_b, "check", cwd=tmp_path))
    reference = _reference(tmp_path, secret)
    assert after["messages"] == reference["messages"]
    assert after["note"] == reference["note"] and secret not in after["note"]
    assert (tmp_path / "world" / "payments.log").read_text().splitlines() == ["refund 5521 by a"]

    # B's sandbox came from the registry: every snapshot image on B's daemon was pulled from it
    pulled = [img for img in daemon_b.client().images.list()
              if any(d.startswith(registry + "/") for d in img.attrs.get("RepoDigests") or [])]
    assert pulled, "no image on B came from the registry"

    # no copy on any route (the registry's included), nothing unreachable left unnamed
    print(json.dumps({k: after[k] for k in ("audit", "audit_notes", "unreachable")}, indent=1))
    assert sum(after["audit"].values()) == 0, after
    assert any("registry" in name or "sandbox" in name for name in after["audit"]), after["audit"]
    assert _registry_blob_copies(secret.encode()) == 0

    # a third process with only the store URL verifies the receipt
    third = {**os.environ, "UNSEE_HOME": str(tmp_path / "auditor"), "UNSEE_STORE": pg_url}
    third.pop("UNSEE_RECEIPT_KEY", None)
    res = subprocess.run([sys.executable, "-m", "unsee", "receipt", "verify", EVENT], env=third, cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
