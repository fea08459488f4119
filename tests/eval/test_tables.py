"""The CLI's tables fit a 100-column terminal: no line wider, no header cut with an ellipsis.

Pure rendering from result dicts and reports (no AgentDojo, no run): the widest cases the
commands print (every attack x defense x verdict, 19 forgetting columns, a local model's long
tool arguments and notes in a forget report).
"""

from __future__ import annotations

import io
from types import SimpleNamespace

import pytest
from rich.console import Console

from unsee.eval import metrics
from unsee.eval.forgetting_report import print_table
from unsee.eval.tables import print_corpora_table, print_detector_report, print_pairs, print_summary
from unsee.plugins.forget import ForgetReport, SideEffect
from unsee.report_view import render_report

WIDTH = 100
SUMMARY = dict(pairs=144, utility=0.5, attack_success=0.125, attack_success_identifier_sink=1.0,
               identifier_sink_pairs=123, any_leak=0.333, clean_utility=0.75, forgets=12, clean_forgets=3)


def _bench(print_fn) -> None:
    runs = [dict(suite=s, attack=a, defense=d, verdict=v, model="local", summary=SUMMARY)
            for s in ("banking", "workspace") for a in ("important_instructions", "tool_knowledge")
            for d in ("detect+forget", "ifc+forget") for v in ("sync", "late")]
    print_fn(lambda c: print_summary(runs, c))
    print_fn(lambda c: print_summary(runs[:1], c))


def _bench_reconciled(print_fn) -> None:
    summary = dict(SUMMARY, attack_success_after_reconcile=0.125, effect_remains=0.0417, effect_pairs=144,
                   utility_after_reconcile=0.875, compensated=1234, stays={"update_password": 16, "post_webpage": 42})
    runs = [dict(suite=s, attack=a, defense=d, verdict="late", reconcile=r, model="scripted", summary=summary)
            for s in ("banking", "workspace") for a in ("important_instructions", "tool_knowledge")
            for d in ("detect+forget", "ifc+forget") for r in ("compensate", "all")]
    print_fn(lambda c: print_summary(runs, c))
    print_fn(lambda c: print_summary(runs[:1], c))
    print_fn(lambda c: print_summary([dict(runs[0], reconcile="none"), runs[0]], c))


def _pairs(print_fn) -> None:
    rows = [dict(user_task=f"user_task_{u}", injection_task=f"injection_task_{i}", utility=u % 2,
                 attack_success=i % 3 == 0) for u in range(40) for i in range(14)]
    clean = [dict(user_task=f"user_task_{u}", utility=True) for u in range(40)]
    print_fn(lambda c: print_pairs(dict(suite="workspace", attack="important_instructions", defense="ifc+forget",
                                        verdict="late", rows=rows, clean=clean), c))


def _detectors(print_fn) -> None:
    attacks = ("direct", "ignore_previous", "important_instructions", "injecagent", "tool_knowledge")
    groups = [f"{s}/{a}" for s in ("banking", "slack", "travel", "workspace") for a in attacks]
    result = dict(detector="classifier:/models/prompt-guard", min_score=0.5, group_sizes=dict.fromkeys(groups, 123),
                  recall_by_attack=dict.fromkeys(attacks, 0.999), recall_by_group=dict.fromkeys(groups, 1.0),
                  cases_false_positive_rate=None, cases_negatives=0, cases_recall=None, cases_positives=0,
                  recall=0.9, positives=1000, false_positive_rate=0.01, negatives=500, hard_false_positive_rate=0.1,
                  hard_negatives=50, hard_recall=0.8, hard_positives=60, ms_per_1000=1234.0, outputs=1500,
                  seconds=12.3)
    print_fn(lambda c: print_detector_report(result, (), c))


def _corpora(print_fn) -> None:
    row = dict(recall=0.4545, caught=20, positives=44, false_positive_rate=0.135, flagged=5, negatives=37,
               outputs=81, ms_per_1000=123456.7)
    results = [dict(detector=d, min_score=0.5, corpora=dict.fromkeys(("agentdojo", "hard-cases", "heldout-1",
                                                                      "heldout-2", "cases"), row))
               for d in ("toolwall-guard 0.4.0 (rules)", "classifier:/home/someone/models/prompt-guard-86m-onnx")]
    print_fn(lambda c: print_corpora_table(results, c))


def _forgetting(print_fn) -> None:
    rows = [SimpleNamespace(strategy=s, any_leak=dict.fromkeys(metrics.CHANNELS, 0.25), any_leak_overall=1.0,
                            cad=0.5, agreement=1.0, leak_at_probes=0.12, leak_at_5=0.0, residue=-0.25,
                            tokens=12345.0) for s in ("B0", "B5", "B5'", "B7", "B9")]
    result = SimpleNamespace(oracle=True, suite="preference", model="scripted", seed=0, episodes=[None] * 6,
                             rows=rows, significance={"B7": {"B0": 0.01, "B5": 1.0}})
    print_fn(lambda c: print_table(result, c))


def _forget_report(print_fn) -> None:
    note = ("the counterfactual diverged from the record at mt-7f7d56494017; the local model wrote a "
            "different case note, so the suffix after it was decoded again")
    effect = SideEffect(tool="save_case_note", args={"note": "Ticket T-1001: order 5521, blender arrived broken. "
                                                             "The customer asked for a refund by email." * 2},
                        effect="write", result="Case note saved. " * 6, status="deferred")
    report = ForgetReport(session_id="demo", strategy="B7", event_id="e" * 32, target_hash="h", tau=2,
                          closure_size=29, checkpoint_id="ckpt-03c4890af69e", checkpoint_kind="session_start",
                          committed=True, notes=[note], deferred_side_effects=[effect], erased_clean=True,
                          receipt="/home/someone/projects/support-agent/.unsee/receipts/" + "b" * 32 + ".json",
                          also_held_by={"demo-2": 3})
    print_fn(lambda c: c.print(render_report(report)))


@pytest.mark.parametrize("case", [_bench, _bench_reconciled, _pairs, _detectors, _corpora, _forgetting,
                                  _forget_report])
def test_tables_fit_100_columns(case):
    outputs = []

    def print_fn(render) -> None:
        buf = io.StringIO()
        render(Console(file=buf, width=WIDTH, color_system=None))
        outputs.append(buf.getvalue())

    case(print_fn)
    for out in outputs:
        too_wide = [line for line in out.splitlines() if len(line) > WIDTH]
        assert not too_wide, out
        assert "…" not in out, out
