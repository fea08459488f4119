"""Benchmark of the local replay runtime (CPU backend by default).

Prints:
- prefilled tokens over a 10-turn agent session (``create_agent`` + checkpointer,
  one thread), cached (longest-common-prefix reuse) vs stateless (every prompt
  prefilled from scratch), and their ratio (target >= 5x);
- crop time at context lengths 256, 1k, 4k and just under 8k tokens (target:
  flat, < 1 ms);
- prefill and greedy decode throughput;
- on the CPU backend, all of that for two decode paths in one run, interleaved:
  "before" (the previous path, ``UNSEE_CPU_DECODE=legacy``) and "after" (the
  fast path, the default), with their ratios, plus the wall time of the demo's
  forget (``unsee demo --model local``: recorded, then B7) on each path.

    python -m benchmarks.bench_model [--backend cpu|exllamav2] [--model-cache DIR] [--json]
        [--skip-session] [--skip-demo] [--no-compare] [--reps N]

The converted model folder is the per-user model cache (``--model-cache``,
else ``$UNSEE_MODEL_CACHE``, else ``~/.unsee/models``), converted on first use.
The whole comparison takes ~6 min on the 2-core VM (the demo runs twice).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
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
    return compare_throughput({"only": runtime}, prefill_tokens, decode_tokens, reps)["only"]


#: a chat prompt whose reply is new text (drafts rarely match), for the decode figures
CHAT = [{"role": "user", "content": "Write a short story about a cat who opens a bakery in Lisbon."}]


def _timed(fn: Any) -> tuple[Any, float, float]:
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w, time.process_time() - c


def compare_throughput(runtimes: dict[str, Any], prefill_tokens: int = 512, decode_tokens: int = 32,
                       reps: int = 3, chat_tokens: int = 48) -> dict[str, dict[str, float]]:
    """Throughput of each runtime, the runtimes interleaved within each repetition
    (the machine's load moves; interleaving keeps the comparison fair). Medians
    of ``reps`` after one warm-up. Figures (tok/s):

    - ``prefill_tok_s``: ``prefill_tokens`` tokens of repeated text on an empty cache;
    - ``decode_tok_s``: ``decode_tokens`` greedy tokens after that text (the
      model repeats it: speculative drafts match almost always);
    - ``decode_plain_tok_s``: the same with one token per forward pass (drafts off);
    - ``decode_chat_tok_s``: ``chat_tokens`` tokens of a chat reply (new text).
    """
    first = next(iter(runtimes.values()))
    ids = first.tokenize("The quick brown fox jumps over the lazy dog. " * 64)[:prefill_tokens]
    chat = first.apply_chat_template(CHAT)
    acc: dict[str, dict[str, list[float]]] = {name: {} for name in runtimes}

    def add(name: str, key: str, value: float) -> None:
        acc[name].setdefault(key, []).append(value)

    for i in range(reps + 1):
        for name, runtime in runtimes.items():
            rt = runtime.spawn()
            _, p, pc = _timed(lambda: rt.prefill(ids))
            out, d, dc = _timed(lambda: rt.decode(decode_tokens, stop_token_ids=()))
            rt.crop(len(ids))
            saved = getattr(rt, "draft_max", 0)
            rt.draft_max = 0
            plain, dp, _ = _timed(lambda: rt.decode(decode_tokens, stop_token_ids=()))
            rt.draft_max = saved
            rt.reset()
            rt = runtime.spawn()
            rt.prefill(chat)
            reply, dchat, _ = _timed(lambda: rt.decode(chat_tokens, stop_token_ids=()))
            rt.reset()
            if i:  # run 0 is the warm-up
                add(name, "prefill_tok_s", len(ids) / p)
                add(name, "prefill_cpu_tok_s", len(ids) / pc)
                add(name, "decode_tok_s", len(out.tokens) / d)
                add(name, "decode_cpu_tok_s", len(out.tokens) / dc)
                add(name, "decode_plain_tok_s", len(plain.tokens) / dp)
                add(name, "decode_chat_tok_s", len(reply.tokens) / dchat)
                add(name, "same_tokens", float(out.tokens == plain.tokens))
    res = {name: {k: statistics.median(v) for k, v in figures.items()} for name, figures in acc.items()}
    for r in res.values():
        r.update(prefill_tokens=len(ids), decode_tokens=decode_tokens, chat_tokens=chat_tokens)
    return res


def bench_demo_forget(mode: str, model_cache: str | None = None) -> dict[str, Any]:
    """``unsee demo --model local`` (record the support session, then forget the card
    number with B7) on the decode path ``mode`` ("fast" or "legacy"); the forget
    report's wall time and token counts, the recording's wall time."""
    from rich.console import Console

    from unsee.demo import run_demo

    saved = {k: os.environ.get(k) for k in ("UNSEE_CPU_DECODE", "UNSEE_MODEL_CACHE")}
    os.environ["UNSEE_CPU_DECODE"] = mode
    if model_cache:
        os.environ["UNSEE_MODEL_CACHE"] = model_cache
    try:
        with tempfile.TemporaryDirectory(prefix="unsee-bench-demo-") as tmp:
            t0 = time.perf_counter()
            res = run_demo(Path(tmp) / "home", "demo", Path(tmp) / "trace.json",
                           console=Console(file=io.StringIO(), width=200), model="local")
            total = time.perf_counter() - t0
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    rep = res["report"]
    return {"forget_wall_s": rep["wall_time_s"], "demo_wall_s": total,
            "prefilled": rep["tokens_prefilled"], "decoded": rep["tokens_decoded"],
            "reused": rep["tokens_reused"], "turns_decoded": rep["model_turns_decoded"],
            "leaked": res["leaked"]}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="cpu")
    parser.add_argument("--model-cache", default=None, help="converted model folder (default: per-user cache)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--skip-session", action="store_true")
    parser.add_argument("--skip-demo", action="store_true", help="no demo forget (cpu comparison)")
    parser.add_argument("--no-compare", action="store_true", help="cpu: only the default path")
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args(argv if argv is not None else [])
    if args.backend == "cpu" and not args.no_compare:
        return compare_cpu(args)

    from unsee.plugins.model import load_runtime

    t0 = time.perf_counter()
    runtime = load_runtime(args.backend, cache_dir=args.model_cache)
    results: dict[str, Any] = {"backend": runtime.backend, "load_s": time.perf_counter() - t0}
    results["throughput"] = bench_throughput(runtime, reps=args.reps)
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
    _print_session(results)
    return results


def _print_session(results: dict[str, Any]) -> None:
    if "session" in results:
        s = results["session"]
        print(
            f"10-turn agent session: prefilled {s['prefilled_cached']} cached vs "
            f"{s['prefilled_stateless']} stateless -> {s['ratio']:.1f}x fewer "
            f"({s['model_calls']} model calls, {s['reused']} reused, {s['decoded']} decoded, "
            f"{s['wall_s']:.0f} s)"
        )


def compare_cpu(args: argparse.Namespace) -> dict[str, Any]:
    """The CPU backend's previous decode path ("before") against the fast one
    ("after"), interleaved in one run; ratios after vs before."""
    import gc

    from unsee.plugins.model.convert import ensure_converted
    from unsee.plugins.model.cpu_backend import TorchRuntime

    folder = ensure_converted(args.model_cache)
    runtimes, load = {}, {}
    for name, fast in (("before", False), ("after", True)):
        t0 = time.perf_counter()
        runtimes[name] = TorchRuntime(folder, fast=fast)
        load[name] = time.perf_counter() - t0
    results: dict[str, Any] = {"backend": "cpu", "load_s": load}
    results["throughput"] = compare_throughput(runtimes, reps=args.reps)
    results["crop_s"] = {name: bench_crop(rt) for name, rt in runtimes.items()}
    if not args.skip_session:
        results["session"] = bench_session(runtimes["after"])
    del runtimes
    gc.collect()
    if not args.skip_demo:  # each run loads its own model, as `unsee demo` does
        results["demo"] = {"after": bench_demo_forget("fast", args.model_cache),
                           "before": bench_demo_forget("legacy", args.model_cache)}
    if args.json:
        print(json.dumps(results, indent=2, default=str))
        return results

    print("backend cpu: before = the previous decode path (UNSEE_CPU_DECODE=legacy), "
          "after = the fast path (default)")
    print(f"load: before {load['before']:.1f} s, after {load['after']:.1f} s")
    tp = results["throughput"]
    b, a = tp["before"], tp["after"]
    rows = [
        (f"prefill ({b['prefill_tokens']} tokens), tok/s", b["prefill_tok_s"], a["prefill_tok_s"], True),
        (f"decode, 1 token per pass ({b['decode_tokens']} tok), tok/s", b["decode_plain_tok_s"],
         a["decode_plain_tok_s"], True),
        (f"decode, chat reply ({b['chat_tokens']} tok), tok/s", b["decode_chat_tok_s"], a["decode_chat_tok_s"], True),
        (f"decode, repeated text ({b['decode_tokens']} tok), tok/s", b["decode_tok_s"], a["decode_tok_s"], True),
    ]
    for n in sorted(results["crop_s"]["before"]):
        rows.append((f"crop at {n} tokens, us", results["crop_s"]["before"][n] * 1e6,
                     results["crop_s"]["after"][n] * 1e6, False))
    if "demo" in results:
        d = results["demo"]
        rows.append(("demo forget (B7), wall s", d["before"]["forget_wall_s"], d["after"]["forget_wall_s"], False))
        rows.append(("demo, whole run (record + forget + 1 turn), wall s", d["before"]["demo_wall_s"],
                     d["after"]["demo_wall_s"], False))
    print(f"{'':52s} {'before':>10s} {'after':>10s} {'speedup':>8s}")
    for label, before, after, higher_better in rows:
        ratio = (after / before) if higher_better else (before / after if after else float("inf"))
        print(f"{label:52s} {before:10.1f} {after:10.1f} {ratio:7.2f}x")
    if "demo" in results:
        d = results["demo"]
        same = all(d["before"][k] == d["after"][k] for k in ("prefilled", "decoded", "reused", "turns_decoded"))
        print(f"demo forget work: prefilled/decoded/reused tokens before {d['before']['prefilled']}/"
              f"{d['before']['decoded']}/{d['before']['reused']}, after {d['after']['prefilled']}/"
              f"{d['after']['decoded']}/{d['after']['reused']} ({'the same' if same else 'DIFFERENT'}); "
              f"secret leaked: {d['before']['leaked'] or d['after']['leaked']}")
    print(f"fast path, drafts on vs off: same tokens in {a['same_tokens'] * 100:.0f}% of the runs")
    _print_session(results)
    return results


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
