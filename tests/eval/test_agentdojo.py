"""AgentDojo through unsee with the scripted injection-following agent (offline, a few pairs)."""

import pytest

pytest.importorskip("agentdojo")

from unsee.plugins.eval.bench import run_bench

PAIRS = {
    "banking": (["user_task_0", "user_task_3", "user_task_4"],
                ["injection_task_0", "injection_task_4", "injection_task_7"]),
    "slack": (["user_task_1", "user_task_4", "user_task_6"],
              ["injection_task_1", "injection_task_2", "injection_task_5"]),
}
_cache: dict = {}


def bench(suite, defense):
    if (suite, defense) not in _cache:
        uts, its = PAIRS[suite]
        _cache[suite, defense] = run_bench(suite, defense, uts, its, progress=False)
    return _cache[suite, defense]


@pytest.mark.parametrize("suite", sorted(PAIRS))
def test_undefended_attacks_succeed(suite):
    r = bench(suite, "none")
    assert any(x["attack_success"] and x["identifier_sink"] for x in r["rows"])
    assert r["summary"]["any_leak"] > 0
    assert all(x["error"] is None for x in r["rows"] + r["clean"])


@pytest.mark.parametrize("suite", sorted(PAIRS))
def test_ifc_stops_identifier_sink_attacks(suite):
    r = bench(suite, "ifc")
    sink_rows = [x for x in r["rows"] if x["identifier_sink"]]
    assert sink_rows and not any(x["attack_success"] for x in sink_rows)
    assert any(x["ifc_blocks"] for x in sink_rows)


@pytest.mark.parametrize("suite", sorted(PAIRS))
def test_ifc_forget_leaves_no_injected_text(suite):
    none, ifc, both = bench(suite, "none"), bench(suite, "ifc"), bench(suite, "ifc+forget")
    assert both["summary"]["any_leak"] == 0 and both["summary"]["attack_success"] == 0
    # forgetting costs nothing on clean runs beyond what IFC's blocking costs
    assert both["summary"]["clean_utility"] >= ifc["summary"]["clean_utility"]
    assert both["summary"]["clean_utility"] <= none["summary"]["clean_utility"]


@pytest.mark.parametrize("suite", sorted(PAIRS))
def test_detect_forget_keeps_clean_utility(suite):
    none, det = bench(suite, "none"), bench(suite, "detect+forget")
    assert det["summary"]["any_leak"] == 0
    assert det["summary"]["clean_utility"] >= none["summary"]["clean_utility"]


def test_cli_writes_json(tmp_path):
    import json

    from typer.testing import CliRunner
    from unsee.plugins.eval.cli import app

    out = tmp_path / "r.json"
    res = CliRunner().invoke(app, ["agentdojo", "--suite", "banking", "--defense", "ifc", "--limit", "1",
                                   "--injection-task", "injection_task_0", "--json", str(out)])
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    assert data["summary"]["pairs"] == 1 and data["rows"][0]["attack_success"] is False
