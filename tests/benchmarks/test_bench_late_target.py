"""``bench_late_target`` runs as ``make bench`` runs it (tiny sizes) and prints every ratio.

The figures themselves are the benchmark's (docs/performance.md); this only keeps the
module working: both agents, B7 against the floor of the same round, each ratio against
its target, and the forget's steps un-patched afterwards.
"""

from __future__ import annotations

import re


def test_bench_late_target_prints_each_ratio(capsys):
    from benchmarks import bench_late_target
    from unsee.plugins.forget import forgetter, pipeline, replay

    before = (forgetter.run_replay, forgetter.swap_in, forgetter.Forgetter.make_plan, replay.fork_state,
              pipeline.RevocationPipeline.record)
    bench_late_target.main(["--turns", "4,6", "--repeat", "2"])
    out = capsys.readouterr().out
    for agent in ("full-state", "DeltaChannel"):
        assert f"{agent}: suffix fixed at 3 turns; 2 rounds" in out
    assert out.count("ratio 6/4 turns") == 2
    for row in ("B7", "LangGraph floor", "unsee part"):
        assert len(re.findall(rf"^  {row} +[0-9.]+x \[.*\]  (PASS|FAIL)", out, re.M)) == 2, row
    assert out.count("<- the target") == 2
    assert out.count("where unsee's part goes") == 2
    after = (forgetter.run_replay, forgetter.swap_in, forgetter.Forgetter.make_plan, replay.fork_state,
             pipeline.RevocationPipeline.record)
    assert after == before  # the phase timers are gone
