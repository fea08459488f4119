"""Bad input, at the command line and in Python, gets a clear error and changes nothing.

A damaged store is an error naming the file (never rebuilt empty); a home that
is a file is an error naming it; every argument of a forget is checked before
anything is written, and a forget that fails anyway leaves no scratch session;
CLI arguments that would be ignored or misread are usage errors (exit 2);
piped output is never truncated.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
from rich.console import Console

from unsee import RevocationEvent, Unsee
from tests.support.cli_helpers import assert_one_line_error, run
from unsee.demo import SECRET, run_demo
from unsee.middleware.errors import HomeNotADirectory, InvalidArgument, StoreDamaged, UnseeError
from unsee.middleware.store_files import STORE_VERSION
from unsee.plugins.forget import crash_at
from unsee.plugins.forget.replay import is_scratch_thread
from unsee.plugins.forget.errors import InjectedCrash, UnknownStrategy


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Path:
    """A home holding the scripted demo session ``demo`` (not yet forgotten). Tests copy it."""
    home = tmp_path_factory.mktemp("bad-input") / "home"
    run_demo(home=home, session="demo", jaeger_json=home.parent / "t.json", console=Console(file=io.StringIO()),
             forget=False)
    return home


@pytest.fixture
def home(recorded, tmp_path) -> Path:
    dst = tmp_path / "home"
    shutil.copytree(recorded, dst, symlinks=True)
    return dst


@pytest.fixture(autouse=True)
def _no_env_home(monkeypatch):
    monkeypatch.delenv("UNSEE_HOME", raising=False)






def files_of(home: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in home.iterdir() if p.is_file()}


# -- 1, 2: a damaged store is an error naming the file; nothing is rewritten -------------------
def _damage(path: Path, how: str) -> None:
    size = path.stat().st_size
    if how == "half":
        os.truncate(path, size // 2)
    elif how == "100-bytes":
        os.truncate(path, 100)
    elif how == "garbled":
        path.write_bytes(os.urandom(size))
    elif how == "garbled-page":
        with open(path, "r+b") as f:  # a page in the middle overwritten: only an integrity check sees it
            f.seek(size // 2 - (size // 2) % 4096)
            f.write(os.urandom(4096))
    elif how == "empty":
        os.truncate(path, 0)
    elif how == "foreign":
        path.unlink()
        with sqlite3.connect(path) as c:
            c.execute("CREATE TABLE notes(x)")
        c.close()


DAMAGE = ["half", "100-bytes", "garbled", "garbled-page", "empty", "foreign"]


@pytest.mark.parametrize("how", DAMAGE)
def test_damaged_provenance_store_is_an_error_in_the_cli_and_nothing_changes(home, capsys, how):
    store = home / "provenance.sqlite"
    _damage(store, how)
    before = files_of(home)
    for argv in (["sessions"], ["sessions", "--json"], ["graph", "demo"],
                 ["forget", "demo", "--target", SECRET, "--dry-run"]):
        code, out, err = run(capsys, "--home", home, *argv)
        assert code == 3, (argv, out, err)  # an environment problem: the store
        assert_one_line_error(err)
        assert str(store) in err and "damaged" in err, err
        assert "DatabaseError" not in err
        assert out == ""
    assert files_of(home) == before  # not a byte rewritten, nothing created beside it


@pytest.mark.parametrize("how", DAMAGE)
def test_damaged_provenance_store_is_an_error_in_python(home, how):
    store = home / "provenance.sqlite"
    _damage(store, how)
    before = files_of(home)
    with pytest.raises(StoreDamaged) as e:
        Unsee(home=home)
    assert str(store) in str(e.value) and e.value.path == str(store)
    assert isinstance(e.value, sqlite3.DatabaseError) and isinstance(e.value, UnseeError)
    assert files_of(home) == before


@pytest.mark.parametrize("how", ["half", "garbled", "foreign"])
def test_damaged_vault_is_an_error_naming_it(home, capsys, how):
    vault = home / "vault.sqlite"
    _damage(vault, how)
    before = files_of(home)
    code, _, err = run(capsys, "--home", home, "sessions")
    assert code == 3
    assert str(vault) in assert_one_line_error(err)
    assert files_of(home) == before


def test_sound_stores_still_open_and_older_ones_are_stamped(home, capsys):
    code, out, err = run(capsys, "--home", home, "sessions", "--json")
    assert code == 0, err
    assert [s["session_id"] for s in json.loads(out)] == ["demo"]
    for name in ("provenance.sqlite", "vault.sqlite"):
        with sqlite3.connect(home / name) as c:
            assert c.execute("PRAGMA user_version").fetchone()[0] == STORE_VERSION
            c.execute("PRAGMA user_version=0")  # a store made before versions
        c.close()
    code, out, err = run(capsys, "--home", home, "sessions", "--json")
    assert code == 0, err
    assert [s["session_id"] for s in json.loads(out)] == ["demo"]


# -- 2: a home that is a file -------------------------------------------------------------------
@pytest.mark.parametrize("below", [False, True], ids=["home-is-a-file", "parent-is-a-file"])
def test_home_that_is_a_file_is_an_error_naming_it(tmp_path, capsys, below):
    blocker = tmp_path / "afile"
    blocker.write_text("not a home")
    home = blocker / "sub" if below else blocker
    for argv in (["sessions"], ["demo", "--model", "scripted", "--no-forget"], ["graph", "x"]):
        code, out, err = run(capsys, "--home", home, *argv)
        assert code == 2, (argv, err)
        assert_one_line_error(err)
        assert str(blocker) in err and "not a directory" in err and "FileExistsError" not in err
    with pytest.raises(HomeNotADirectory) as e:
        Unsee(home=home)
    assert isinstance(e.value, NotADirectoryError) and str(blocker) in str(e.value)
    assert blocker.read_text() == "not a home"


# -- 3, 4: forget validates every argument before anything is written -----------------------------
def _snapshot(u: Unsee) -> tuple:
    return ([s.model_dump(exclude={"updated_ns"}) for s in u.sessions()],
            [(a.id, a.committed) for a in u.graph("demo")])


def _shown(value) -> str:
    """A test id's part, the same in every process (an object's repr holds its address)."""
    return repr(value) if isinstance(value, (str, int, float, bool, type(None))) else f"<{type(value).__name__}>"


@pytest.mark.parametrize("call, error", [
    (dict(session=""), InvalidArgument),
    (dict(session=None), InvalidArgument),
    (dict(session="demo~cf-0123456789ab-B7"), InvalidArgument),
    (dict(event=SECRET), InvalidArgument),
    (dict(strategy="B42"), UnknownStrategy),
    (dict(strategy=7), UnknownStrategy),
    (dict(agent="unsee.demo:agent_factory"), InvalidArgument),
    (dict(agent=object()), InvalidArgument),
    (dict(side_effects="bogus"), InvalidArgument),
    (dict(dry_run="yes"), InvalidArgument),
    (dict(commit=1), InvalidArgument),
    (dict(wait=None), InvalidArgument),
], ids=lambda v: "-".join(f"{k}={_shown(x)}"[:40] for k, x in v.items()) if isinstance(v, dict) else v.__name__)
def test_forget_rejects_bad_arguments_and_changes_nothing(home, call, error):
    u = Unsee(home=home)
    try:
        before = _snapshot(u)
        args = dict(session="demo", event=RevocationEvent(target=SECRET), strategy="B7")
        args.update(call)
        session, event, strategy = args.pop("session"), args.pop("event"), args.pop("strategy")
        with pytest.raises(error) as e:
            u.forget(session, event, strategy, **args)
        assert isinstance(e.value, ValueError)
        name = next(iter(call))
        if error is InvalidArgument:
            assert ("thread_id" if name == "session" else name) in str(e.value)
        assert _snapshot(u) == before
        assert not any(is_scratch_thread(s.session_id) for s in u.sessions())
        assert u.graph("demo").locate(SECRET)  # not forgotten
    finally:
        u.close()


def test_agent_given_as_a_string_says_to_pass_the_object(home):
    u = Unsee(home=home)
    try:
        with pytest.raises(InvalidArgument, match="compiled LangGraph agent.*got str 'unsee.demo:agent_factory'"
                           ".*import it and pass the object"):
            u.forget("demo", RevocationEvent(target=SECRET), agent="unsee.demo:agent_factory")
    finally:
        u.close()


def _sessions(capsys, home) -> list[str]:
    code, out, err = run(capsys, "--home", home, "sessions", "--json")
    assert code == 0, err
    return [s["session_id"] for s in json.loads(out)]


@pytest.mark.parametrize("step", ["fork", "replay:turn:", "replay:done"])
def test_a_forget_that_fails_during_the_replay_leaves_no_scratch_session(home, capsys, step):
    from unsee.demo import open_demo

    u, agent, _, conn = open_demo(home, "scripted")
    try:
        with crash_at(step), pytest.raises(InjectedCrash):
            u.forget("demo", RevocationEvent(target=SECRET), agent=agent)
        assert [s.session_id for s in u.sessions()] == ["demo"]
        threads = {r[0] for r in conn.execute("SELECT DISTINCT thread_id FROM checkpoints")}
        assert not any(is_scratch_thread(t) for t in threads)
        assert u.graph("demo").locate(SECRET)
    finally:
        u.close()
        conn.close()
    assert _sessions(capsys, home) == ["demo"]


def test_a_begun_commit_keeps_its_scratch_records_for_the_roll_forward(home):
    from unsee.demo import open_demo

    u, agent, _, conn = open_demo(home, "scripted")
    try:
        ev = RevocationEvent(target=SECRET)
        with crash_at("commit:begin"), pytest.raises(InjectedCrash):
            u.forget("demo", ev, agent=agent)
        assert any(is_scratch_thread(s.session_id) for s in u.sessions())
        assert u.forget("demo", ev, agent=agent).committed  # the retry finishes it
        assert [s.session_id for s in u.sessions()] == ["demo"]
    finally:
        u.close()
        conn.close()


def test_side_effects_bogus_is_refused_at_the_cli_level_too(home):
    u = Unsee(home=home)
    try:
        with pytest.raises(InvalidArgument, match="side_effects must be one of defer, execute, ask"):
            u.forget("demo", RevocationEvent(target=SECRET), side_effects="bogus")
        assert u.graph("demo").locate(SECRET)
    finally:
        u.close()


# -- 4: CLI arguments that were ignored or misread -------------------------------------------------
@pytest.mark.parametrize("argv, words", [
    (["graph", "demo", "--target", ""], "--target must be a non-empty"),
    (["graph", "demo", "--target", "  "], "--target must be a non-empty"),
    (["graph", "demo", "--source", "user"], "--source restricts --target"),
    (["forget", "demo", "--target", SECRET, "--agent", "json:dumps"],
     "--agent json:dumps must name a compiled agent or a zero-argument factory returning one; got function dumps("),
    (["forget", "demo", "--target", SECRET, "--agent", "json:__name__"], "got str 'json'"),
    (["forget", "demo", "--target", SECRET, "--agent", "collections:OrderedDict"],
     "OrderedDict() returned OrderedDict"),
    (["forget", "demo", "--target", SECRET, "--agent", "no_such_module_x:agent"], "no module named 'no_such_module_x'"),
    (["forget", "demo", "--target", SECRET, "--agent", "json:no_such_attr"], "json has no attribute 'no_such_attr'"),
    (["forget", "demo", "--target", SECRET, "--agent", ":x"], "--agent must be module:attribute"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_cli_bad_arguments_are_usage_errors(home, capsys, argv, words):
    before = files_of(home)
    code, out, err = run(capsys, "--home", home, *argv)
    assert code == 2, err
    assert_one_line_error(err)
    assert words in err, err
    assert out == ""
    assert files_of(home) == before
    assert _sessions(capsys, home) == ["demo"]


# -- 5: AmbiguousTarget speaks the CLI's words --------------------------------------------------
def test_ambiguous_target_says_source_flag_at_the_cli(home, capsys):
    # "5521" (the order number) entered through the ticket lookup and, independently, a user message
    for argv in (["forget", "demo", "--target", "5521", "--dry-run"], ["forget", "demo", "--target", "5521"]):
        code, _, err = run(capsys, "--home", home, *argv)
        assert code == 2, err
        assert_one_line_error(err)
        assert "pass --source one of:" in err and "source=" not in err
        assert "user" in err and "tool:lookup_ticket" in err
    code, out, err = run(capsys, "--home", home, "forget", "demo", "--target", "5521", "--source", "user",
                         "--dry-run", "--json")
    assert code == 0, err
    assert json.loads(out)["entry_type"] == "user_input"


# -- 6: --version; piped output is never truncated ------------------------------------------------
def test_version(capsys):
    code, out, err = run(capsys, "--version")
    assert code == 0, err
    assert out.strip() == f"unsee {version('unsee')}" == "unsee 0.1.0"


LONG_ID = "demo~cf-236bd0c1e5a94f0f8d3b-" + "x" * 90


def _long_id_home(path: Path) -> None:
    from unsee.middleware.records import Artifact, ArtifactType
    from unsee.middleware.store import Batch

    u = Unsee(home=path)
    a = Artifact(id="in-1", session_id=LONG_ID, type=ArtifactType.USER_INPUT, seq=1, step=1)
    u.store.submit(Batch(session_id=LONG_ID, artifacts=[a], content={"in-1": "hello"}))
    u.close()


def test_piped_sessions_table_keeps_whole_ids(tmp_path, capsys, monkeypatch):
    _long_id_home(tmp_path / "h")
    monkeypatch.setenv("COLUMNS", "40")
    code, out, err = run(capsys, "--home", tmp_path / "h", "sessions")
    assert code == 0, err
    assert any(LONG_ID in line for line in out.splitlines()), out
    assert "…" not in out


def test_piped_script_output_keeps_whole_ids(tmp_path):
    script = Path(sys.executable).parent / "unsee"
    if not script.exists():
        pytest.skip("the unsee console script is not installed next to this interpreter")
    _long_id_home(tmp_path / "h")
    env = {**{k: v for k, v in os.environ.items() if k != "UNSEE_HOME"}, "COLUMNS": "40"}
    proc = subprocess.run([str(script), "--home", str(tmp_path / "h"), "sessions"], capture_output=True,
                          text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    (line,) = [ln for ln in proc.stdout.splitlines() if LONG_ID in ln]
    assert "tiktoken" in line or "-" in line  # the rest of the row is on the same line


def test_piped_forget_report_is_not_cut(home, capsys):
    code, out, err = run(capsys, "--home", home, "forget", "demo", "--target", SECRET, "--dry-run")
    assert code == 0, err
    assert "…" not in out
    assert max(len(line) for line in out.splitlines()) < 400  # panels fit their content


# -- 7: help says B7 needs --agent, with an example ------------------------------------------------
@pytest.mark.parametrize("cmd, example", [
    ("forget", "unsee forget demo --target 4417-2231 --agent unsee.demo:agent_factory"),
    ("serve", "unsee serve --token T --agent unsee.demo:agent_factory"),
])
def test_help_says_b7_needs_the_agent(capsys, cmd, example):
    code, out, _ = run(capsys, cmd, "--help")
    assert code == 0
    text = " ".join(out.split())
    assert "B7" in text and "--agent module:attribute" in text and "zero-argument factory" in text
    assert example in text


def test_readme_shows_the_agent_for_forget():
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    assert "unsee forget demo --target 4417-2231 --agent unsee.demo:agent_factory" in readme
    assert "B7 needs --agent" in readme


def test_cli_forget_agent_factory_follows_home_flag(home, capsys):
    """--home (not only $UNSEE_HOME) is the home the --agent factory opens."""
    # (--no-erase: this home is a copy, and its sandbox registry still names the original's
    # directories, which an erasure refuses to delete: exit 3, "not erased clean")
    code, out, err = run(capsys, "--home", home, "forget", "demo", "--target", SECRET,
                         "--agent", "unsee.demo:agent_factory", "--json", "--no-erase")
    assert code == 0, err
    assert json.loads(out)["committed"]
    assert "UNSEE_HOME" not in os.environ
    code, _, err = run(capsys, "--home", home, "graph", "demo", "--target", SECRET)
    assert code == 1 and "not found" in err
    assert _sessions(capsys, home) == ["demo"]
