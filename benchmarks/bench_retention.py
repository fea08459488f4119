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
checkpoint) and with B5 on the full one; the live states must be equal.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Annotated

from langchain.agents import AgentState, create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph.message import add_messages

from unsee import RevocationEvent, Unsee
from unsee.plugins.model import ScriptedChatModel

TARGET = "passphrase-7781"


def _add_each(state: list, writes: list) -> list:
    for w in writes:
        state = add_messages(state, w)
    return state


class DeltaState(AgentState):
    messages: Annotated[list, DeltaChannel(_add_each)]


def _policy(messages, tools):
    last = str(messages[-1].content)
    return AIMessage(content=f"Noted ({len(messages)} messages so far): {last[:60]}")


def _agent(home: Path, delta: bool):
    u = Unsee(home=home)
    conn = sqlite3.connect(home / "langgraph.sqlite", check_same_thread=False)
    kw = {"state_schema": DeltaState} if delta else {}
    agent = create_agent(ScriptedChatModel(policy=_policy), [], system_prompt="You are support.",
                         middleware=[u.middleware()], checkpointer=SqliteSaver(conn), **kw)
    return u, agent, conn


def _talk(agent, turns: int) -> None:
    cfg = {"configurable": {"thread_id": "t"}}
    for i in range(turns):
        text = f"turn {i}: my {TARGET} is secret" if i == turns // 2 else f"turn {i}: tell me about order {i}"
        agent.invoke({"messages": [HumanMessage(text)]}, cfg)


def _bytes(conn: sqlite3.Connection, home: Path) -> int:
    conn.execute("VACUUM")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return sum(p.stat().st_size for p in home.glob("langgraph.sqlite*"))


def _live(agent):
    msgs = agent.get_state({"configurable": {"thread_id": "t"}}).values["messages"]
    return [(type(m).__name__, str(m.content)) for m in msgs]


def main(turns: int | None = None) -> dict:
    turns = turns or int(os.environ.get("UNSEE_BENCH_RETENTION_TURNS", "200"))
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
    return out


if __name__ == "__main__":
    main()
