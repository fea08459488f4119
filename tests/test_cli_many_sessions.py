"""Many sessions in one home, at the command line: two ``unsee demo --model scripted`` runs in one home, on the
local sandbox. The second forget's record is erased (the first session's sandbox copies are
listed as that session's, not counted), ``unsee audit s2`` exits 0, and a forget whose erasure
is not clean exits 1 (``EXIT_NOT_ERASED``) with one error line."""

import json

import pytest

from tests.support.cli_helpers import assert_one_line_error, run
from unsee.cli import EXIT_NOT_ERASED
from unsee.demo import SECRET


@pytest.fixture
def home(tmp_path, monkeypatch):
    # the local sandbox, as where no Docker daemon is reachable (the setting)
    monkeypatch.setattr("unsee.sandbox.registry.AUTO_CHOICES", ("local",))
    monkeypatch.chdir(tmp_path)  # the demo writes its trace and page to the current directory
    monkeypatch.delenv("UNSEE_HOME", raising=False)
    return tmp_path / "home"


def _demo(capsys, home, session, *more):
    return run(capsys, "--home", home, "demo", "--model", "scripted", "--session", session, *more)


def test_second_demo_in_one_home_erases_its_record_and_names_the_first(home, capsys):
    code, out, err = _demo(capsys, home, "s1")
    assert code == 0, err
    code, out, err = _demo(capsys, home, "s2")
    assert code == 0, err
    erased = [line for line in out.splitlines() if "record erased" in line]
    assert erased and "yes" in erased[0] and "NO" not in erased[0]
    assert any("also held by" in line and "session s1" in line for line in out.splitlines()), out

    code, out, err = run(capsys, "--home", home, "audit", "s2", "--target", SECRET)
    assert code == 0, out + err
    assert "no copy of the target remains in session s2's scope" in out
    assert "also held by session s1, not in this audit's scope" in out

    code, out, _ = run(capsys, "--home", home, "audit", "s2", "--target", SECRET, "--json")
    doc = json.loads(out)
    assert code == 0 and doc["copies"] == 0 and doc["clean"] is True
    assert set(doc["other_sessions"]) == {"s1"} and doc["other_sessions"]["s1"] > 0
    home_route = next(r for r in doc["routes"] if r["route"] == "home.other-files")
    assert home_route["copies"] == 0  # s1's sandbox is s1's, not "a writer without a route"

    # the receipt lists s1 apart and its signature holds (the new field is signed)
    receipts = sorted((home / "receipts").glob("*.json"), key=lambda p: p.stat().st_mtime)
    receipt = json.loads(receipts[-1].read_text())
    assert receipt["sessions"] == ["s2"] and set(receipt["other_sessions"]) == {"s1"}
    code, out, err = run(capsys, "--home", home, "receipt", "verify", receipts[-1], "--target", SECRET)
    assert code == 0, out + err
    assert "signature: valid" in out and "also held by session s1" in out


def test_a_forget_whose_erasure_is_not_clean_exits_1(home, capsys):
    home.mkdir()
    # a copy no route and no session claims: the erasure's audit finds it, and it counts
    (home / "stray-notes.txt").write_text(f"card {SECRET}")
    code, out, err = _demo(capsys, home, "s1")
    assert code == EXIT_NOT_ERASED == 1  # done, and the answer is "no" (as audit and erase)
    assert "NO: copies remain in this forget's scope" in out
    assert "not erased clean" in assert_one_line_error(err)

    code, out, err = _demo(capsys, home, "s2", "--no-forget")
    assert code == 0, err
    code, out, err = run(capsys, "--home", home, "forget", "s2", "--target", SECRET,
                         "--agent", "unsee.demo:agent_factory")
    assert code == EXIT_NOT_ERASED, out + err
    assert "record NOT erased clean" in out and "not erased clean" in assert_one_line_error(err)
    code, out, err = run(capsys, "--home", home, "audit", "s2", "--target", SECRET)
    assert code == 1, out + err  # audit and erase keep exit 1 for a copy in scope
    assert "1 copy of the target remains in session s2's scope" in out
