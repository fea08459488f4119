"""The cost of per-thread encryption of LangGraph's checkpoints (``u.encrypted``).

A chat agent (scripted model, file ``SqliteSaver``) answers 200 invokes over 10
threads, once on a plain saver and once on ``EncryptingSaver`` (AES-GCM under a
key per thread, kept in a ``KeyStore``). The two alternate for ``--rounds``
rounds and the best of each is kept: this machine's noise is larger than the
cost. Target: encrypted / plain < 4.
"""

from __future__ import annotations

import argparse
import sqlite3
import tempfile
import time
from pathlib import Path

TARGET = 4.0


def _agent(checkpointer):
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage

    from unsee.plugins.model import ScriptedChatModel

    model = ScriptedChatModel(policy=lambda msgs, tools: AIMessage(content="echo: " + str(msgs[-1].content)))
    return create_agent(model, tools=[], checkpointer=checkpointer)


def _run(saver, invokes: int) -> float:
    agent = _agent(saver)
    agent.invoke({"messages": [("user", "warm up")]}, {"configurable": {"thread_id": "warm"}})
    t0 = time.perf_counter()
    for i in range(invokes):
        agent.invoke({"messages": [("user", f"message {i} 4417-2231")]}, {"configurable": {"thread_id": f"t{i % 10}"}})
    return time.perf_counter() - t0


def measure(root: Path, invokes: int = 200, rounds: int = 2) -> tuple[float, float]:
    """(best plain seconds, best encrypted seconds) for ``invokes`` invokes."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    from unsee.plugins.erasure.keys import KeyStore, encrypting

    store = KeyStore(root / "keys.sqlite")
    plain, enc, conns = [], [], []
    try:
        for rnd in range(rounds):
            conns += [sqlite3.connect(root / f"enc{rnd}.sqlite", check_same_thread=False),
                      sqlite3.connect(root / f"plain{rnd}.sqlite", check_same_thread=False)]
            enc.append(_run(encrypting(lambda serde, c=conns[-2]: SqliteSaver(c, serde=serde), store), invokes))
            plain.append(_run(SqliteSaver(conns[-1]), invokes))
    finally:
        for c in conns:
            c.close()
        store.close()
    return min(plain), min(enc)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--invokes", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="unsee-bench-enc-") as d:
        plain, enc = measure(Path(d), args.invokes, args.rounds)
    ratio = enc / plain
    print(f"{args.invokes} invokes, best of {args.rounds}: plain {plain:.3f} s, encrypted {enc:.3f} s, "
          f"ratio {ratio:.2f} (target < {TARGET:g}: {'PASS' if ratio < TARGET else 'FAIL'})")


if __name__ == "__main__":
    main()
