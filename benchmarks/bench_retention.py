"""Storage of one long thread: full-state checkpoints vs ``keep="semantic"`` vs ``DeltaChannel``.

A recorded chat agent (scripted model, ``SqliteSaver`` file) talks for N turns
(default 200; ``UNSEE_BENCH_RETENTION_TURNS``). Three homes:

- full: LangGraph's default (every superstep checkpoint holds the whole message list);
- semantic: the same thread after ``u.retention(thread, "semantic")``;
- delta: the ``messages`` channel a ``DeltaChannel`` (LangGraph 1.2, beta; writes only, a
  snapshot every 100 updates), every checkpoint kept.

Bytes are the saver file after ``VACUUM`` (the same compaction for all three).
Then the point of keeping semantic checkpoints: a target told at turn N/2 is
forgotten with B7 on the pruned thread (it forks at that turn's kept
checkpoint) and with B5 on the full one; the live states must be equal. And
the same from EVERY kept checkpoint: on threads of M turns (default 12;
``UNSEE_BENCH_RETENTION_SWEEP``), the target told at turn k for each k, so
each kept turn checkpoint is B7's fork point once.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
import time
from pathlib import Path

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.sqlite import SqliteSaver

from benchmarks.bench_erasure import delta_state
from unsee import RevocationEvent, Unsee
from unsee.plugins.model import ScriptedChatModel

TARGET = "passphrase-7781"


def _policy(messages, tools):
    last = str(messages[-1].content)
    return AIMessage(content=f"Noted ({len(messages)} messages so far): {last[:60]}")


def _agent(home: Path, delta: bool):
    u = Unsee(home=home)
    conn = sqlite3.connect(home / "langgraph.sqlite", check_same_thread=False)
    kw = {"state_schema": delta_state()} if delta else {}
    agent = create_agent(ScriptedChatModel(policy=_policy), [], system_prompt="You are support.",
                         middleware=[u.middleware()], checkpointer=SqliteSaver(conn), **kw)
    return u, agent, conn


def _talk(agent, turns: int, at: int | None = None) -> None:
    """``turns`` user turns on thread "t"; the target is told at turn ``at`` (default: the middle)."""
    cfg = {"configurable": {"thread_id": "t"}}
    at = turns // 2 if at is None else at
    for i in range(turns):
        text = f"turn {i}: my {TARGET} is secret" if i == at else f"turn {i}: tell me about order {i}"
        agent.invoke({"messages": [HumanMessage(text)]}, cfg)


def _bytes(conn: sqlite3.Connection, home: Path) -> int:
    conn.execute("VACUUM")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return sum(p.stat().st_size for p in home.glob("langgraph.sqlite*"))


CFG = {"configurable": {"thread_id": "t"}}


def _messages(values: dict) -> list[tuple[str, str]]:
    return [(type(m).__name__, str(m.content)) for m in values.get("messages", [])]


def _live(agent):
    return _messages(agent.get_state(CFG).values)


def sweep(root: Path, turns: int) -> tuple[int, int, set[str]]:
    """B7 from EVERY kept checkpoint of a pruned thread equals B5 on the full one: for each turn
    k of a ``turns``-turn thread, the target told at turn k (so B7 forks at turn k's kept
    checkpoint), the thread pruned to ``keep="semantic"`` and forgotten with B7, a full twin
    forgotten with B5. (equal, compared, the kinds of checkpoint B7 forked at)."""
    equal, kinds = 0, set()
    for k in range(turns):
        live = {}
        for name in ("semantic", "full"):
            home = root / f"sweep{k}-{name}"
            home.mkdir()
            u, agent, conn = _agent(home, delta=False)
            try:
                _talk(agent, turns, at=k)
                if name == "semantic":
                    u.retention("t", "semantic")
                    r = u.forget("t", RevocationEvent(target=TARGET), "B7", agent=agent)
                    kinds.add(str(r.checkpoint_kind))
                else:
                    u.forget("t", RevocationEvent(target=TARGET), "B5", agent=agent)
                live[name] = _live(agent)
            finally:
                u.close()
                conn.close()
        equal += live["semantic"] == live["full"] and TARGET not in repr(live["full"])
    return equal, turns, kinds


def main(turns: int | None = None, sweep_turns: int | None = None) -> dict:
    turns = turns or int(os.environ.get("UNSEE_BENCH_RETENTION_TURNS", "200"))
    sweep_turns = sweep_turns or int(os.environ.get("UNSEE_BENCH_RETENTION_SWEEP", "12"))
    out: dict = {"turns": turns}
    with tempfile.TemporaryDirectory() as tmp:
        homes = {k: Path(tmp) / k for k in ("full", "semantic", "delta")}
        made = {}
        for name, home in homes.items():
            home.mkdir()
            t0 = time.perf_counter()
            u, agent, conn = _agent(home, delta=name == "delta")
            _talk(agent, turns)
            n = len(list(agent.checkpointer.list({"configurable": {"thread_id": "t"}})))
            if name == "semantic":
                rec = u.retention("t", "semantic")
                out["semantic_kept"] = f"{rec.kept} of {rec.before} checkpoints"
                n = rec.kept
            out[name] = {"bytes": _bytes(conn, home), "checkpoints": n, "s": round(time.perf_counter() - t0, 1)}
            made[name] = (u, agent, conn)
        full = out["full"]["bytes"]
        print(f"{turns}-turn thread, SqliteSaver file after VACUUM:")
        for name in homes:
            r = out[name]
            print(f"  {name:9s} {r['bytes']:>12,d} bytes  {r['checkpoints']:>5d} checkpoints  "
                  f"ratio to full {r['bytes'] / full:.3f}  ({r['s']} s)")
        print(f"  semantic kept {out['semantic_kept']}")
        # every kept checkpoint is still a time-travel point: its state is the full thread's at that step
        t0 = time.perf_counter()
        full_at = {s.metadata["step"]: _messages(s.values) for s in made["full"][1].get_state_history(CFG)}
        kept = list(made["semantic"][1].get_state_history(CFG))
        same = sum(full_at.get(s.metadata["step"]) == _messages(s.values) for s in kept)
        out["kept_states_equal"] = f"{same} of {len(kept)}"
        print(f"  kept checkpoints whose state equals the full thread's at the same step: {same} of {len(kept)} "
              f"({time.perf_counter() - t0:.1f} s)")
        # B7 from the kept turn checkpoint of the pruned thread == B5 on the full one
        t0 = time.perf_counter()
        b7 = made["semantic"][0].forget("t", RevocationEvent(target=TARGET), "B7", agent=made["semantic"][1])
        b5 = made["full"][0].forget("t", RevocationEvent(target=TARGET), "B5", agent=made["full"][1])
        out["b7_equals_b5"] = _live(made["semantic"][1]) == _live(made["full"][1])
        print(f"  forget at turn {turns // 2}: B7 forked at a kept {b7.checkpoint_kind} checkpoint, "
              f"B5 from scratch; live states equal: {out['b7_equals_b5']} "
              f"({b7.transitions_replayed} vs {b5.transitions_replayed} transitions, {time.perf_counter() - t0:.1f} s)")
        for u, _, conn in made.values():
            u.close()
            conn.close()
        t0 = time.perf_counter()
        equal, compared, kinds = sweep(Path(tmp), sweep_turns)
        out["sweep_equal"] = f"{equal} of {compared}"
        print(f"  B7 from every kept turn checkpoint ({sweep_turns}-turn threads, the target told at each turn in turn, "
              f"forked at {', '.join(sorted(kinds))} checkpoints): equal to B5 in {equal} of {compared} "
              f"({time.perf_counter() - t0:.1f} s)")
    return out


if __name__ == "__main__":
    main()
