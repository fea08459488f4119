"""Middleware benchmarks.

(a) Recording overhead per agent step: the same ``create_agent`` agent
    (scripted model, one trivial tool, ``InMemorySaver``) run with and without
    ``middleware=[u.middleware()]``; runs are interleaved after a warm-up and
    medians compared. One run = user input -> model (tool call) -> tool ->
    model (reply): 3 agent steps. Target: overhead <= 5 %.
(b) ``ProvenanceGraph.taint`` on a 100k-artifact random layered graph (each
    artifact has 1-3 parents among the previous ~50), median over roots of
    varying depth; only ``taint`` is timed. Target: <= 50 ms.

Run: ``python -m benchmarks.bench_middleware`` (or ``python -m benchmarks``).
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


# -- (a) middleware overhead ------------------------------------------------------
def _agent_parts():
    from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
    from langchain_core.tools import tool

    from unsee.plugins.eval import ScriptedChatModel, call_id

    @tool
    def echo(text: str) -> str:
        """Echo the text back."""
        return f"echo: {text}"

    def policy(messages: Sequence[BaseMessage], tools: Sequence[str]) -> AIMessage:
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


def main() -> None:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"unsee middleware benchmarks  (python {sys.version.split()[0]}, {os.cpu_count()} cpus, "
          f"load {load:.1f}: figures are noisy on a busy machine)")

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

    t = bench_taint()
    print(f"\n(b) taint on a {t['n']:,}-artifact layered graph (1-3 parents among previous 50; "
          f"built in {t['build_s']:.1f} s, not timed)")
    print(f"{'root':>8} {'|closure|':>10} {'median ms':>10} {'best ms':>8}")
    for row in t["rows"]:
        print(f"{row['root']:>8} {row['closure']:>10,} {row['ms']:>10.2f} {row['best_ms']:>8.2f}")
    print(f"median over roots: {t['median_ms']:.2f} ms (max {t['max_ms']:.2f} ms)  "
          f"verdict (<= {TAINT_TARGET_MS:.0f} ms): {_verdict(t['median_ms'] <= TAINT_TARGET_MS)}")


if __name__ == "__main__":
    main()
