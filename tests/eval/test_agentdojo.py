"""AgentDojo through unsee (offline, a few pairs): the scripted injection-following agent under each
defense, with sync and late detector verdicts, and the local CPU model on one task."""

import pytest

pytest.importorskip("agentdojo")

from unsee import Unsee
from unsee.eval import make_app, run_bench

PAIRS = {
    "banking": (["user_task_0", "user_task_3", "user_task_4"],
                ["injection_task_0", "injection_task_4", "injection_task_7"]),
    "slack": (["user_task_1", "user_task_4", "user_task_6"],
              ["injection_task_1", "injection_task_2", "injection_task_5"]),
}
_cache: dict = {}


def bench(suite, defense, verdict="sync"):
    if (suite, defense, verdict) not in _cache:
        uts, its = PAIRS[suite]
        _cache[suite, defense, verdict] = run_bench(suite, defense, uts, its, progress=False, verdict=verdict,
                                                     unsee=Unsee)
    return _cache[suite, defense, verdict]


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
    # IFC alone blocks legitimate sends whose recipient was read from a tool result; with the detector
    # endorsing what it vetted, clean runs lose nothing against no defense
    assert ifc["summary"]["clean_utility"] < none["summary"]["clean_utility"]
    assert both["summary"]["clean_utility"] == none["summary"]["clean_utility"]


@pytest.mark.parametrize("suite", sorted(PAIRS))
def test_detect_forget_keeps_clean_utility(suite):
    none, det = bench(suite, "none"), bench(suite, "detect+forget")
    assert det["summary"]["any_leak"] == 0
    assert det["summary"]["clean_utility"] >= none["summary"]["clean_utility"]


@pytest.mark.parametrize("suite", sorted(PAIRS))
def test_late_verdicts_forget_after_the_run(suite):
    none, late = bench(suite, "none"), bench(suite, "ifc+forget", "late")
    sm = late["summary"]
    assert sm["errors"] == 0 and sm["forgets"] > 0
    assert sm["any_leak"] == 0  # every injected text is gone from the final state
    assert sm["attack_success_identifier_sink"] == 0  # IFC held the sinks until the verdict
    assert sm["clean_utility"] == none["summary"]["clean_utility"]
    assert late["verdict"] == "late" and all(x["forgets"] for x in late["rows"])


def test_unknown_task_ids_are_clear_errors():
    with pytest.raises(ValueError, match="unknown user task 'user_task_999'"):
        run_bench("banking", "none", ["user_task_999"], [], progress=False, unsee=Unsee)
    with pytest.raises(ValueError, match="unknown injection task"):
        run_bench("slack", "none", ["user_task_1"], ["injection_task_0"], progress=False, unsee=Unsee)
    with pytest.raises(ValueError, match="verdict"):
        run_bench("slack", "none", ["user_task_1"], [], progress=False, verdict="soon", unsee=Unsee)


@pytest.mark.model
def test_local_model_runs_a_suite_task(tmp_path):
    # the local CPU model (SmolLM2, steered to call tools) on one banking task, no injection, under IFC
    from agentdojo.task_suite.load_suites import get_suites
    from unsee import ArtifactType

    r = run_bench("banking", "ifc", ["user_task_0"], [], progress=False, model="local", home=tmp_path,
                  unsee=Unsee)
    assert r["model"] == "local" and r["summary"]["clean_runs"] == 1 and r["summary"]["errors"] == 0
    u = Unsee(home=tmp_path)
    try:
        g = u.graph(r["clean"][0]["thread_id"])
        returns = g.of_type(ArtifactType.TOOL_RETURN)
        tools = {f.name for f in get_suites("v1.2.2")["banking"].tools}
        assert returns and {a.attrs["tool"] for a in returns} <= tools  # schema-valid calls of suite tools
        assert len(g.of_type(ArtifactType.MODEL_TURN)) >= 2
    finally:
        u.close()


def test_cli_writes_json(tmp_path):
    import json

    from typer.testing import CliRunner

    app = make_app(Unsee)

    out = tmp_path / "r.json"
    res = CliRunner().invoke(app, ["agentdojo", "--suite", "banking", "--defense", "ifc", "--limit", "1",
                                   "--injection-task", "injection_task_0", "--json", str(out)])
    assert res.exit_code == 0, res.output
    assert "U: user task done" in res.output and "i0" in res.output  # the per-pair matrix
    data = json.loads(out.read_text())
    assert data["summary"]["pairs"] == 1 and data["rows"][0]["attack_success"] is False


@pytest.mark.parametrize("attack", ["direct", "ignore_previous", "injecagent", "system_message", "tool_knowledge"])
def test_the_scripted_agent_follows_every_attack_format(attack):
    """Without a defense the injection is followed whatever wraps its goal (not only <INFORMATION>)."""
    uts, its = PAIRS["banking"]
    r = run_bench("banking", "none", uts, its, progress=False, unsee=Unsee, attack=attack)
    assert r["attack"] == attack and all(x["attack"] == attack for x in r["rows"])
    assert r["summary"]["attack_success"] >= 0.9 and r["summary"]["any_leak"] == 1.0
    assert all(x["error"] is None for x in r["rows"] + r["clean"])


def test_a_denial_of_service_attack_stops_the_agent():
    from unsee.eval.bench import attack_names

    assert "dos" in attack_names() and "manual" not in attack_names()  # (manual asks a person)
    r = run_bench("banking", "none", ["user_task_0", "user_task_3"], None, progress=False, unsee=Unsee,
                  attack="dos")
    assert len(r["rows"]) == 2  # one injection task per user task, as AgentDojo runs a DoS attack
    assert all(x["attack_success"] == (not x["utility"]) and not x["identifier_sink"] for x in r["rows"])
    assert r["summary"]["attack_success"] > 0 and r["summary"]["clean_utility"] == 1.0


def test_cli_runs_every_attack_and_rejects_an_unknown_one():
    from typer.testing import CliRunner

    res = CliRunner().invoke(make_app(Unsee), ["agentdojo", "--suite", "banking", "--attack", "all", "--limit", "1",
                                               "--injection-task", "injection_task_0", "--no-pairs"])
    assert res.exit_code == 0, res.output
    for name in ("direct", "injecagent", "felony_dos", "tool_knowledge"):
        assert name in res.output
    res = CliRunner().invoke(make_app(Unsee), ["agentdojo", "--suite", "banking", "--attack", "polite"])
    assert res.exit_code == 2 and "polite" in res.output


def test_cli_rejects_unknown_tasks_and_settings():
    from typer.testing import CliRunner

    app = make_app(Unsee)

    for args in (["--user-task", "user_task_999"], ["--verdict", "soon"], ["--model", "gpt-9"]):
        res = CliRunner().invoke(app, ["agentdojo", "--suite", "banking", *args])
        assert res.exit_code == 2, res.output


def test_a_pair_whose_user_typed_the_attacker_identifier_is_not_an_identifier_sink_attack():
    from agentdojo.task_suite.load_suites import get_suites
    from unsee.eval.bench import user_supplies_attacker_identifier

    travel, banking = get_suites("v1.2.2")["travel"], get_suites("v1.2.2")["banking"]
    # the injection mails passport data to the address the user asked to write to: a free-text leak
    assert user_supplies_attacker_identifier(travel.user_tasks["user_task_3"], travel.injection_tasks["injection_task_5"])
    assert not user_supplies_attacker_identifier(banking.user_tasks["user_task_0"],
                                                 banking.injection_tasks["injection_task_1"])
