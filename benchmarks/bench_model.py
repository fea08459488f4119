"""Benchmark of the local replay runtime (CPU backend by default).

Prints:
- prefilled tokens over a 10-turn agent session (``create_agent`` + checkpointer,
  one thread), cached (longest-common-prefix reuse) vs stateless (every prompt
  prefilled from scratch), and their ratio (target >= 5x);
- crop time at context lengths 256, 1k, 4k and just under 8k tokens (target:
  flat, < 1 ms);
- prefill and greedy decode throughput.

    python -m benchmarks.bench_model [--backend cpu|exllamav2] [--model-cache DIR] [--json]

The converted model folder is the per-user model cache (``--model-cache``,
else ``$UNSEE_MODEL_CACHE``, else ``~/.unsee/models``), converted on first use.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

TURNS = [
    "Hi! My name is Ada and I manage the billing team.",
    "What is the account number? Use the lookup tool.",
    "Thanks. Which team do I manage?",
    "Summarise what we discussed in one sentence.",
    "Look up the code for the front door.",
    "What is my name?",
    "Give me one tip for writing clear emails.",
    "Look up the manager of the billing team.",
    "What was the account number again?",
    "Thanks, that is all for today.",
]


def bench_session(runtime: Any, max_tokens: int = 24) -> dict[str, Any]:
    """10 agent turns on one thread; compare cached vs stateless prefill."""
    from langchain.agents import create_agent
    from langchain_core.messages import HumanMessage
    from langchain_core.tools import tool
    from langgraph.checkpoint.memory import InMemorySaver

    from unsee.plugins.model import LocalChatModel

    @tool
    def lookup(key: str) -> str:
        """Look up a value (account numbers, door codes, people) by key."""
        return {"account": "4417-2231", "door": "0815"}.get(key.split("_")[0].lower(), "Grace Hopper")

    model = LocalChatModel(runtime=runtime, max_tokens=max_tokens)
    agent = create_agent(
        model=model, tools=[lookup], checkpointer=InMemorySaver(),
        system_prompt="You are a concise assistant. Use tools when asked to look something up.",
    )
    config = {"configurable": {"thread_id": "bench"}, "recursion_limit": 12}
    t0 = time.perf_counter()
    calls = 0
    for text in TURNS:
        out = agent.invoke({"messages": [HumanMessage(text)]}, config)
        calls += sum(1 for m in out["messages"] if getattr(m, "response_metadata", {}).get("unsee"))
    wall = time.perf_counter() - t0
    c = model.session_counters("bench")
    stateless = c["prefilled"] + c["reused"]  # every prompt token, prefilled from scratch
    return {
        "turns": len(TURNS),
        "model_calls": c["calls"],
        "prefilled_cached": c["prefilled"],
        "reused": c["reused"],
        "prefilled_stateless": stateless,
        "ratio": stateless / max(1, c["prefilled"]),
        "decoded": c["decoded"],
        "wall_s": wall,
    }


def bench_crop(runtime: Any, lengths=(256, 1024, 4096, 8190), reps: int = 10) -> dict[int, float]:
    """Median seconds of one ``crop`` (dropping 8 tokens) at each context length.

    SmolLM2's context is 8192 tokens, hence 8190 for "8k". After each timed
    crop the 8 tokens are prefilled again (not timed).
    """
    rt = runtime.spawn()
    top = max(lengths)
    ids = [100 + (i * 7919) % 40000 for i in range(top)]
    for start in range(0, top, 1024):  # chunked prefill bounds activation memory
        rt.prefill(ids[start:start + 1024])
    out: dict[int, float] = {}
    for n in sorted(lengths, reverse=True):
        rt.crop(n)
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            rt.crop(n - 8)
            times.append(time.perf_counter() - t0)
            rt.prefill(ids[n - 8:n])
        out[n] = statistics.median(times)
    rt.reset()
    return out


def bench_throughput(runtime: Any, prefill_tokens: int = 512, decode_tokens: int = 32,
                     reps: int = 3) -> dict[str, float]:
    """Median prefill and greedy-decode throughput after one warm-up of the
    same shapes (the first large forward pays for kernel selection)."""
    ids = runtime.tokenize("The quick brown fox jumps over the lazy dog. " * 64)[:prefill_tokens]
    prefill, decode = [], []
    for i in range(reps + 1):
        rt = runtime.spawn()
        t0 = time.perf_counter()
        rt.prefill(ids)
        p = time.perf_counter() - t0
        t0 = time.perf_counter()
        out = rt.decode(decode_tokens, stop_token_ids=())
        d = time.perf_counter() - t0
        rt.reset()
        if i:  # run 0 is the warm-up
            prefill.append(len(ids) / p)
            decode.append(len(out.tokens) / d)
    return {
        "prefill_tok_s": statistics.median(prefill),
        "decode_tok_s": statistics.median(decode),
        "prefill_tokens": len(ids),
        "decode_tokens": decode_tokens,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="cpu")
    parser.add_argument("--model-cache", default=None, help="converted model folder (default: per-user cache)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--skip-session", action="store_true")
    args = parser.parse_args(argv if argv is not None else [])

    from unsee.plugins.model import load_runtime

    t0 = time.perf_counter()
    runtime = load_runtime(args.backend, cache_dir=args.model_cache)
    results: dict[str, Any] = {"backend": runtime.backend, "load_s": time.perf_counter() - t0}
    results["throughput"] = bench_throughput(runtime)
    results["crop_s"] = bench_crop(runtime)
    if not args.skip_session:
        results["session"] = bench_session(runtime)

    if args.json:
        print(json.dumps(results, indent=2))
        return results
    print(f"backend {results['backend']}  (load {results['load_s']:.1f} s)")
    tp = results["throughput"]
    print(f"prefill  {tp['prefill_tok_s']:7.1f} tok/s  ({tp['prefill_tokens']} tokens)")
    print(f"decode   {tp['decode_tok_s']:7.1f} tok/s  ({tp['decode_tokens']} tokens, greedy)")
    for n, s in sorted(results["crop_s"].items()):
        print(f"crop at {n:5d} tokens: {s * 1e6:8.1f} us (median)")
    if "session" in results:
        s = results["session"]
        print(
            f"10-turn agent session: prefilled {s['prefilled_cached']} cached vs "
            f"{s['prefilled_stateless']} stateless -> {s['ratio']:.1f}x fewer "
            f"({s['model_calls']} model calls, {s['reused']} reused, {s['decoded']} decoded, "
            f"{s['wall_s']:.0f} s)"
        )
    return results


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
