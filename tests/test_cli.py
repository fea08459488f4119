"""The ``unsee`` command line: exit codes, one-line errors, formats, home resolution.

``unsee.cli.main(argv)`` is driven in-process (it returns the exit code); one
test runs the installed ``unsee`` script in a subprocess for the
no-traceback guarantee. A session is recorded first with the demo agent.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from tests.support.cli_helpers import assert_one_line_error, run
from unsee.core import DEFAULT_HOME, resolve_home
from unsee.demo import SECRET, run_demo


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    base = tmp_path_factory.mktemp("cli")
    home = base / "home"
    jaeger = base / "t.json"
    result = run_demo(home=home, session="demo", jaeger_json=jaeger, console=Console(file=io.StringIO()),
                      forget=False)
    return {"home": home, "jaeger": jaeger, "result": result, "session": result["session"]}






# -- demo ----------------------------------------------------------------------------
def test_run_demo_result(demo):
    r = demo["result"]
    assert r["session"] == "demo"
    assert r["tau"] >= 1
    assert r["closure"] > 1
    assert r["artifacts"] > r["closure"]
    assert demo["jaeger"].exists()
    doc = json.loads(demo["jaeger"].read_text())
    assert sum(len(t["spans"]) for t in doc["data"]) == r["spans"] > 0
    assert SECRET not in demo["jaeger"].read_text()


def test_run_demo_again_on_same_home_uses_a_fresh_session(tmp_path):
    quiet = Console(file=io.StringIO())
    first = run_demo(home=tmp_path / "h", session="s", jaeger_json=tmp_path / "a.json", console=quiet, forget=False)
    second = run_demo(home=tmp_path / "h", session="s", jaeger_json=tmp_path / "b.json", console=quiet, forget=False)
    assert first["session"] == "s"
    assert second["session"] != "s"
    assert second["tau"] == first["tau"] and second["closure"] == first["closure"]


# -- sessions ----------------------------------------------------------------------------
def test_agent_factory_uses_the_model_the_demo_recorded(demo, tmp_path, monkeypatch, caplog):
    """No hidden default: the factory replays with the demo's model (recorded in the home),
    $UNSEE_DEMO_MODEL overrides it, and the factory says which (WARNING when not the recorded one)."""
    import logging

    from unsee.demo import agent_factory, choose_model, recorded_model
    from unsee.middleware.errors import InvalidArgument

    assert recorded_model(demo["home"]) == "scripted"
    assert choose_model("local", None)[0] == "local"  # a `make demo` home replays with the local model
    assert choose_model("local", "scripted")[0] == "scripted"
    assert choose_model(None, None)[0] == "scripted"
    with pytest.raises(InvalidArgument, match="UNSEE_DEMO_MODEL"):
        choose_model("local", "gpt")
    monkeypatch.delenv("UNSEE_DEMO_MODEL", raising=False)
    monkeypatch.setenv("UNSEE_HOME", str(tmp_path / "bare"))
    with caplog.at_level(logging.INFO, logger="unsee.demo"):
        agent_factory()
    [rec] = [r for r in caplog.records if r.name == "unsee.demo"]
    assert rec.levelno == logging.WARNING and "scripted model: no demo recorded" in rec.getMessage()


def test_sessions_json_lists_the_demo_session(demo, capsys):
    code, out, err = run(capsys, "--home", demo["home"], "sessions", "--json")
    assert code == 0, err
    rows = json.loads(out)
    (s,) = [r for r in rows if r["session_id"] == demo["session"]]
    assert s["artifacts"] == demo["result"]["artifacts"]
    assert s["turns"] >= 1 and s["incomplete"] is False


def test_sessions_table(demo, capsys):
    code, out, _ = run(capsys, "--home", demo["home"], "sessions")
    assert code == 0
    assert demo["session"] in out


@pytest.mark.parametrize("make_dir", [False, True])
def test_sessions_on_empty_home_is_an_empty_list(tmp_path, capsys, make_dir):
    home = tmp_path / "empty"
    if make_dir:
        home.mkdir()
    code, out, err = run(capsys, "--home", home, "sessions", "--json")
    assert (code, json.loads(out), err) == (0, [], "")
    assert not (home / "provenance.sqlite").exists()  # reading never creates a home
    assert home.exists() == make_dir


def test_a_session_in_an_empty_home_is_a_one_line_usage_error(tmp_path, capsys):
    home = tmp_path / ("deeply-nested-" * 8) / "empty-home"
    code, _, err = run(capsys, "--home", home, "graph", "s1")
    assert code == 2 and "does not exist" in err
    assert_one_line_error(err)


# -- graph --------------------------------------------------------------------------------
def test_graph_mermaid(demo, capsys):
    code, out, err = run(capsys, "--home", demo["home"], "graph", demo["session"], "--format", "mermaid")
    assert code == 0, err
    assert out.startswith("flowchart")
    assert "-->" in out
    assert SECRET not in out


def test_graph_dot(demo, capsys):
    code, out, _ = run(capsys, "--home", demo["home"], "graph", demo["session"], "-f", "dot")
    assert code == 0
    assert out.startswith(f'digraph "{demo["session"]}"')
    assert out.rstrip().endswith("}")
    assert "->" in out


def test_graph_json(demo, capsys):
    code, out, _ = run(capsys, "--home", demo["home"], "graph", demo["session"], "--format", "json")
    assert code == 0
    doc = json.loads(out)
    assert doc["session_id"] == demo["session"]
    assert len(doc["artifacts"]) == demo["result"]["artifacts"]
    assert doc["checkpoints"]
    assert not any(a["tainted"] for a in doc["artifacts"])
    ids = {a["id"] for a in doc["artifacts"]}
    assert all(p in ids for a in doc["artifacts"] for p in a["parents"])
    assert SECRET not in out


def test_graph_default_format_is_mermaid(demo, capsys):
    code, out, _ = run(capsys, "--home", demo["home"], "graph", demo["session"])
    assert code == 0 and out.startswith("flowchart")


def test_graph_target_highlights_the_closure(demo, capsys):
    code, out, _ = run(capsys, "--home", demo["home"], "graph", demo["session"], "-f", "json", "--target", SECRET)
    assert code == 0
    tainted = [a for a in json.loads(out)["artifacts"] if a["tainted"]]
    assert len(tainted) == demo["result"]["closure"]
    code, out, _ = run(capsys, "--home", demo["home"], "graph", demo["session"], "--target", SECRET)
    assert code == 0 and "classDef tainted" in out


def test_graph_unknown_target(demo, capsys):
    code, out, err = run(capsys, "--home", demo["home"], "graph", demo["session"], "--target", "no such text")
    assert code == 1 and out == ""
    assert_one_line_error(err)
    assert "target not found" in err


def test_graph_unknown_session(demo, capsys):
    code, out, err = run(capsys, "--home", demo["home"], "graph", "nope")
    assert code == 2  # bad input (docs/cli.md "Exit codes")
    assert out == ""
    assert_one_line_error(err)
    assert "unknown session 'nope'" in err


@pytest.mark.parametrize(
    "argv",
    [
        ["graph", "SESSION", "--format", "png"],
        ["graph"],                              # missing SESSION
        ["graph", "SESSION", "--bogus"],        # unknown option
        ["no-such-command"],
    ],
    ids=["bad-format", "missing-arg", "unknown-option", "unknown-command"],
)
def test_bad_arguments_exit_2(demo, capsys, argv):
    argv = [demo["session"] if a == "SESSION" else a for a in argv]
    code, out, err = run(capsys, "--home", demo["home"], *argv)
    assert "Traceback" not in err
    assert err.startswith("error: ")
    assert code == 2, f"usage error exited {code}: {err.strip()!r}"


# -- export ----------------------------------------------------------------------------------
def test_export_without_options_is_usage_error(demo, capsys):
    code, _, err = run(capsys, "--home", demo["home"], "export", demo["session"])
    assert code == 2
    assert_one_line_error(err)
    assert "--otlp-endpoint" in err and "--jaeger-json" in err


def test_export_jaeger_json(demo, capsys, tmp_path):
    path = tmp_path / "out.json"
    code, out, err = run(capsys, "--home", demo["home"], "export", demo["session"], "--jaeger-json", path)
    assert code == 0, err
    assert f"wrote {demo['result']['spans']} spans" in out
    assert json.loads(path.read_text())["data"]


def test_export_bad_endpoint_and_unknown_session(demo, capsys, tmp_path):
    code, _, err = run(capsys, "--home", demo["home"], "export", demo["session"], "--otlp-endpoint", "not-a-url")
    assert code == 2
    assert err.startswith("error: ") and "Traceback" not in err
    code, _, err = run(capsys, "--home", demo["home"], "export", "nope", "--jaeger-json", tmp_path / "x.json")
    assert code == 2
    assert_one_line_error(err)
    assert not (tmp_path / "x.json").exists()


# -- home resolution ------------------------------------------------------------------------
def _make_home(path: Path, session: str) -> None:
    from unsee.core import Unsee
    from unsee.middleware.records import Artifact, ArtifactType
    from unsee.middleware.store import Batch

    u = Unsee(home=path)
    a = Artifact(id="in-1", session_id=session, type=ArtifactType.USER_INPUT, seq=1, step=1)
    u.store.submit(Batch(session_id=session, artifacts=[a], content={"in-1": "hello"}))
    u.close()


def _listed(capsys, *argv) -> list[str]:
    code, out, err = run(capsys, *argv, "sessions", "--json")
    assert code == 0, err
    return [s["session_id"] for s in json.loads(out)]


def test_home_precedence(tmp_path, monkeypatch, capsys):
    flag_home, env_home, cwd = tmp_path / "flag", tmp_path / "env", tmp_path / "cwd"
    _make_home(flag_home, "from-flag")
    _make_home(env_home, "from-env")
    _make_home(cwd / DEFAULT_HOME, "from-cwd")
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("UNSEE_HOME", str(env_home))
    assert _listed(capsys, "--home", flag_home) == ["from-flag"]   # --home beats $UNSEE_HOME
    assert _listed(capsys) == ["from-env"]                          # $UNSEE_HOME beats ./.unsee
    monkeypatch.delenv("UNSEE_HOME")
    assert _listed(capsys) == ["from-cwd"]                          # ./.unsee last
    assert _listed(capsys, "--home", flag_home) == ["from-flag"]


def test_resolve_home(tmp_path, monkeypatch):
    monkeypatch.delenv("UNSEE_HOME", raising=False)
    assert resolve_home() == Path(".unsee")
    monkeypatch.setenv("UNSEE_HOME", str(tmp_path / "e"))
    assert resolve_home() == tmp_path / "e"
    assert resolve_home(tmp_path / "x") == tmp_path / "x"


# -- the installed script -------------------------------------------------------------------
def _unsee_script() -> Path:
    script = Path(sys.executable).parent / "unsee"
    if not script.exists():
        pytest.skip("the unsee console script is not installed next to this interpreter")
    return script


@pytest.mark.parametrize(
    "argv, code",
    [(["graph", "nope"], 2), (["graph", "SESSION", "--format", "png"], 2)],
    ids=["unknown-session", "bad-format"],
)
def test_script_never_prints_a_traceback(demo, argv, code):
    argv = [demo["session"] if a == "SESSION" else a for a in argv]
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "UNSEE_HOME")}
    proc = subprocess.run(
        [str(_unsee_script()), "--home", str(demo["home"]), *argv],
        capture_output=True, text=True, timeout=60, env=env,
    )
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout
    assert proc.stderr.startswith("error: ")
    assert len(proc.stderr.strip().splitlines()) == 1
    assert proc.returncode == code, proc.stderr


# -- forget ------------------------------------------------------------------------------
def test_full_demo_forgets_and_continues(tmp_path):
    r = run_demo(home=tmp_path / "full", session="d", jaeger_json=tmp_path / "f.json",
                 console=Console(file=io.StringIO()))
    assert r["report"]["committed"] and r["report"]["strategy"] == "B7"
    assert r["report"]["model_turns_rematerialised"] + r["report"]["model_turns_decoded"] >= 1
    assert r["leaked"] is False
    assert r["payments"] == 1  # the refund fired once, not again during the replay


def test_forget_cli_dry_run_and_apply(tmp_path, capsys, monkeypatch):
    home = tmp_path / "fh"
    run_demo(home=home, session="d", jaeger_json=tmp_path / "g.json", console=Console(file=io.StringIO()),
             forget=False)
    code, out, err = run(capsys, "--home", home, "forget", "d", "--target", SECRET, "--dry-run", "--json")
    assert code == 0, err
    plan = json.loads(out)
    assert plan["tau"] >= 1 and plan["entry_type"] == "tool_return" and plan["closure"]
    code, out, err = run(capsys, "--home", home, "forget", "d", "--target", SECRET)
    assert code == 2 and "--agent" in err  # a replay needs the agent in this process
    assert_one_line_error(err)
    monkeypatch.setenv("UNSEE_HOME", str(home))
    code, out, err = run(capsys, "forget", "d", "--target", SECRET, "--agent", "unsee.demo:agent_factory", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["committed"] and report["strategy"] == "B7"
    code, out, err = run(capsys, "--home", home, "graph", "d", "--target", SECRET)
    assert code == 1 and "not found" in err


@pytest.mark.parametrize("argv", [
    ["forget", "d", "--target", "x", "--strategy", "B42"],
    ["forget", "d", "--target", "   "],
    ["forget", "d"],
    ["forget", "d", "--target", "x", "--agent", "nocolon"],
])
def test_forget_cli_bad_arguments(demo, capsys, argv):
    code, out, err = run(capsys, "--home", demo["home"], *argv)
    assert code == 2
    assert_one_line_error(err)


def test_an_agent_recording_into_another_home_is_refused(demo, tmp_path, capsys, monkeypatch):
    """One home per operation: --home and the --agent's own home must agree."""
    (tmp_path / "otherhome_agent.py").write_text(
        "from langchain.agents import create_agent\n"
        "from langchain_core.messages import AIMessage\n"
        "from unsee import Unsee\n"
        "from unsee.plugins.model import ScriptedChatModel\n"
        f"u = Unsee(home={str(tmp_path / 'other')!r})\n"
        "agent = create_agent(ScriptedChatModel(policy=lambda m, t: AIMessage('ok')), [],\n"
        "                     middleware=[u.middleware()])\n")
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "--home", demo["home"], "forget", demo["session"], "--target", SECRET,
                         "--agent", "otherhome_agent:agent")
    assert code == 2 and "records into the unsee home" in assert_one_line_error(err)
