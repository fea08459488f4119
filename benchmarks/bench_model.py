"""Benchmark of the local replay runtime (CPU backend by default).

Prints:
- prefilled tokens over a 10-turn agent session (``create_agent`` + checkpointer,
  one thread), cached (longest-common-prefix reuse) vs stateless (every prompt
  prefilled from scratch), and their ratio (target >= 5x);
- crop time at context lengths 256, 1k, 4k and just under 8k tokens (target:
  flat, < 1 ms);
- prefill and greedy decode throughput;
- on the CPU backend, all of that for two decode paths in one run, interleaved:
  "before" (the previous path, ``UNSEE_CPU_DECODE=legacy``; with ``--before
  dependent`` the fast path with its previous, thread-dependent attention and
  activation calls, ``UNSEE_CPU_INVARIANT=0``) and "after" (the fast path, the
  default: thread-invariant kernels), with their ratios, plus the wall time of
  the demo's forget (``unsee demo --model local``: recorded, then B7) on each
  path, its ratio to the 8 s target, and whether every logits row of the demo
  was the same;
- the machine's limits measured in the same run (:func:`machine_limits`: the
  fp32 peak of a large matmul on every core, the memory read bandwidth of a
  1 GiB sum) and the fraction of them that prefill (FLOP/s) and decode (weight
  bytes read per forward pass x passes / s) reach;
- the CPU other processes used meanwhile (the machine may be shared: a figure
  taken next to a busy process is not the machine's).

    python -m benchmarks.bench_model [--backend cpu|exllamav2] [--model-cache DIR] [--json]
        [--skip-session] [--skip-demo] [--no-compare] [--reps N] [--demo-reps N]
        [--before legacy|dependent]

The converted model folder is the per-user model cache (``--model-cache``,
else ``$UNSEE_MODEL_CACHE``, else ``~/.unsee/models``), converted on first use.
The whole comparison takes ~5 min on the 2-core VM with ``--demo-reps 1``.
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


#: the demo forget's target wall time on the 2-core VM, seconds
DEMO_TARGET_S = 8.0


class OtherLoad:
    """CPU (in cores) other processes used while the block ran: ``/proc/stat``
    busy time less this process's CPU time, over the wall time (None off Linux)."""

    def __enter__(self) -> "OtherLoad":
        from unsee.plugins.model.cpu_backend import _system_busy_seconds

        self._busy = _system_busy_seconds
        self.b, self.c, self.w = self._busy(), time.process_time(), time.perf_counter()
        self.cores: float | None = None
        return self

    def __exit__(self, *exc: Any) -> None:
        b = self._busy()
        if b is not None and self.b is not None:
            wall = max(time.perf_counter() - self.w, 1e-9)
            self.cores = max(0.0, (b - self.b) - (time.process_time() - self.c)) / wall


def machine_limits(reps: int = 7) -> dict[str, float]:
    """The machine's fp32 limits, measured here (best of ``reps``, every core):

    - ``peak_flops``: a 2048 x 2048 x 2048 fp32 matmul (MKL) on every CPU, and
      ``peak_flops_1``: on one;
    - ``bandwidth``: bytes/s of a sum over a 1 GiB fp32 array (every CPU), the
      rate decoding can read weights at.
    """
    import torch

    from unsee.plugins.model.cpu_backend import _cpus

    saved = torch.get_num_threads()
    out: dict[str, float] = {"cpus": float(_cpus())}
    try:
        with OtherLoad() as load:
            a, b = torch.randn(2048, 2048), torch.randn(2048, 2048)
            c = torch.empty(2048, 2048)
            for key, threads in (("peak_flops_1", 1), ("peak_flops", _cpus())):
                torch.set_num_threads(threads)
                torch.mm(a, b, out=c)
                best = min(_timed(lambda: torch.mm(a, b, out=c))[1] for _ in range(reps))
                out[key] = 2 * 2048 ** 3 / best
            del a, b, c
            x = torch.ones(1 << 28)  # 1 GiB of fp32
            x.sum()
            best = min(_timed(lambda: x.sum())[1] for _ in range(reps))
            out["bandwidth"] = x.numel() * 4 / best
            del x
        out["others_cores"] = load.cores if load.cores is not None else float("nan")
    finally:
        torch.set_num_threads(saved)
    return out


def model_costs(runtime: Any) -> dict[str, float]:
    """Work of one forward pass of the model behind ``runtime`` (fp32):
    ``linear_params`` (decoder layers' weights, read by every pass and multiplied
    by every token), ``head_params`` (the LM head, for the rows whose logits are
    kept), ``layers``, ``width`` (query heads x head size)."""
    cfg = runtime.model.config
    d, inter, layers = cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers
    head_dim = getattr(cfg, "head_dim", None) or d // cfg.num_attention_heads
    q = cfg.num_attention_heads * head_dim
    kv = cfg.num_key_value_heads * head_dim
    per_layer = d * q + 2 * d * kv + q * d + 3 * d * inter
    return {"linear_params": float(per_layer * layers), "head_params": float(cfg.vocab_size * d),
            "layers": float(layers), "width": float(q)}


def prefill_flops(costs: dict[str, float], tokens: int, past: int = 0, kept_rows: int = 1) -> float:
    """FLOPs of prefilling ``tokens`` after ``past`` cached ones: 2 per weight per
    token, the attention over the keys each query sees (QK^T and AV, causal), the
    LM head for ``kept_rows``."""
    seen = tokens * past + tokens * (tokens + 1) / 2  # keys visible to the queries, summed
    return (2 * costs["linear_params"] * tokens + 4 * costs["width"] * seen * costs["layers"]
            + 2 * costs["head_params"] * kept_rows)


def pass_bytes(costs: dict[str, float]) -> float:
    """fp32 weight bytes one decode pass reads (every layer's weights and the LM head)."""
    return 4 * (costs["linear_params"] + costs["head_params"])


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
    - ``decode_chat_tok_s``: ``chat_tokens`` tokens of a chat reply (new text);
    - ``prefill_flop_s`` (FLOP/s of that prefill, :func:`prefill_flops`) and
      ``decode_plain_bytes_s`` / ``decode_chat_bytes_s`` (weight bytes read per
      forward pass x passes / s, :func:`pass_bytes`);
    - ``others_cores``: CPU other processes used during the runtime's runs.
    """
    first = next(iter(runtimes.values()))
    ids = first.tokenize("The quick brown fox jumps over the lazy dog. " * 64)[:prefill_tokens]
    chat = first.apply_chat_template(CHAT)
    acc: dict[str, dict[str, list[float]]] = {name: {} for name in runtimes}

    def add(name: str, key: str, value: float) -> None:
        acc[name].setdefault(key, []).append(value)

    costs = model_costs(first)
    flops = prefill_flops(costs, len(ids))
    nbytes = pass_bytes(costs)

    def passes(rt: Any) -> int:
        gov = getattr(getattr(rt, "_shared", None), "governor", None)
        return sum(gov.passes.values()) if gov is not None else 0

    for i in range(reps + 1):
        for name, runtime in runtimes.items():
            with OtherLoad() as load:
                rt = runtime.spawn()
                _, p, pc = _timed(lambda: rt.prefill(ids))
                out, d, dc = _timed(lambda: rt.decode(decode_tokens, stop_token_ids=()))
                rt.crop(len(ids))
                saved = getattr(rt, "draft_max", 0)
                rt.draft_max = 0
                n0 = passes(rt)
                plain, dp, _ = _timed(lambda: rt.decode(decode_tokens, stop_token_ids=()))
                plain_passes = passes(rt) - n0
                rt.draft_max = saved
                rt.reset()
                rt = runtime.spawn()
                rt.prefill(chat)
                n0 = passes(rt)
                reply, dchat, _ = _timed(lambda: rt.decode(chat_tokens, stop_token_ids=()))
                chat_passes = passes(rt) - n0
                rt.reset()
            if i:  # run 0 is the warm-up
                add(name, "others_cores", load.cores if load.cores is not None else float("nan"))
                add(name, "prefill_tok_s", len(ids) / p)
                add(name, "prefill_cpu_tok_s", len(ids) / pc)
                add(name, "prefill_flop_s", flops / p)
                add(name, "decode_tok_s", len(out.tokens) / d)
                add(name, "decode_cpu_tok_s", len(out.tokens) / dc)
                add(name, "decode_plain_tok_s", len(plain.tokens) / dp)
                add(name, "decode_chat_tok_s", len(reply.tokens) / dchat)
                if plain_passes:
                    add(name, "decode_plain_bytes_s", plain_passes * nbytes / dp)
                if chat_passes:
                    add(name, "decode_chat_bytes_s", chat_passes * nbytes / dchat)
                add(name, "same_tokens", float(out.tokens == plain.tokens))
    res = {name: {k: statistics.median(v) for k, v in figures.items()} for name, figures in acc.items()}
    for name, figures in acc.items():  # the spread: (min, max) of each figure
        res[name]["range"] = {k: (min(v), max(v)) for k, v in figures.items()}
    for r in res.values():
        r.update(prefill_tokens=len(ids), decode_tokens=decode_tokens, chat_tokens=chat_tokens)
    return res


#: the environment of each decode path a comparison runs (``bench_demo_forget``'s ``mode``)
MODES = {"fast": {"UNSEE_CPU_DECODE": "fast", "UNSEE_CPU_INVARIANT": "1"},
         "legacy": {"UNSEE_CPU_DECODE": "legacy", "UNSEE_CPU_INVARIANT": "1"},
         "dependent": {"UNSEE_CPU_DECODE": "fast", "UNSEE_CPU_INVARIANT": "0"}}


def bench_demo_forget(mode: str, model_cache: str | None = None) -> dict[str, Any]:
    """``unsee demo --model local`` (record the support session, then forget the card
    number with B7) on the decode path ``mode`` ("fast", "legacy", or "dependent": the
    fast path with thread-dependent kernels, :data:`MODES`); the forget
    report's wall time and token counts, the recording's wall time, the CPU other
    processes used during the forget, the forward passes of the forget by torch
    thread count, and digests of every token chosen and every logits row it was
    chosen from (the whole demo: record, forget, the turn after)."""
    import hashlib

    import torch
    from rich.console import Console

    import unsee.core as core
    import unsee.plugins.model.sampling as sampling
    from unsee.demo import run_demo
    from unsee.plugins.model.cpu_backend import ThreadGovernor

    tokens, logits = hashlib.sha256(), hashlib.sha256()
    forget: dict[str, Any] = {"threads": {}}
    pick, apply, run_forget = sampling.pick_token, ThreadGovernor.apply, core.Unsee.forget

    def picked(row: Any, params: Any, generator: Any) -> int:
        token = pick(row, params, generator)
        logits.update(row.detach().float().contiguous().numpy().tobytes())
        tokens.update(token.to_bytes(4, "little"))
        return token

    def applied(self: Any) -> None:
        apply(self)
        if forget.get("on"):
            n = torch.get_num_threads()
            forget["threads"][n] = forget["threads"].get(n, 0) + 1

    def forgetting(self: Any, *a: Any, **k: Any) -> Any:
        forget["on"] = True
        try:
            with OtherLoad() as load:
                return run_forget(self, *a, **k)
        finally:
            forget["on"] = False
            forget["others_cores"] = load.cores

    saved = {k: os.environ.get(k) for k in ("UNSEE_CPU_DECODE", "UNSEE_CPU_INVARIANT", "UNSEE_MODEL_CACHE")}
    os.environ.update(MODES[mode])
    if model_cache:
        os.environ["UNSEE_MODEL_CACHE"] = model_cache
    sampling.pick_token, ThreadGovernor.apply, core.Unsee.forget = picked, applied, forgetting
    try:
        with tempfile.TemporaryDirectory(prefix="unsee-bench-demo-") as tmp:
            t0 = time.perf_counter()
            res = run_demo(Path(tmp) / "home", "demo", Path(tmp) / "trace.json",
                           console=Console(file=io.StringIO(), width=200), model="local")
            total = time.perf_counter() - t0
    finally:
        sampling.pick_token, ThreadGovernor.apply, core.Unsee.forget = pick, apply, run_forget
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    rep = res["report"]
    return {"forget_wall_s": rep["wall_time_s"], "demo_wall_s": total,
            "prefilled": rep["tokens_prefilled"], "decoded": rep["tokens_decoded"],
            "reused": rep["tokens_reused"], "turns_decoded": rep["model_turns_decoded"],
            "leaked": res["leaked"], "others_cores": forget.get("others_cores"),
            "passes_by_threads": dict(sorted(forget["threads"].items())),
            "tokens_sha256": tokens.hexdigest(), "logits_sha256": logits.hexdigest()}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="cpu")
    parser.add_argument("--model-cache", default=None, help="converted model folder (default: per-user cache)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--skip-session", action="store_true")
    parser.add_argument("--skip-demo", action="store_true", help="no demo forget (cpu comparison)")
    parser.add_argument("--no-compare", action="store_true", help="cpu: only the default path")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--demo-reps", type=int, default=1, help="demo forgets per path (interleaved)")
    parser.add_argument("--before", choices=("legacy", "dependent"), default="legacy",
                        help="cpu: the path 'before' is: the legacy decode path, or the fast path with its "
                             "previous thread-dependent kernels (UNSEE_CPU_INVARIANT=0)")
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


def _median_range(values: list[float]) -> tuple[float, float, float]:
    return statistics.median(values), min(values), max(values)


def compare_cpu(args: argparse.Namespace) -> dict[str, Any]:
    """The CPU backend's previous decode path ("before"; ``--before dependent``: the
    fast path with thread-dependent kernels) against the fast one ("after"),
    interleaved in one run; ratios after vs before; the machine's limits and the
    fraction of them each path reaches."""
    import gc

    from unsee.plugins.model.convert import ensure_converted
    from unsee.plugins.model.cpu_backend import TorchRuntime

    folder = ensure_converted(args.model_cache)
    results: dict[str, Any] = {"backend": "cpu", "limits": machine_limits()}
    before = getattr(args, "before", "legacy")
    results["before_mode"] = before
    runtimes, load = {}, {}
    for name, fast, invariant in (("before", before == "dependent", False if before == "dependent" else None),
                                  ("after", True, True)):
        t0 = time.perf_counter()
        runtimes[name] = TorchRuntime(folder, fast=fast, invariant=invariant)
        load[name] = time.perf_counter() - t0
    results["numerics"] = {name: rt.numerics() for name, rt in runtimes.items()}
    results["load_s"] = load
    results["huge_pages"] = getattr(runtimes["after"]._shared, "huge_pages", (0.0, 0))
    results["costs"] = model_costs(runtimes["after"])
    results["throughput"] = compare_throughput(runtimes, reps=args.reps)
    results["crop_s"] = {name: bench_crop(rt) for name, rt in runtimes.items()}
    if not args.skip_session:
        results["session"] = bench_session(runtimes["after"])
    del runtimes
    gc.collect()
    if not args.skip_demo:  # each run loads its own model, as `unsee demo` does; paths interleaved
        runs: dict[str, list[dict[str, Any]]] = {"after": [], "before": []}
        for _ in range(max(1, args.demo_reps)):
            runs["after"].append(bench_demo_forget("fast", args.model_cache))
            runs["before"].append(bench_demo_forget(before, args.model_cache))
            gc.collect()
        results["demo_runs"] = runs
        results["demo"] = {name: {**rs[0], "forget_wall_s": statistics.median(r["forget_wall_s"] for r in rs),
                                  "demo_wall_s": statistics.median(r["demo_wall_s"] for r in rs)}
                           for name, rs in runs.items()}
    # the limits again at the end: a figure taken next to a busy process is not the machine's,
    # so each limit is the better of the two measurements
    first, last = results["limits"], machine_limits()
    results["limits_runs"] = [first, last]
    results["limits"] = {**{k: max(first[k], last[k]) for k in ("peak_flops", "peak_flops_1", "bandwidth")},
                         "cpus": first["cpus"], "others_cores": min(first["others_cores"], last["others_cores"])}
    if args.json:
        print(json.dumps(results, indent=2, default=str))
        return results

    lim = results["limits"]
    if before == "dependent":
        print("backend cpu: before = the fast path with thread-dependent kernels (UNSEE_CPU_INVARIANT=0), "
              "after = the fast path with thread-invariant kernels (default)")
    else:
        print("backend cpu: before = the previous decode path (UNSEE_CPU_DECODE=legacy), "
              "after = the fast path (default)")
    for name, text in results["numerics"].items():
        print(f"numerics {name:6s}: {text}")
    print(f"machine (measured now): fp32 peak {lim['peak_flops'] / 1e9:.0f} GFLOP/s on {lim['cpus']:.0f} CPUs "
          f"({lim['peak_flops_1'] / 1e9:.0f} on one; 2048^3 matmul), memory read {lim['bandwidth'] / 1e9:.1f} GB/s "
          f"(1 GiB sum); the better of a measurement before and after the rest, other processes used "
          + " and ".join(f"{r['others_cores']:.2f}" for r in results["limits_runs"]) + " cores meanwhile")
    costs = results["costs"]
    print(f"model: {pass_bytes(costs) / 1e6:.0f} MB of fp32 weights read per forward pass, "
          f"{2 * costs['linear_params'] / 1e6:.0f} MFLOP per prefilled token (+ attention)")
    hp_s, hp_mb = results["huge_pages"]
    print(f"load: before {load['before']:.1f} s, after {load['after']:.1f} s (of which {hp_s:.1f} s putting "
          f"{hp_mb} MB of weights on 2 MB pages)")
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
        rows.append(("demo forget (B7), wall s (median)", d["before"]["forget_wall_s"], d["after"]["forget_wall_s"],
                     False))
        rows.append(("demo, whole run (record + forget + 1 turn), wall s", d["before"]["demo_wall_s"],
                     d["after"]["demo_wall_s"], False))
    print(f"{'':52s} {'before':>10s} {'after':>10s} {'speedup':>8s}")
    for label, before, after, higher_better in rows:
        ratio = (after / before) if higher_better else (before / after if after else float("inf"))
        print(f"{label:52s} {before:10.1f} {after:10.1f} {ratio:7.2f}x")
    print("fraction of the machine's limits (median, min-max over the repetitions):")
    for name, r in (("before", b), ("after", a)):
        rng = r["range"]
        pf = [x / lim["peak_flops"] for x in (r["prefill_flop_s"], *rng["prefill_flop_s"])]
        print(f"  {name:6s} prefill {r['prefill_flop_s'] / 1e9:5.0f} GFLOP/s = {pf[0]:.0%} of the fp32 peak "
              f"({pf[1]:.0%}-{pf[2]:.0%})", end="")
        for key, label in (("decode_plain_bytes_s", "decode 1 tok/pass"), ("decode_chat_bytes_s", "chat reply")):
            if key in r:
                f = [x / lim["bandwidth"] for x in (r[key], *rng[key])]
                print(f"; {label} {r[key] / 1e9:4.1f} GB/s = {f[0]:.0%} of the bandwidth ({f[1]:.0%}-{f[2]:.0%})",
                      end="")
        print(f"; other processes {r['others_cores']:.2f} cores")
    if "demo" in results:
        runs = results["demo_runs"]
        for name in ("after", "before"):
            walls = [r["forget_wall_s"] for r in runs[name]]
            med, lo, hi = _median_range(walls)
            print(f"demo forget, {name:6s}: {med:5.1f} s median ({lo:.1f}-{hi:.1f}, {len(walls)} runs) = "
                  f"{med / DEMO_TARGET_S:.2f}x the {DEMO_TARGET_S:.0f} s target; other processes "
                  + ", ".join(f"{r['others_cores']:.2f}" for r in runs[name])
                  + " cores; forward passes by torch threads "
                  + ", ".join(str(r["passes_by_threads"]) for r in runs[name]))
        fast_med = statistics.median(r["forget_wall_s"] for r in runs["after"])
        legacy_med = statistics.median(r["forget_wall_s"] for r in runs["before"])
        print(f"demo forget: 'after' takes {fast_med / legacy_med:.2f}x the time of 'before' "
              f"({legacy_med / fast_med:.2f}x faster)")
        keys = ("prefilled", "decoded", "reused", "turns_decoded", "tokens_sha256")
        all_runs = runs["after"] + runs["before"]
        same = all(all(r[k] == all_runs[0][k] for k in keys) for r in all_runs)
        same_logits = len({r["logits_sha256"] for r in runs["after"]}) == 1
        r0 = all_runs[0]
        print(f"demo forget work: prefilled/decoded/reused tokens {r0['prefilled']}/{r0['decoded']}/{r0['reused']}; "
              f"every token of the demo {'the same' if same else 'DIFFERENT'} in all {len(all_runs)} runs "
              f"(tokens sha256 {r0['tokens_sha256'][:12]}); fast path logits "
              f"{'bit-identical' if same_logits else 'DIFFERENT'} across its runs "
              f"(sha256 {runs['after'][0]['logits_sha256'][:12]}); secret leaked: "
              f"{any(r['leaked'] for r in all_runs)}")
        if len(runs["before"]) > 1 or before == "dependent":
            hashes = [r["logits_sha256"][:12] for r in runs["before"]]
            print(f"'before' logits sha256 per run: {', '.join(hashes)} "
                  f"({'bit-identical' if len(set(hashes)) == 1 else 'DIFFERENT'} across its runs)")
    print(f"fast path, drafts on vs off: same tokens in {a['same_tokens'] * 100:.0f}% of the runs")
    _print_session(results)
    return results


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
