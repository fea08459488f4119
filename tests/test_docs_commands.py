"""Every command shown in README.md and docs/*.md runs as shown.

The commands are read from the fenced code blocks of the docs (not from a copy
here), so a doc line that changes or a new one without a run below fails
``test_every_documented_command_has_a_run``. Each documented line maps to the
concrete commands that exercise it (placeholders filled with a real session,
target, file or receiver); they run in a directory where ``unsee demo`` made
the default home ``./.unsee``, exactly as a reader would run them.
"""

from __future__ import annotations

import http.server
import json
import re
import shlex
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
UNSEE = [sys.executable, "-m", "unsee"]

# documented line -> the concrete command lines that run it (shell syntax; {x} filled below).
RUNS: dict[str, list[str]] = {
    "unsee sessions": ["unsee sessions"],
    "unsee graph SESSION --format mermaid|dot|json": [
        "unsee graph demo --format mermaid", "unsee graph demo --format dot", "unsee graph demo --format json",
        "unsee graph demo --target 'updates by email'"],
    "unsee export SESSION --otlp-endpoint URL": ["unsee export demo --otlp-endpoint http://localhost:4318"],
    "unsee export SESSION --jaeger-json FILE": ["unsee export demo --jaeger-json demo.json"],
    "unsee export SESSION --otlp-endpoint http://localhost:4318": [
        "unsee export demo --otlp-endpoint http://localhost:4318"],
    "unsee export SESSION --otlp-endpoint http://localhost:4317": [
        "unsee export demo --otlp-endpoint http://localhost:4317"],
    "unsee export SESSION --jaeger-json trace.json": ["unsee export demo --jaeger-json trace.json"],
    "unsee forget SESSION --target TEXT [--source ID] [--strategy B7] [--agent module:attribute] [--dry-run] [--json]": [
        "unsee forget demo --target 'updates by email' --dry-run",
        "unsee forget demo --target 'updates by email' --strategy B7 --agent unsee.demo:agent_factory --dry-run --json",
        "unsee forget demo --target 'updates by email' --source user --agent unsee.demo:agent_factory --dry-run"],
    "unsee reconcile EVENT_ID --agent unsee.demo:agent_factory --dry-run": ["RECONCILE_FLOW"],
    "unsee reconcile EVENT_ID --agent unsee.demo:agent_factory --run compensate --yes --retry": ["RECONCILE_FLOW"],
    "unsee reconcile EVENT_ID --agent unsee.demo:agent_factory --yes": ["RECONCILE_FLOW"],
    "unsee forget demo --target 4417-2231 --agent unsee.demo:agent_factory": [
        "unsee forget demo --target 4417-2231 --agent unsee.demo:agent_factory"],
    "unsee view SESSION [--target TEXT] [--event ID] [-o FILE.html] [--serve]": [
        "unsee view demo --target 'updates by email' -o demo.html"],
    "unsee view SESSION [--target TEXT [--source ID]] [--event ID] [-o FILE.html] [--content] [--no-detect] "
    "[--serve [--port N]]": ["unsee view demo --no-detect -o demo-plain.html"],
    "unsee serve --token T [--agent module:attribute]": ["SERVE"],
    "unsee audit SESSION --target TEXT": ["unsee audit demo --target 'no such text'",
                                          "unsee audit demo --target 'no such text' --json"],
    "unsee erase SESSION --target TEXT [--agent module:attribute]": ["ERASE_FLOW"],
    "unsee surface [--agent module:attribute] [--target TEXT]": [
        "unsee surface", "unsee surface --agent unsee.demo:agent_factory --target 'no such text'",
        "unsee surface --agent unsee.demo:agent_factory --marker 'no such text'"],
    "unsee surface --agent unsee.demo:agent_factory --target TEXT --json": [
        "unsee surface --agent unsee.demo:agent_factory --target 'no such text' --json"],
    "unsee receipt verify FILE [--target TEXT]": ["ERASE_FLOW"],
    "unsee sandbox build-image | cleanup": ["DOCKER unsee sandbox build-image",
                                            "DOCKER unsee sandbox cleanup --env no-such-env"],
    "unsee sandbox build-image": ["DOCKER unsee sandbox build-image"],
    "unsee sandbox build-image --flavor busybox": ["DOCKER unsee sandbox build-image --flavor busybox"],
    "python -m unsee.sandbox.cli build-image ...": ["DOCKER python -m unsee.sandbox.cli build-image --flavor busybox"],
    "unsee demo [--model local|scripted]": ["unsee demo --model scripted"],
    "unsee bench agentdojo --suite S --defense detect+forget --verdict late --reconcile compensate|all [--json FILE]": [
        "unsee bench agentdojo --suite banking --defense detect+forget --verdict late --reconcile compensate --limit 1 "
        "--no-pairs --json reconciled.json"],
    "unsee bench agentdojo --suite S --defense D": [
        "unsee bench agentdojo --suite banking --defense ifc+forget --limit 1 --no-pairs"],
    "unsee eval detectors [--detector signals|learned|rules|toolwall-guard|llm-judge|classifier:PATH|module:attr]": [
        "unsee eval detectors --suites banking --attacks direct --detector signals --detector rules --no-hard-cases",
        "unsee eval detectors --suites none --detector learned --no-heldout"],
    "unsee --version": ["unsee --version"],
    "unsee eval forgetting --suite support --strategies all --model scripted --episodes 6 --seed 0 [--json F] [--plot F.png]": [
        "unsee eval forgetting --suite support --strategies B0,B2,B7 --model scripted --episodes 1 --seed 0 "
        "--json forgetting.json --plot forgetting.png"],
    # the tables of docs/evaluation.md, as measured there
    "unsee eval forgetting --suite support --episodes 6 --seed 0": [
        "unsee eval forgetting --suite support --episodes 6 --seed 0"],
    "unsee eval forgetting --suite preference --episodes 6 --seed 0": [
        "unsee eval forgetting --suite preference --episodes 6 --seed 0"],
    "unsee eval forgetting --suite preference --episodes 6 --seed 0 --oracle": [
        "unsee eval forgetting --suite preference --episodes 2 --seed 0 --oracle --strategies B3,B6"],
    "unsee eval forgetting --suite windowed --episodes 6 --seed 0": [
        "unsee eval forgetting --suite windowed --episodes 6 --seed 0"],
    "unsee eval forgetting --suite agentdojo --episodes 8 --seed 0": [
        "unsee eval forgetting --suite agentdojo --episodes 8 --seed 0"],
}
# documented lines that are not run here, and why
NOT_RUN = {
    "make demo": "the demo on the local model: `unsee demo --model local` (test_demo_on_the_local_model)",
    "make test": "this test suite itself",
    "make test-fast": "a part of this test suite (docs/testing.md)",
    "bash scripts/gpu-check.sh prepare": "downloads wheels from PyPI (run by hand; its pieces: tests/model/test_gpu_check.py)",
    "bash scripts/gpu-check.sh a": "needs a lent GPU machine",
    "bash scripts/gpu-check.sh b": "needs a lent GPU machine",
    "bash scripts/gpu-check.sh a --dry-run": "needs what prepare downloads (run by hand; docs/model.md gives its result)",
}
COMMAND = re.compile(r"^(unsee|python -m unsee\S*|make|bash scripts\S*)( |$)")


def documented_commands() -> dict[str, str]:
    """Command lines of every non-Python fenced block -> the doc that shows it."""
    found: dict[str, str] = {}
    for doc in DOCS:
        fence = None
        for line in doc.read_text().splitlines():
            stripped = line.strip()
            if stripped.startswith("```"):
                fence = None if fence is not None else (stripped[3:].strip() or "text")
                continue
            if fence is None or fence in ("python", "json"):
                continue
            cmd = re.sub(r"\s+#.*$", "", stripped.removeprefix("$ ")).strip()
            cmd = re.sub(r"\s{2,}", " ", cmd)
            if COMMAND.match(cmd):
                found.setdefault(cmd, doc.name)
    return found


def test_every_documented_command_has_a_run():
    documented = documented_commands()
    missing = {c: d for c, d in documented.items() if c not in RUNS and c not in NOT_RUN}
    assert not missing, f"documented commands with no run in tests/test_docs_commands.py: {missing}"
    stale = sorted(set(RUNS) - set(documented) - {"unsee --version"})
    assert not stale, f"runs for commands no doc shows any more: {stale}"


# -- the place a reader runs them from -----------------------------------------------------------
@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """A directory whose ./.unsee holds the scripted demo session ``demo`` (its card number
    not yet revoked: the documented forget revokes it)."""
    d = tmp_path_factory.mktemp("reader")
    res = _run(d, "unsee demo --model scripted --session demo --no-forget")
    assert res.returncode == 0, res.stderr[-2000:]
    return d


def _env() -> dict:
    import os

    env = {k: v for k, v in os.environ.items() if k != "UNSEE_HOME"}
    env["COLUMNS"] = "200"
    return env


def _run(cwd: Path, cmd: str, timeout: float = 600) -> subprocess.CompletedProcess:
    argv = shlex.split(cmd)
    if argv[0] == "unsee":
        argv = UNSEE + argv[1:]
    elif argv[0] == "python":
        argv = [sys.executable, *argv[1:]]
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=_env())


# -- OTLP receivers on the documented ports ---------------------------------------------------------
class _HttpReceiver(http.server.ThreadingHTTPServer):
    def __init__(self, port: int):
        self.spans = 0
        outer = self

        class H(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

                req = ExportTraceServiceRequest.FromString(self.rfile.read(int(self.headers["Content-Length"])))
                outer.spans += sum(len(ss.spans) for rs in req.resource_spans for ss in rs.scope_spans)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

        super().__init__(("127.0.0.1", port), H)


def _check_export(workdir: Path, cmd: str, res: subprocess.CompletedProcess, got: int) -> None:
    sent = int(re.search(r"sent (\d+) spans", res.stdout).group(1))
    assert sent > 0 and got == sent, (cmd, res.stdout, got)


def _reconcile_flow(d: Path) -> None:
    """docs/reconcile.md's commands, in the order a reader runs them after a forget: the plan, the
    compensations, the rest, and a second run that finds nothing left (exit 2, nothing paid)."""
    assert _run(d, "unsee demo --model scripted --session demo --no-forget").returncode == 0
    res = _run(d, "unsee forget demo --target 4417-2231 --agent unsee.demo:agent_factory --json")
    assert res.returncode == 0, res.stderr[-2000:]
    event = json.loads(res.stdout)["event_id"]
    agent = "--agent unsee.demo:agent_factory"
    plan = _run(d, f"unsee reconcile {event} {agent} --dry-run --json")
    assert plan.returncode == 0, plan.stderr
    assert {i["action"]: i["state"] for i in json.loads(plan.stdout)["plan"]["items"]} == {
        "compensate": "planned", "run": "planned"}
    for cmd, code in ((f"unsee reconcile {event} {agent} --run compensate --yes --retry", 0),
                      (f"unsee reconcile {event} {agent} --yes", 0), (f"unsee reconcile {event} {agent} --yes", 2)):
        res = _run(d, cmd)
        assert res.returncode == code, (cmd, res.stdout[-1500:], res.stderr[-1500:])
    log = (d / ".unsee" / "payments.log").read_text().split("\n")
    assert [line.split()[0] for line in log if line] == ["refund", "reversal", "refund"]


# -- the runs ---------------------------------------------------------------------------------------
def _cases():
    # One run per distinct command: two doc lines can share a run, and a command that binds a
    # documented port (OTLP's 4318) run twice at once on two workers would find the port taken.
    seen: set[str] = set()
    for doc_line, cmds in RUNS.items():
        for cmd in cmds:
            if cmd in seen:
                continue
            seen.add(cmd)
            marks = [pytest.mark.docker] if cmd.startswith("DOCKER ") else []
            yield pytest.param(doc_line, cmd.removeprefix("DOCKER "), marks=marks, id=cmd.removeprefix("DOCKER "))


@pytest.mark.parametrize("doc_line,cmd", list(_cases()))
def test_documented_command_runs(workdir, grpc_receiver, doc_line, cmd):
    if cmd == "SERVE":
        return _serve(workdir)
    if cmd == "RECONCILE_FLOW":
        import tempfile

        return _reconcile_flow(Path(tempfile.mkdtemp(prefix="reconcile-", dir=workdir.parent)))
    if cmd == "ERASE_FLOW":
        import tempfile

        return _erase_flow(Path(tempfile.mkdtemp(prefix="erase-", dir=workdir.parent)))
    if "--otlp-endpoint" in cmd:
        port = int(cmd.rsplit(":", 1)[1])
        if port == 4317:
            receiver = grpc_receiver(port)  # the documented port: 4317 picks gRPC
            res = _run(workdir, cmd)
            assert res.returncode == 0, res.stderr
            return _check_export(workdir, cmd, res, receiver.spans)
        receiver = _HttpReceiver(port)
        threading.Thread(target=receiver.serve_forever, daemon=True).start()
        try:
            res = _run(workdir, cmd)
        finally:
            receiver.shutdown()
            receiver.server_close()
        assert res.returncode == 0, res.stderr
        return _check_export(workdir, cmd, res, receiver.spans)
    res = _run(workdir, cmd)
    assert res.returncode == 0, f"{cmd} (documented as {doc_line!r}) exited {res.returncode}: {res.stderr[-2000:]}"
    assert "Traceback" not in res.stderr
    if "--jaeger-json" in cmd:
        out = workdir / cmd.split("--jaeger-json ")[1].split()[0]
        assert json.loads(out.read_text())["data"], cmd
    if cmd.startswith("unsee forget") and "--dry-run" not in cmd:
        assert "committed" in res.stdout
    if cmd == "unsee --version":
        assert re.match(r"unsee \d+\.\d+", res.stdout)


def _erase_flow(d: Path) -> None:
    """forget --no-erase, audit (copies remain: exit 1), erase (exit 0, a receipt), audit (exit 0),
    receipt verify (valid; a tampered copy is not)."""
    agent = "--agent unsee.demo:agent_factory"
    steps = [("unsee demo --model scripted --session e --no-forget", 0),
             (f"unsee forget e --target 4417-2231 {agent} --no-erase", 0),
             (f"unsee audit e --target 4417-2231 {agent}", 1),
             (f"unsee erase e --target 4417-2231 {agent}", 0),
             ("unsee audit e --target 4417-2231", 0)]
    for cmd, rc in steps:
        res = _run(d, cmd)
        assert res.returncode == rc and "Traceback" not in res.stderr, (cmd, res.returncode, res.stderr[-2000:])
    path = sorted((d / ".unsee" / "receipts").glob("*.json"))[-1]
    res = _run(d, f"unsee receipt verify {path} --target 4417-2231")
    assert res.returncode == 0 and "signature: valid" in res.stdout, res.stdout + res.stderr
    data = json.loads(path.read_text())
    data["routes"][0]["copies_after"] = 0 if data["routes"][0]["copies_after"] else 1
    forged = d / "forged.json"
    forged.write_text(json.dumps(data))
    res = _run(d, f"unsee receipt verify {forged}")
    assert res.returncode == 1 and "INVALID" in res.stdout, res.stdout + res.stderr
    # re-signed by another key (its own embedded): this home's key is what counts
    from unsee.plugins.erasure.receipt import Receipt, SigningKey, sign_receipt

    other = SigningKey.load_or_create(d / "other-key")
    resigned = sign_receipt(Receipt.model_validate({**data, "public_key": other.public_pem(), "signature": None}),
                            other)
    forged.write_text(resigned.model_dump_json())
    res = _run(d, f"unsee receipt verify {forged}")
    assert res.returncode == 1 and "INVALID" in res.stdout, res.stdout + res.stderr


def _serve(workdir: Path) -> None:
    """``unsee serve --token T --agent ...``: up, answers a revocation, stops on SIGTERM."""
    argv = UNSEE + ["serve", "--token", "T", "--port", "0", "--agent", "unsee.demo:agent_factory"]
    proc = subprocess.Popen(argv, cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=_env())
    try:
        line = proc.stdout.readline()
        url = re.search(r"POST (http://\S+)", line).group(1)
        body = json.dumps({"session_id": "demo", "event": {"target": "updates by email"},
                           "strategy": "B7"}).encode()
        req = urllib.request.Request(url, data=body, headers={"Authorization": "Bearer T",
                                                              "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=300) as resp:
            report = json.loads(resp.read())
        assert resp.status == 200 and report["committed"], report
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.model
def test_demo_on_the_local_model(tmp_path):
    """``make demo`` = ``unsee demo`` on the local CPU model: every tool the script asks for runs
    (no tool call cut off), progress is shown per step, the secret is forgotten, and the
    next-step commands it prints work as printed."""
    res = _run(tmp_path, "unsee demo --model local", timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    out = res.stdout
    for tool in ("lookup_ticket", "check_entitlement", "issue_refund", "save_case_note", "remember"):
        assert f"tool {tool}" in out, (tool, out[-3000:])
    assert "<tool_call>" not in out
    assert "secret in the live state after forgetting: no" in out
    assert "refunds actually paid for demo: 1" in out
    # the README's `unsee forget ... --agent unsee.demo:agent_factory` replays with this model
    assert json.loads((tmp_path / ".unsee" / "demo.json").read_text())["model"] == "local"
    assert "replay model" in out  # the forget's replayed steps are shown
    assert "dtype" not in res.stderr
    nxt = out.split("Next, try:", 1)[1].strip().splitlines()
    assert len(nxt) >= 4
    for cmd in nxt:
        r = subprocess.run(cmd.strip(), shell=True, cwd=tmp_path, capture_output=True, text=True, timeout=600,
                           env={**_env(), "PATH": f"{Path(sys.executable).parent}:{_env().get('PATH', '')}"})
        assert r.returncode == 0, (cmd, r.stderr[-2000:])
