"""The command line as a contract: every command through its success, "no",
bad-input and environment-failure paths, by one exit-code scheme (docs/cli.md), with at most
one line on stderr and no traceback; ``--json`` errors are JSON.

One home for the whole table: the scripted demo, run twice (session ``d`` recorded only,
session ``f`` forgotten, with its signed receipt)."""

from __future__ import annotations

import io
import json
import re
import socket
from pathlib import Path

import pytest
from rich.console import Console

from tests.support.cli_helpers import run
from unsee.demo import SECRET, run_demo
from unsee.exit_codes import TABLE, code_for
from unsee.middleware.errors import SessionNotFound, StoreDamaged, TargetNotFound

NOWHERE = "a text no session ever saw"


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    base = tmp_path_factory.mktemp("contract")
    home = base / "home"
    quiet = Console(file=io.StringIO())
    run_demo(home=home, session="d", jaeger_json=base / "d.json", console=quiet, forget=False)
    run_demo(home=home, session="f", jaeger_json=base / "f.json", console=quiet, forget=True)
    return home


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _receipt(home: Path) -> Path:
    (path,) = [p for p in (home / "receipts").glob("*.json") if json.loads(p.read_text()).get("sessions") == ["f"]]
    return path


def _tampered(home: Path, tmp: Path) -> Path:
    doc = json.loads(_receipt(home).read_text())
    doc["routes"][0]["copies_after"] = 99
    out = tmp / "tampered.json"
    out.write_text(json.dumps(doc))
    return out


PORT = _closed_port()

# (id, argv, exit code); RECEIPT / TAMPERED / TMP are filled in per run
ROWS = [
    # -- 0: done
    ("sessions", ["sessions", "--json"], 0),
    ("graph", ["graph", "d", "--format", "json"], 0),
    ("view", ["view", "d", "--no-detect", "-o", "TMP/v.html"], 0),
    ("export", ["export", "d", "--jaeger-json", "TMP/x.json"], 0),
    ("forget-plan", ["forget", "d", "--target", SECRET, "--dry-run", "--json"], 0),
    ("forget-plan-scope-all", ["forget", "d", "--target", SECRET, "--dry-run", "--scope", "all"], 0),
    ("forget-plan-by-name", ["forget", "d", "--target", SECRET, "--dry-run", "--strategy", "prefix-replay"], 0),
    ("forget-plan-b9-ifc", ["forget", "d", "--target", SECRET, "--dry-run", "--strategy", "B9",
                            "--ifc", "send_email.to"], 0),
    ("audit-clean", ["audit", "f", "--target", SECRET], 0),
    ("surface", ["surface", "--json"], 0),
    ("receipt-valid", ["receipt", "verify", "RECEIPT"], 0),
    # -- 1: done, the answer is "no"
    ("audit-copy", ["audit", "d", "--target", SECRET], 1),
    ("graph-target-nowhere", ["graph", "d", "--target", NOWHERE], 1),
    ("forget-target-nowhere", ["forget", "d", "--target", NOWHERE, "--dry-run"], 1),
    ("surface-marker", ["surface", "--marker", SECRET], 1),
    ("surface-target", ["surface", "--target", SECRET], 1),
    ("receipt-invalid", ["receipt", "verify", "TAMPERED"], 1),
    # -- 2: bad usage or input (nothing changed)
    ("unknown-option", ["sessions", "--bogus"], 2),
    ("graph-unknown", ["graph", "nope"], 2),
    ("graph-bad-format", ["graph", "d", "--format", "png"], 2),
    ("view-unknown", ["view", "nope", "-o", "TMP/n.html"], 2),
    ("export-unknown", ["export", "nope", "--jaeger-json", "TMP/n.json"], 2),
    ("export-no-target", ["export", "d"], 2),
    ("forget-unknown", ["forget", "nope", "--target", SECRET, "--dry-run"], 2),
    ("forget-strategy", ["forget", "d", "--target", SECRET, "--strategy", "B42"], 2),
    ("forget-b9-no-ifc", ["forget", "d", "--target", SECRET, "--strategy", "B9", "--dry-run"], 2),
    ("forget-bad-ifc", ["forget", "d", "--target", SECRET, "--strategy", "B9", "--dry-run", "--ifc", "nodot"], 2),
    ("forget-replay-no-agent", ["forget", "d", "--target", SECRET], 2),
    ("forget-empty-target", ["forget", "d", "--target", "  "], 2),
    ("forget-bad-scope", ["forget", "d", "--target", SECRET, "--dry-run", "--scope", "everywhere"], 2),
    ("forget-scope-twice", ["forget", "d", "--target", SECRET, "--dry-run", "--scope", "session", "--all-sessions"], 2),
    ("surface-target-and-marker", ["surface", "--target", SECRET, "--marker", SECRET], 2),
    ("surface-empty-target", ["surface", "--target", " "], 2),
    ("audit-unknown", ["audit", "nope", "--target", SECRET], 2),
    ("erase-not-forgotten", ["erase", "d", "--target", SECRET], 2),
    ("erase-subject-bad-namespace", ["erase", "--subject", "ann", "--namespace", ""], 2),
    ("erase-subject-cmd-bad-namespace", ["erase-subject", "ann", "--namespace", ""], 2),
    ("erase-subject-cmd-empty-name", ["erase-subject", " ", "--thread", "d"], 2),
    ("retention-bad-policy", ["retention", "d", "--keep", "bogus"], 2),
    ("retention-no-agent", ["retention", "d", "--keep", "latest"], 2),
    ("eval-unknown-suite", ["eval", "forgetting", "--suite", "nope", "--model", "scripted"], 2),
    ("receipt-missing", ["receipt", "verify", "TMP/none.json"], 2),
    ("serve-no-token", ["serve"], 2),
    ("demo-bad-model", ["demo", "--model", "gpt"], 2),
    ("reconcile-unknown", ["reconcile", "nope", "--dry-run"], 2),
    ("reconcile-bad-run", ["reconcile", "nope", "--run", "bogus"], 2),
    # -- 3: an environment problem
    ("store-unavailable", ["--store", "postgresql://unsee@127.0.0.1:%d/none?connect_timeout=2" % PORT,
                           "sessions"], 3),
    ("otlp-unreachable", ["export", "d", "--otlp-endpoint", "http://127.0.0.1:%d" % PORT], 3),
    ("sandbox-no-daemon", ["sandbox", "cleanup"], 3),
    ("sandbox-bad-flags", ["sandbox", "cleanup", "--include-base"], 2),
]


@pytest.mark.parametrize("argv,code", [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_every_command_exits_by_the_scheme(home, tmp_path, capsys, monkeypatch, argv, code):
    monkeypatch.delenv("UNSEE_DEMO_MODEL", raising=False)
    monkeypatch.setenv("UNSEE_STORE_TIMEOUT", "2")  # (an unreachable server: fail within 2 s)
    if argv[0] == "sandbox":  # (no daemon there)
        monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")
    subs = {"RECEIPT": str(_receipt(home)), "TAMPERED": str(_tampered(home, tmp_path)) if "TAMPERED" in argv else ""}
    argv = [subs.get(a, a.replace("TMP/", f"{tmp_path}/")) for a in argv]
    got, out, err = run(capsys, "--home", home, *argv)
    assert got == code, (argv, out[-2000:], err)
    assert "Traceback" not in err and "Traceback" not in out
    lines = err.strip().splitlines()
    assert len(lines) <= 1, err
    if code >= 2:
        assert lines and lines[0].startswith("error: "), err
        assert not re.search(r"Invalid value|Value error,|validation error for", err), err


def test_a_json_error_is_json(home, capsys):
    code, out, err = run(capsys, "--home", home, "audit", "nope", "--target", SECRET, "--json")
    assert (code, out) == (2, "")
    e = json.loads(err)["error"]
    assert (e["type"], e["exit_code"]) == ("SessionNotFound", 2) and "'nope'" in e["message"]


def test_debug_prints_the_traceback(home, capsys):
    code, _, err = run(capsys, "--home", home, "--debug", "graph", "nope")
    assert code == 2 and "Traceback" in err and err.strip().splitlines()[-1].startswith("error: ")


def test_errors_state_their_codes_by_the_table():
    assert [c for c, _ in TABLE] == [0, 1, 2, 3, 4, 130]
    assert code_for(SessionNotFound("x")) == 2 and code_for(TargetNotFound("x")) == 1
    assert code_for(StoreDamaged("f", "x")) == 3 and code_for(RuntimeError("bug")) == 4
    assert code_for(KeyboardInterrupt()) == 130 and code_for(FileNotFoundError("x")) == 2


def test_the_docs_table_is_the_codes_table():
    text = (Path(__file__).parents[1] / "docs" / "cli.md").read_text()
    part = text.split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| (\d+) \| (.+) \|$", part, re.M)
    assert [(int(c), m) for c, m in rows] == list(TABLE)
