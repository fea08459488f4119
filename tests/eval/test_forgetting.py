"""``unsee eval forgetting`` with the scripted stand-in: each strategy's leaks are the
consequences of the stand-in's documented rules (unsee/eval/stand_in.py); a test fails
when a strategy's implementation breaks them."""

import json

import pytest
from typer.testing import CliRunner

from unsee import Unsee
from unsee.middleware.errors import InvalidArgument
from unsee.plugins.erasure import holds_target
from unsee.eval.forgetting import run_forgetting
from unsee.eval.metrics import PROBES
from unsee.eval.suites import generate, load, save
from unsee.plugins.forget import UnknownStrategy

ALL = ["B0", "B1", "B2", "B3", "B4", "B5", "B5'", "B6", "B7", "B8", "B9"]


@pytest.fixture(scope="module")
def support():
    eps = generate("support", 3, seed=3)
    assert {e.entry for e in eps} == {"tool", "user", "memory"}
    r = run_forgetting(eps, ALL, unsee=Unsee)
    return r, {row.strategy: row for row in r.rows}


@pytest.fixture(scope="module")
def preference():
    r = run_forgetting(generate("preference", 2, seed=0), ["B0", "B2", "B5", "B6", "B7"], unsee=Unsee)
    return r, {row.strategy: row for row in r.rows}


def probes_of(result, strategy):
    return [run.probes for run in result.runs if run.measure.strategy == strategy]


def test_b7_and_b5_forget_everything(support, preference):
    for result, rows in (support, preference):
        for code in ("B5", "B7"):
            row = rows[code]
            assert row.any_leak_overall == 0 and row.leak_at_probes == 0 and row.leak_at_5 == 0, code
            assert row.cad == 0 and row.agreement == 1.0, code
    assert preference[1]["B7"].residue == 0.0


def test_b0_and_b1_leak_where_they_should(support):
    _, rows = support
    for code in ("B0", "B1"):
        leak = rows[code].any_leak
        assert leak["summaries"] == leak["messages"] == leak["records"] == 1.0, code
        assert leak["routing_args"] > 0  # a transfer routed to the account just read
        assert leak["memory"] > 0  # the episode whose target is a memory item
        assert rows[code].leak_at_probes == 1.0


def test_b2_leaks_under_introspection_and_enumeration_not_the_direct_probe(support):
    result, _ = support
    for probes in probes_of(result, "B2"):
        target = next(e.target for e in result.episodes if e.target in probes["introspection"])
        assert holds_target(probes["introspection"], target) and holds_target(probes["enumeration"], target)
        assert not holds_target(probes["direct"], target)


def test_b3_leaks_through_summaries_and_plans(support):
    leak = support[1]["B3"].any_leak
    assert leak["summaries"] > 0 and leak["plans"] > 0


def test_b4_over_deletes(support):
    assert support[1]["B4"].cad > 0


def test_b6_leaks_a_paraphrase(support):
    result, rows = support
    assert rows["B6"].any_leak["messages"] > 0
    for run in (r for r in result.runs if r.measure.strategy == "B6"):
        ep = next(e for e in result.episodes if e.id == run.measure.episode)
        texts = json.dumps(run.state.texts)
        assert ep.target not in texts  # every exact copy redacted ...
        assert ep.target.replace("-", "") in texts  # ... the separator-free restatement is not


def test_b8_leaks_free_text_at_the_b0_rate_and_b9_does_not(support):
    rows = support[1]
    assert rows["B8"].any_leak == rows["B0"].any_leak
    assert rows["B9"].any_leak_overall == 0


def test_revoked_preference_residue(preference):
    rows = preference[1]
    assert rows["B2"].residue == 1.0 and rows["B2"].any_leak["answer"] == 0  # acted on, never stated
    assert rows["B6"].residue == 1.0 and rows["B6"].any_leak_overall == 0  # the stand-in's paraphrase
    assert rows["B5"].residue == 0.0


def test_residue_oracle_variant():
    """Handed the excluded airline as well, B6 (every artifact) drops to B5's rate; B3 (the
    entry only) keeps acting on the paraphrase its derived artifacts hold."""
    eps = generate("preference", 2, seed=0)
    rows = {r.strategy: r for r in run_forgetting(eps, ["B3", "B6", "B7"], unsee=Unsee, oracle=True).rows}
    assert (rows["B3"].residue, rows["B6"].residue, rows["B7"].residue) == (1.0, 0.0, 0.0)
    with pytest.raises(InvalidArgument):
        run_forgetting(generate("support", 1), ["B6"], unsee=Unsee, oracle=True)


def test_significance_and_tokens(support):
    result, rows = support
    assert result.significance["B7"]["B0"] < 0.2 and result.significance["B7"]["B5"] == 1.0
    assert rows["B5"].tokens > 0 and rows["B0"].tokens == 0


def test_episodes_are_reproducible(tmp_path):
    a, b = generate("support", 4, seed=7), generate("support", 4, seed=7)
    assert a == b and a != generate("support", 4, seed=8)
    save(a, tmp_path / "eps.json")
    assert load(tmp_path / "eps.json") == a


@pytest.mark.parametrize("call, error", [
    (lambda: generate("nope", 1), InvalidArgument),
    (lambda: generate("support", 0), InvalidArgument),
    (lambda: run_forgetting(generate("support", 1), ["B99"], unsee=Unsee), UnknownStrategy),
    (lambda: run_forgetting(generate("support", 1), ["B7"], unsee=Unsee, model="gpt-x"), InvalidArgument),
    (lambda: run_forgetting([], ["B7"], unsee=Unsee), InvalidArgument),
])
def test_bad_input(call, error):
    with pytest.raises(error):
        call()


@pytest.mark.parametrize("args", [["--suite", "nope"], ["--strategies", "B0,B99"], ["--episodes", "0"],
                                  ["--model", "gpt-x"], ["--model", "openai"],
                                  ["--model", "openai", "--base-url", "http://127.0.0.1:9/v1"],
                                  ["--samples", "0"], ["--suite", "support", "--oracle"]])
def test_cli_bad_input_exits_2(args):
    from unsee.cli import app

    res = CliRunner().invoke(app, ["eval", "forgetting", *args])
    assert res.exit_code == 2, res.output


def test_cli_runs_and_writes_json(tmp_path):
    from unsee.cli import app

    out, png = tmp_path / "r.json", tmp_path / "r.png"
    res = CliRunner().invoke(app, ["eval", "forgetting", "--strategies", "B0,B7", "--episodes", "1",
                                   "--json", str(out), "--plot", str(png)])
    assert res.exit_code == 0, res.output
    assert "B7" in res.output and json.loads(out.read_text())["rows"]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.model
def test_on_the_local_model():
    """The real local CPU model (small: one episode, B0 and B7, B5 as the reference): B7 leaves the
    target in no channel, the decoded KV cache included, under no probe and in neither of two
    sampled probe answer sets (two, not the paper's five: CI time), and agrees with B5; B0's cache
    still holds it."""
    r = run_forgetting(generate("support", 1, seed=2), ["B0", "B7"], unsee=Unsee, model="local",
                       samples=2)  # 7 turns
    rows = {row.strategy: row for row in r.rows}
    assert rows["B0"].any_leak["kv_cache"] == 1.0
    b7 = rows["B7"]
    assert b7.any_leak_overall == 0 and b7.leak_at_probes == 0 and b7.leak_at_5 == 0
    assert b7.agreement == 1.0 and b7.tokens > 0  # the runtime's own counters
    run = next(x for x in r.runs if x.measure.strategy == "B7")
    sampled = {kind: {run.probes[f"{kind}@{k}"] for k in range(2)} for kind in PROBES}
    assert any(len(answers) > 1 for answers in sampled.values())  # sampled at 0.8, not five greedy copies


def test_windowed_suite_where_provenance_pays():
    """Behind a one-turn context window, the turns after the one that read the target are
    independent of it: B7 re-materialises them (B5' decodes them again), and still agrees with B5."""
    eps = generate("windowed", 3, seed=0)
    assert all(e.window == 1 and e.suite == "windowed" for e in eps)
    rows = {row.strategy: row for row in run_forgetting(eps, ["B5", "B5'", "B7"], unsee=Unsee).rows}
    for code in ("B5'", "B7"):
        assert rows[code].any_leak_overall == 0 and rows[code].agreement == 1.0, code
    assert rows["B7"].tokens < rows["B5'"].tokens < rows["B5"].tokens


@pytest.fixture(scope="module")
def agentdojo():
    """One episode of each AgentDojo suite; the scripted model is the adapter's injection-following policy."""
    eps = generate("agentdojo", 4, seed=0)
    assert [e.source["suite"] for e in eps] == ["banking", "slack", "travel", "workspace"]
    r = run_forgetting(eps, ["B0", "B3", "B5", "B7", "B8", "B9"], unsee=Unsee)
    return r, {row.strategy: row for row in r.rows}


def test_agentdojo_late_injection(agentdojo):
    """The target is the injected block a detector flags after the run; its traces (the attacker's
    IBAN, e-mail or URL) count as leaks. The injection steered routing arguments under B0, which
    B3's redaction of the observation leaves, and B7 and B9 rebuild the counterfactual."""
    result, rows = agentdojo
    assert all(e.target.startswith("<INFORMATION>") and e.entry == "tool" for e in result.episodes)
    assert rows["B0"].any_leak["routing_args"] > 0 and rows["B0"].any_leak["answer"] == 1.0
    assert rows["B3"].any_leak["routing_args"] == rows["B0"].any_leak["routing_args"]
    assert rows["B8"].any_leak == rows["B0"].any_leak
    for code in ("B5", "B7", "B9"):
        row = rows[code]
        assert row.any_leak_overall == 0 and row.leak_at_probes == 0 and row.leak_at_5 == 0, code
        assert row.cad == 0 and row.agreement == 1.0, code
    assert rows["B7"].tokens < rows["B5"].tokens


def test_agentdojo_episodes_are_reproducible():
    a = generate("agentdojo", 2, seed=5)
    assert a == generate("agentdojo", 2, seed=5)
    assert a[0].traces and all(t not in a[0].turns[0].lower() for t in a[0].traces)


@pytest.mark.model
def test_on_an_openai_compatible_endpoint(endpoint):
    """``--model openai`` against the project's own OpenAI-compatible server (the local model behind
    it): the episodes run through LangChain's ChatOpenAI, tokens are the endpoint's usage counts."""
    r = run_forgetting(generate("preference", 1, seed=0), ["B7"], unsee=Unsee, model="openai",
                       base_url=endpoint, samples=2)  # (B5 runs as the reference, without probes)
    (b7,) = r.rows
    assert r.model == "openai" and b7.any_leak_overall == 0 and b7.agreement == 1.0 and b7.residue == 0.0
    assert b7.tokens > 0
    (run,) = r.runs
    assert {"direct@0", "direct@1"} <= set(run.probes)  # the sampled answer sets behind Leak@k
