"""Middleware benchmarks.

(a) Recording overhead per agent step: the same ``create_agent`` agent
    (scripted model, one trivial tool, ``InMemorySaver``) run with and without
    ``middleware=[u.middleware()]``; runs are interleaved after a warm-up and
    medians compared. One run = user input -> model (tool call) -> tool ->
    model (reply): 3 agent steps. Target: overhead <= 5 %.
(b) ``ProvenanceGraph.taint`` on a 100k-artifact random layered graph (each
    artifact has 1-3 parents among the previous ~50), median over roots of
    varying depth; only ``taint`` is timed. Target: <= 50 ms.
(c) What recording adds to a step, bare agent vs the same agent
    with ``u.middleware()``, interleaved block by block; every unsee block
    ends with ``u.flush()`` *inside* its timed region (and starts after an
    untimed one), so no work hides in the writer's queue:
    - fresh threads: ``FRESH_THREADS`` threads of one turn (3 steps) each,
      median over blocks of ms/step; target: added <= ``FRESH_TARGET_MS``
      (the lightest tracing layer's figure when the target was set);
    - a model that sleeps 50 ms per call: added % per step (target <= 2 %);
    - one thread of ``LONG_TURNS`` turns: ms/turn over the first and the last
      ``HISTORY_BLOCK`` turns; unsee's added ms/turn last / first says
      whether recording is O(history) per turn (target <= 1.5).
    Each row also prints the added CPU: of the process (every thread: steadier
    than wall time on a loaded machine) and of the agent's own thread (what the
    agent waits for when a free core runs unsee's writer meanwhile).

Run: ``python -m benchmarks.bench_middleware [--only c]`` (or ``python -m benchmarks``).
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence

STEPS_PER_RUN = 3  # model call, tool call, model call
OVERHEAD_TARGET = 0.05
TAINT_TARGET_MS = 50.0
FRESH_THREADS = 200
FRESH_BLOCK = 20
FRESH_TARGET_MS = 1.7
SLOW_MODEL_S = 0.05
SLOW_THREADS = 24
SLOW_BLOCK = 4
SLOW_TARGET = 0.02
LONG_TURNS = 400
HISTORY_BLOCK = 20
HISTORY_TARGET = 1.5


# -- (a) middleware overhead ------------------------------------------------------
def _agent_parts(sleep_s: float = 0.0):
    from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
    from langchain_core.tools import tool

    from unsee.plugins.model import ScriptedChatModel, call_id

    @tool
    def echo(text: str) -> str:
        """Echo the text back."""
        return f"echo: {text}"

    def policy(messages: Sequence[BaseMessage], tools: Sequence[str]) -> AIMessage:
        if sleep_s:
            time.sleep(sleep_s)  # a model's wait (releases the GIL, as a network call does)
        last = messages[-1]
        if isinstance(last, ToolMessage):
            return AIMessage(content=f"done ({last.content})")
        return AIMessage(content="", tool_calls=[
            {"name": "echo", "args": {"text": str(last.content)[:40]}, "id": call_id(messages), "type": "tool_call"}])

    return ScriptedChatModel(policy=policy), echo


def bench_overhead(runs: int = 40, warmup: int = 6, continuing: bool = False) -> dict:
    """Median wall time of one agent run with and without recording (interleaved)."""
    from langchain.agents import create_agent
    from langchain_core.messages import HumanMessage
    from langgraph.checkpoint.memory import InMemorySaver

    from unsee import Unsee

    model, echo = _agent_parts()
    with tempfile.TemporaryDirectory(prefix="unsee-bench-") as home:
        u = Unsee(home=home)
        plain = create_agent(model, [echo], system_prompt="You echo.", checkpointer=InMemorySaver())
        # The same hooks doing nothing: what any middleware of this shape costs in LangGraph.
        noop = create_agent(model, [echo], system_prompt="You echo.", checkpointer=InMemorySaver(),
                            middleware=[_NoopMiddleware()])
        recorded = create_agent(model, [echo], system_prompt="You echo.", checkpointer=InMemorySaver(),
                                middleware=[u.middleware()])
        times: dict[str, list[float]] = {"plain": [], "noop": [], "recorded": []}
        agents = {"plain": plain, "noop": noop, "recorded": recorded}

        def one(kind: str, i: int, record: bool) -> None:
            thread = f"{kind}-long" if continuing else f"{kind}-{i}"
            msg = {"messages": [HumanMessage(f"please echo message number {i}")]}
            cfg = {"configurable": {"thread_id": thread}}
            t0 = time.perf_counter()
            agents[kind].invoke(msg, cfg)
            dt = time.perf_counter() - t0
            if record:
                times[kind].append(dt)

        for i in range(warmup):
            one("plain", -1 - i, False)
            one("noop", -1 - i, False)
            one("recorded", -1 - i, False)
        for i in range(runs):
            order = ("plain", "noop", "recorded") if i % 2 == 0 else ("recorded", "noop", "plain")
            for kind in order:
                one(kind, i, True)
        t0 = time.perf_counter()
        u.flush()
        flush_s = time.perf_counter() - t0
        failures = u.recorder.failures + u.store.failures
        u.close()
    p = statistics.median(times["plain"])
    n = statistics.median(times["noop"])
    r = statistics.median(times["recorded"])
    return {
        "mode": "one long thread" if continuing else "fresh thread per run",
        "runs": runs, "plain_ms": p * 1e3, "recorded_ms": r * 1e3,
        "plain_step_ms": p * 1e3 / STEPS_PER_RUN, "recorded_step_ms": r * 1e3 / STEPS_PER_RUN,
        "ratio": r / p, "overhead": r / p - 1.0, "flush_ms": flush_s * 1e3, "failures": failures,
        "noop_step_ms": n * 1e3 / STEPS_PER_RUN, "ratio_vs_noop": r / n,
    }


def _noop_middleware_class():
    from langchain.agents.middleware import AgentMiddleware

    class Noop(AgentMiddleware):
        def before_agent(self, state, runtime):
            return None

        def after_agent(self, state, runtime):
            return None

        def wrap_model_call(self, request, handler):
            return handler(request)

        def wrap_tool_call(self, request, handler):
            return handler(request)

    return Noop


def _NoopMiddleware():
    return _noop_middleware_class()()


# -- (b) taint on a large graph ------------------------------------------------------
def build_graph(n: int = 100_000, window: int = 50, seed: int = 7):
    from unsee.middleware.graph import ProvenanceGraph
    from unsee.middleware.records import Artifact, ArtifactType

    rng = random.Random(seed)
    types = [ArtifactType.MODEL_TURN, ArtifactType.TOOL_CALL, ArtifactType.TOOL_RETURN,
             ArtifactType.SUMMARY, ArtifactType.REPLY]
    arts = []
    for i in range(n):
        if i == 0:
            parents: tuple[str, ...] = ()
        else:
            lo = max(0, i - window)
            k = min(rng.randint(1, 3), i - lo)
            parents = tuple(f"a{j}" for j in rng.sample(range(lo, i), k))
        type_ = ArtifactType.USER_INPUT if not parents else rng.choice(types)
        arts.append(Artifact(id=f"a{i}", session_id="bench", type=type_, parents=parents, seq=i + 1, step=i))
    return ProvenanceGraph(arts, session_id="bench")


def bench_taint(n: int = 100_000, repeats: int = 5) -> dict:
    t0 = time.perf_counter()
    g = build_graph(n)
    build_s = time.perf_counter() - t0
    fractions = [0.0, 0.001, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 0.999]
    rows = []
    for f in fractions:
        root = f"a{min(n - 1, int(f * n))}"
        samples = []
        size = 0
        for _ in range(repeats):
            t = time.perf_counter()
            closure = g.taint(root)
            samples.append(time.perf_counter() - t)
            size = len(closure)
        rows.append({"root": root, "closure": size, "ms": statistics.median(samples) * 1e3,
                     "best_ms": min(samples) * 1e3})
    return {
        "n": n, "build_s": build_s, "rows": rows,
        "median_ms": statistics.median(r["ms"] for r in rows),
        "max_ms": max(r["ms"] for r in rows),
    }


def _verdict(ok: bool) -> str:
    return "ok" if ok else "OVER TARGET"


# -- (c) what recording adds, bare vs unsee interleaved ----------------------------------
class _Pair:
    """The bare agent and the same agent recorded by a fresh ``Unsee`` (one home)."""

    def __init__(self, home: str, sleep_s: float = 0.0):
        from langchain.agents import create_agent
        from langgraph.checkpoint.memory import InMemorySaver

        from unsee import Unsee

        model, echo = _agent_parts(sleep_s)
        self.u = Unsee(home=home)
        self.agents = {
            "bare": create_agent(model, [echo], system_prompt="You echo.", checkpointer=InMemorySaver()),
            "unsee": create_agent(model, [echo], system_prompt="You echo.", checkpointer=InMemorySaver(),
                                  middleware=[self.u.middleware()]),
        }

    def turn(self, kind: str, thread: str, i: int) -> None:
        from langchain_core.messages import HumanMessage

        self.agents[kind].invoke({"messages": [HumanMessage(f"please echo message number {i}")]},
                                 {"configurable": {"thread_id": f"{kind}-{thread}"}})

    def block(self, kind: str, threads: Sequence[str], first: int) -> float:
        """Seconds for one turn in each of ``threads``; unsee's ends with its flush, timed.
        The block's process CPU seconds (every thread: the writer's too) go to ``self.cpu``, the
        calling thread's (the agent's; LangGraph runs tools on pool threads) to ``self.agent_cpu``."""
        if kind == "unsee":
            self.u.flush()  # untimed: a block does not pay for the one before it
        c0, a0, t0 = time.process_time(), time.thread_time(), time.perf_counter()
        for j, thread in enumerate(threads):
            self.turn(kind, thread, first + j)
        if kind == "unsee":
            self.u.flush()
        dt = time.perf_counter() - t0
        self.cpu, self.agent_cpu = time.process_time() - c0, time.thread_time() - a0
        return dt

    def failures(self) -> int:
        return self.u.recorder.failures + self.u.store.failures

    def close(self) -> None:
        self.u.close()


def bench_fresh(threads: int = FRESH_THREADS, block: int = FRESH_BLOCK, sleep_s: float = 0.0,
                warmup: int = 5) -> dict:
    """ms/step over fresh threads of one turn each, bare and unsee alternating block by block."""
    with tempfile.TemporaryDirectory(prefix="unsee-bench-") as home:
        pair = _Pair(home, sleep_s)
        for kind in ("bare", "unsee"):
            pair.block(kind, [f"warm-{i}" for i in range(warmup)], 0)
        per_step: dict[str, list[float]] = {"bare": [], "unsee": []}
        cpu: dict[str, list[float]] = {"bare": [], "unsee": []}
        agent_cpu: dict[str, list[float]] = {"bare": [], "unsee": []}
        for b in range(threads // block):
            names = [f"b{b}-{i}" for i in range(block)]
            for kind in (("bare", "unsee") if b % 2 == 0 else ("unsee", "bare")):
                per_step[kind].append(pair.block(kind, names, b * block) * 1e3 / (block * STEPS_PER_RUN))
                cpu[kind].append(pair.cpu * 1e3 / (block * STEPS_PER_RUN))
                agent_cpu[kind].append(pair.agent_cpu * 1e3 / (block * STEPS_PER_RUN))
        failures = pair.failures()
        pair.close()
    bare, unsee = statistics.median(per_step["bare"]), statistics.median(per_step["unsee"])
    # the added cost per block pair (same machine load), then its median
    added = statistics.median(u - b for u, b in zip(per_step["unsee"], per_step["bare"]))
    added_cpu = statistics.median(u - b for u, b in zip(cpu["unsee"], cpu["bare"]))
    added_agent = statistics.median(u - b for u, b in zip(agent_cpu["unsee"], agent_cpu["bare"]))
    return {"threads": threads, "bare_ms": bare, "unsee_ms": unsee, "added_ms": added,
            "added_pct": added / bare, "bare_cpu_ms": statistics.median(cpu["bare"]), "added_cpu_ms": added_cpu,
            "added_agent_cpu_ms": added_agent, "failures": failures}


def bench_long_thread(turns: int = LONG_TURNS, block: int = HISTORY_BLOCK) -> dict:
    """ms/turn over one thread's first and last ``block`` turns, bare and unsee alternating."""
    with tempfile.TemporaryDirectory(prefix="unsee-bench-") as home:
        pair = _Pair(home)
        for kind in ("bare", "unsee"):
            pair.block(kind, ["warm"], 0)
        per_turn: dict[str, list[float]] = {"bare": [], "unsee": []}
        cpu: dict[str, list[float]] = {"bare": [], "unsee": []}
        for b in range(turns // block):
            for kind in (("bare", "unsee") if b % 2 == 0 else ("unsee", "bare")):
                per_turn[kind].append(pair.block(kind, ["long"] * block, b * block) * 1e3 / block)
                cpu[kind].append(pair.cpu * 1e3 / block)
        failures = pair.failures()
        pair.close()
    first = {k: v[0] for k, v in per_turn.items()}
    last = {k: v[-1] for k, v in per_turn.items()}
    added_first, added_last = first["unsee"] - first["bare"], last["unsee"] - last["bare"]
    cpu_first, cpu_last = cpu["unsee"][0] - cpu["bare"][0], cpu["unsee"][-1] - cpu["bare"][-1]
    return {"turns": turns, "block": block, "first": first, "last": last, "added_first": added_first,
            "added_last": added_last, "growth": added_last / added_first if added_first > 0 else float("inf"),
            "cpu_added_first": cpu_first, "cpu_added_last": cpu_last,
            "cpu_growth": cpu_last / cpu_first if cpu_first > 0 else float("inf"),
            "per_turn": per_turn, "failures": failures}


def _failures_note(n: int) -> str:
    return f"  ({n} recording failures!)" if n else ""


def report_added_cost() -> None:
    print("\n(c) what recording adds, bare vs unsee interleaved by block (u.flush() timed at each "
          "unsee block's end)")
    r = bench_fresh()
    print(f"fresh threads ({r['threads']} x {STEPS_PER_RUN} steps, scripted model): bare {r['bare_ms']:.3f} "
          f"ms/step, unsee {r['unsee_ms']:.3f} ms/step, added {r['added_ms']:+.3f} ms/step "
          f"({r['added_pct']:+.1%})  verdict (<= +{FRESH_TARGET_MS} ms): "
          f"{_verdict(r['added_ms'] <= FRESH_TARGET_MS)}{_failures_note(r['failures'])}")
    print(f"  added CPU ms/step: process {r['added_cpu_ms']:+.3f} (bare {r['bare_cpu_ms']:.3f}), "
          f"agent's thread {r['added_agent_cpu_ms']:+.3f}")
    s = bench_fresh(SLOW_THREADS, SLOW_BLOCK, sleep_s=SLOW_MODEL_S, warmup=2)
    print(f"{SLOW_MODEL_S * 1e3:.0f} ms model ({s['threads']} x {STEPS_PER_RUN} steps): bare {s['bare_ms']:.2f} "
          f"ms/step, unsee {s['unsee_ms']:.2f} ms/step, added {s['added_ms']:+.2f} ms/step "
          f"({s['added_pct']:+.1%})  verdict (<= +{SLOW_TARGET:.0%}): "
          f"{_verdict(s['added_pct'] <= SLOW_TARGET)}{_failures_note(s['failures'])}")
    print(f"  added CPU ms/step: process {s['added_cpu_ms']:+.3f}, agent's thread {s['added_agent_cpu_ms']:+.3f} "
          f"({s['added_agent_cpu_ms'] / s['bare_ms']:+.1%} of a step: what a machine with an idle core adds, "
          f"the rest overlapping the model's wait)")
    h = bench_long_thread()
    print(f"one thread of {h['turns']} turns, ms/turn over turns 1-{h['block']} and the last {h['block']}:")
    print(f"  bare  {h['first']['bare']:8.2f} -> {h['last']['bare']:8.2f}   "
          f"(x{h['last']['bare'] / h['first']['bare']:.1f})")
    print(f"  unsee {h['first']['unsee']:8.2f} -> {h['last']['unsee']:8.2f}   "
          f"(x{h['last']['unsee'] / h['first']['unsee']:.1f})")
    print(f"  added {h['added_first']:+8.2f} -> {h['added_last']:+8.2f}   ratio {h['growth']:.2f}  "
          f"verdict (<= {HISTORY_TARGET}): {_verdict(h['growth'] <= HISTORY_TARGET)}"
          f"{_failures_note(h['failures'])}")
    print(f"  added process CPU ms/turn {h['cpu_added_first']:+.2f} -> {h['cpu_added_last']:+.2f}   "
          f"ratio {h['cpu_growth']:.2f}")


def main(sections: str = "abc") -> None:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"unsee middleware benchmarks  (python {sys.version.split()[0]}, {os.cpu_count()} cpus, "
          f"load {load:.1f}: figures are noisy on a busy machine)")

    if "a" in sections:
        report_overhead()
    if "b" in sections:
        report_taint()
    if "c" in sections:
        report_added_cost()


def report_overhead() -> None:
    print("\n(a) recording overhead per agent step (scripted model, 1 tool, InMemorySaver; "
          f"{STEPS_PER_RUN} steps/run, medians, interleaved)")
    print(f"{'mode':<22} {'runs':>4} {'plain ms/step':>14} {'recorded ms/step':>17} {'ratio':>6} "
          f"{'overhead':>9} {'added ms/step':>13} {'@250ms step':>11} {'flush ms':>9}  verdict (<= {OVERHEAD_TARGET:.0%})")
    for continuing in (False, True):
        r = bench_overhead(continuing=continuing)
        print(f"{r['mode']:<22} {r['runs']:>4} {r['plain_step_ms']:>14.3f} {r['recorded_step_ms']:>17.3f} "
              f"{r['ratio']:>6.3f} {r['overhead']:>+8.1%} {r['recorded_step_ms'] - r['plain_step_ms']:>13.3f} "
              f"{(r['recorded_step_ms'] - r['plain_step_ms']) / 250:>11.1%} "
              f"{r['flush_ms']:>9.1f}  "
              f"{_verdict(r['overhead'] <= OVERHEAD_TARGET)}"
              + (f"  ({r['failures']} recording failures!)" if r["failures"] else ""))

        print(f"{'':<22} {'':>4} no-op middleware: {r['noop_step_ms']:.3f} ms/step; recorded/no-op ratio "
              f"{r['ratio_vs_noop']:.3f} ({r['ratio_vs_noop'] - 1:+.1%})")
    print("  (the scripted model costs ~0 ms, so 'overhead' is against bare LangGraph; '@250ms step' is the "
          "added time relative to a 250 ms model step; the no-op row is the same hooks doing nothing)")


def report_taint() -> None:
    t = bench_taint()
    print(f"\n(b) taint on a {t['n']:,}-artifact layered graph (1-3 parents among previous 50; "
          f"built in {t['build_s']:.1f} s, not timed)")
    print(f"{'root':>8} {'|closure|':>10} {'median ms':>10} {'best ms':>8}")
    for row in t["rows"]:
        print(f"{row['root']:>8} {row['closure']:>10,} {row['ms']:>10.2f} {row['best_ms']:>8.2f}")
    print(f"median over roots: {t['median_ms']:.2f} ms (max {t['max_ms']:.2f} ms)  "
          f"verdict (<= {TAINT_TARGET_MS:.0f} ms): {_verdict(t['median_ms'] <= TAINT_TARGET_MS)}")


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default="abc", help="sections to run, e.g. 'c' (default: abc)")
    main(ap.parse_args().only)
