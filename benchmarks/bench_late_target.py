"""A late target costs the suffix, not the session (Corollary 1 of the method).

Sessions of N turns (scripted zero-latency model, so the time is bookkeeping:
unsee's and LangGraph's) whose target enters three turns before the end;
each is forgotten with B7 (``erase=False``: the record's erasure is measured
by ``bench_erasure``). The suffix is the same three turns at every N, so a
forget whose work is proportional to the suffix takes the same time at 20 and
at 400 turns.

Printed per N: the plan alone (``dry_run``), B7's wall time, and the floor
any replay on LangGraph pays: the same agent without unsee, forked at the
same turn (``get_state`` / ``update_state``), re-run for the same three
turns and written back as the thread's state (as a forget's commit does);
its state loads and checkpoint writes grow with the thread. Then
the ratios against the 20-turn session of the same run: B7 (target <= 2)
and unsee's part, B7 minus the floor.

    python -m benchmarks.bench_late_target [--turns 20,100,200,400] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.bench_forget import SECRET, _make, lookup_policy

SUFFIX = 3


def _text(i: int, tau: int) -> str:
    return (f"My card is {SECRET}. " if i == tau else "") + f"Please look up ticket T-{i}"


def bare_replay(turns: int) -> float:
    """LangGraph alone: fork the thread before turn ``turns - SUFFIX + 1`` and re-run the suffix."""
    from langchain.agents import create_agent
    from langchain_core.messages import HumanMessage, RemoveMessage
    from langchain_core.tools import tool
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph.message import REMOVE_ALL_MESSAGES

    from unsee.plugins.model import ScriptedChatModel

    @tool
    def lookup_ticket(ticket_id: str) -> str:
        """Look up a support ticket by id."""
        return f"Ticket {ticket_id}: parcel delayed."

    agent = create_agent(ScriptedChatModel(policy=lookup_policy), [lookup_ticket],
                         system_prompt="You are support. Answer in one short sentence.",
                         checkpointer=InMemorySaver())
    cfg = {"configurable": {"thread_id": "s"}}
    tau = turns - SUFFIX + 1
    fork = None
    for i in range(1, turns + 1):
        if i == tau:
            fork = agent.get_state(cfg).config
        agent.invoke({"messages": [HumanMessage(_text(i, tau))]}, cfg)
    t0 = time.perf_counter()
    values = agent.get_state(fork).values
    scratch = {"configurable": {"thread_id": "s-replay"}}
    agent.update_state(scratch, values)
    for i in range(tau, turns + 1):
        agent.invoke({"messages": [HumanMessage(_text(i, -1))]}, scratch)
    # and the counterfactual becomes the thread's state, as a forget's commit makes it
    final = agent.get_state(scratch).values["messages"]
    agent.update_state(cfg, {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *final]})
    return time.perf_counter() - t0


def unsee_forget(turns: int, root: Path, warm: bool) -> tuple[float, float, int]:
    """(plan s, B7 s, transitions replayed) on an unsee session of ``turns`` turns.

    ``warm``: the session's graph was read before the suffix was recorded (as a live
    process with IFC reads it at every sink call), so the forget's graph read extends
    it by the suffix; else the forget's first read builds it from the whole record."""
    from unsee import RevocationEvent

    def read_graph(u, session, i):
        if warm and i == turns - SUFFIX + 1:
            u.graph(session)

    home = root / f"h{turns}{'w' if warm else 'c'}"
    u, _, session = _make(home, "scripted", turns - SUFFIX + 1, turns, before_turn=read_graph)
    u.flush()
    try:
        t0 = time.perf_counter()
        u.forget(session, RevocationEvent(target=SECRET), "B7", dry_run=True)
        plan = time.perf_counter() - t0
        t0 = time.perf_counter()
        r = u.forget(session, RevocationEvent(target=SECRET), "B7", erase=False)
        wall = time.perf_counter() - t0
        return plan, wall, r.transitions_replayed
    finally:
        u.close()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", default="20,100,200,400")
    ap.add_argument("--repeat", type=int, default=2, help="sessions per size (medians are printed)")
    args = ap.parse_args(argv if argv is not None else [])
    sizes = [int(x) for x in args.turns.split(",")]
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeat):
            for n in sizes:  # interleaved: each size once per round
                floor = bare_replay(n)
                for warm in (True, False):
                    plan, wall, transitions = unsee_forget(n, Path(tmp) / f"r{r}", warm)
                    rows.setdefault((n, warm), []).append((plan, wall, floor, transitions))
    med = {k: tuple(statistics.median(x[i] for x in v) for i in range(4)) for k, v in rows.items()}
    base, top = sizes[0], sizes[-1]
    print(f"suffix fixed at {SUFFIX} turns; medians of {args.repeat} sessions per size")
    for warm in (True, False):
        print("\n" + ("warm: the session's graph was read before the suffix (a live process with IFC)" if warm
                      else "cold: the forget's first graph read builds it from the whole record"))
        print(f"{'turns':>6} {'plan s':>8} {'B7 s':>8} {'LangGraph floor s':>18} {'unsee part s':>13} "
              f"{'B7 / B7@' + str(base):>12} {'part / part@' + str(base):>16}")
        b_plan, b_wall, b_floor, _ = med[(base, warm)]
        b_part = max(b_wall - b_floor, 1e-9)
        for n in sizes:
            plan, wall, floor, _ = med[(n, warm)]
            part = max(wall - floor, 1e-9)
            print(f"{n:>6} {plan:>8.3f} {wall:>8.3f} {floor:>18.3f} {part:>13.3f} {wall / b_wall:>12.2f} "
                  f"{part / b_part:>16.2f}")
        ratio = med[(top, warm)][1] / b_wall
        part = max(med[(top, warm)][1] - med[(top, warm)][2], 1e-9) / b_part
        print(f"target: B7 with a fixed suffix within 2x from {base} to {top} turns: {ratio:.2f}x "
              f"({'PASS' if ratio <= 2 else 'FAIL'}); unsee's part (B7 - floor) {part:.2f}x "
              f"({'PASS' if part <= 2 else 'FAIL'})")


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
