"""Forget cost: B7 vs B5 vs B5', and how B7's cost moves with tau.

(a) One session of 10 transitions (5 turns: a user request and a tool return
    each) with the target entering in the middle (in a user message); B7, B5 and B5' each forget it
    on a fresh copy of the recording. Printed: recomputed tokens (prefilled +
    decoded, from the local model's counters), model turns decoded, wall
    time, and the ratios B7/B5 (target <= 0.10 of B5's tokens; "Forgetting
    Without Restarting: Execution-State Unlearning for Stateful LLM Agents"
    measured 133/1235 = 0.108, the "paper" figure printed) and B7/B5'.
(b) The same session with the target entering at each turn in turn; B7's
    cost against the suffix length T - tau + 1, with a least-squares line and
    its R^2; the plot goes to benchmarks/out/forget_vs_tau.png.

    python -m benchmarks.bench_forget [--model local|scripted] [--turns 5]

With ``--model scripted`` there are no tokens: wall time and decoded turns are
reported instead.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

SECRET = "4417-2231"
OUT = Path(__file__).parent / "out"


def lookup_policy(messages, tools):
    """The scripted support agent: look up the ticket a user message names, then note the result."""
    from langchain_core.messages import AIMessage, ToolMessage

    from unsee.plugins.model import call_id

    last = messages[-1]
    if isinstance(last, ToolMessage):
        return AIMessage(content=f"Noted: {last.content}")
    t = str(last.content).split()[-1]
    return AIMessage(content="", tool_calls=[{"name": "lookup_ticket", "args": {"ticket_id": t},
                                              "id": call_id(messages), "type": "tool_call"}])


def _make(home: Path, which: str, tau_turn: int, turns: int, shared_model=None, before_turn=None):
    from langchain.agents import create_agent
    from langchain_core.messages import HumanMessage
    from langgraph.checkpoint.memory import InMemorySaver

    from unsee import Unsee
    from unsee.demo import ToolRouting
    from unsee.plugins.model import ScriptedChatModel

    u = Unsee(home=home)

    @u.tool(effect="read")
    def lookup_ticket(ticket_id: str) -> str:
        """Look up a support ticket by id."""
        return f"Ticket {ticket_id}: parcel delayed."

    if which == "scripted":
        model, mws = ScriptedChatModel(policy=lookup_policy), []
    else:
        model = shared_model
        u.local_model = model
        mws = [ToolRouting()]
    agent = create_agent(model, [lookup_ticket], system_prompt="You are support. Answer in one short sentence.",
                         middleware=[*mws, u.middleware()], checkpointer=InMemorySaver())
    for i in range(1, turns + 1):
        if before_turn is not None:  # e.g. a graph read, as a live process with IFC makes them
            before_turn(u, f"s{home.name}", i)
        # the target enters through the user's message of turn tau_turn
        text = (f"My card is {SECRET}. " if i == tau_turn else "") + f"Please look up ticket T-{i}"
        agent.invoke({"messages": [HumanMessage(text)]},
                     {"configurable": {"thread_id": f"s{home.name}"}})
    return u, agent, f"s{home.name}"


def _cost(u, session: str, strategy: str, shared_model) -> dict:
    from unsee import RevocationEvent

    # The cache is as the recorded session left it: B7 and B5' crop it to their checkpoint
    # (the clean prefix stays), B5 crops it to 0 (a full reset).
    t0 = time.perf_counter()
    r = u.forget(session, RevocationEvent(target=SECRET), strategy)
    wall = time.perf_counter() - t0
    return {"tokens": r.tokens_prefilled + r.tokens_decoded, "prefilled": r.tokens_prefilled,
            "decoded": r.tokens_decoded, "turns_decoded": r.model_turns_decoded,
            "transitions": r.transitions_replayed, "tau": r.tau, "wall": wall}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.environ.get("UNSEE_BENCH_MODEL", "local"), choices=["local", "scripted"])
    ap.add_argument("--turns", type=int, default=5)
    args = ap.parse_args(argv)
    shared = None
    if args.model == "local":
        from unsee.plugins.model.chat_model import LocalChatModel

        shared = LocalChatModel.from_spec("cpu", max_tokens=48)  # the per-user model cache
    mid = (args.turns + 1) // 2
    print(f"(a) B7 vs B5 vs B5' - {args.turns} turns / {2 * args.turns} transitions, target enters at turn {mid}"
          f" (model: {args.model})")
    rows = {}
    with tempfile.TemporaryDirectory(prefix="unsee-bench-forget-") as tmp:
        for strategy in ("B5", "B5'", "B7"):
            u, agent, session = _make(Path(tmp) / strategy.replace("'", "p"), args.model, mid, args.turns, shared)
            rows[strategy] = _cost(u, session, strategy, shared)
            u.close()
        print(f"{'strategy':9} {'tokens':>8} {'prefill':>8} {'decode':>7} {'turns decoded':>14} {'wall s':>7}")
        for s, r in rows.items():
            print(f"{s:9} {r['tokens']:8d} {r['prefilled']:8d} {r['decoded']:7d} {r['turns_decoded']:14d} {r['wall']:7.2f}")
        key = "tokens" if args.model == "local" else "turns_decoded"
        b5, b5p, b7 = rows["B5"][key], rows["B5'"][key], rows["B7"][key]
        print(f"B7/B5 {key}: {b7 / max(b5, 1):.3f} (target <= 0.10; paper 133/1235 = 0.108)  "
              f"B5/B7: x{b5 / max(b7, 1):.1f}   B5'/B7: x{b5p / max(b7, 1):.2f}")
        print(f"B7/B5 wall time: {rows['B7']['wall'] / rows['B5']['wall']:.3f}")

        print(f"\n(b) B7 cost as tau moves ({args.turns} positions)")
        xs, ys = [], []
        for t in range(1, args.turns + 1):
            u, agent, session = _make(Path(tmp) / f"tau{t}", args.model, t, args.turns, shared)
            r = _cost(u, session, "B7", shared)
            suffix = 2 * args.turns - r["tau"] + 1
            cost = r[key] if args.model == "local" else r["wall"]
            xs.append(suffix)
            ys.append(cost)
            print(f"  tau={r['tau']:2d}  suffix T-tau+1={suffix:2d}  cost={cost:.3f}  wall={r['wall']:.2f}s")
            u.close()
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0
    icpt = my - slope * mx
    ss_res = sum((y - (icpt + slope * x)) ** 2 for x, y in zip(xs, ys))
    ss_tot = sum((y - my) ** 2 for y in ys)
    r2 = 1 - ss_res / ss_tot if ss_tot else 1.0
    print(f"linear fit: cost = {icpt:.2f} + {slope:.2f} x (T - tau + 1);  R^2 = {r2:.3f}")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        OUT.mkdir(exist_ok=True)
        fig, ax = plt.subplots(figsize=(5, 3.5))
        ax.scatter(xs, ys, label="B7")
        ax.plot(sorted(xs), [icpt + slope * x for x in sorted(xs)], label=f"fit, R²={r2:.3f}")
        ax.set_xlabel("suffix length T - tau + 1 (transitions)")
        ax.set_ylabel("recomputed tokens" if args.model == "local" else "wall time (s)")
        ax.legend()
        fig.tight_layout()
        fig.savefig(OUT / "forget_vs_tau.png", dpi=120)
        print(f"plot: {OUT / 'forget_vs_tau.png'}")
    except ImportError:
        print("matplotlib not installed: no plot (pip install -e '.[bench]')")


if __name__ == "__main__":
    main()
