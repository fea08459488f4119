"""A late target costs the suffix, not the session (Corollary 1 of the method).

Sessions of N turns (scripted zero-latency model, so the time is bookkeeping:
unsee's and LangGraph's) whose target enters three turns before the end;
each is forgotten with B7 (``erase=False``: the record's erasure is measured
by ``bench_erasure``). The suffix is the same three turns at every N, so a
forget whose work is proportional to the suffix takes the same time at 20 and
at 400 turns.

Beside each forget, in the same round, the *floor*: what LangGraph alone pays
for the same fork, re-run and write-back (the same agent without unsee, its
thread forked at the same turn with ``get_state`` / ``update_state``, the same
three turns re-run, and the counterfactual written back as the thread's
state, as a forget's commit does). unsee's part is B7 minus the floor of the
same round. Each session is recorded once per size; every repeat forgets on a
fresh copy of it (unsee's home copied, the saver's dicts copied, a new
``Unsee`` whose graph of the session is read first: a live process keeps it),
and the floor re-runs on a fresh copy of its own thread. Rounds interleave the
sizes and alternate which of the two goes first; medians with the quartiles.

Two agents, the same sessions:

- ``full-state``: ``create_agent``'s own ``messages`` channel, every
  checkpoint the whole message list (LangGraph's own cost per step grows with
  the session). The targets: unsee's part within 2x from the smallest to the
  largest N (B7 and the floor are printed against 2x as well).
- ``DeltaChannel``: the ``messages`` channel a ``DeltaChannel`` (LangGraph 1.2,
  beta: a checkpoint stores the writes, a snapshot every 100 updates). The
  target: B7 as a whole within 2x.

Printed per agent and N: B7, the floor and unsee's part (medians [q1-q3]),
then the ratio of the largest N to the smallest for each, against 2x (the
figure is the ratio of the medians; its spread, the quartiles of the per-round
ratios), the floor by step, then where unsee's part goes: the plan, the
checks before anything changes, the fork, the re-run turns, the checks before
the commit (the scratch state derived, the target in no state key) and the
commit each beyond the floor's same step, the view's record of the forget, the
rest; and the cyclic collector's share of B7 and of
the floor. The harness's own objects (the recorded sessions it copies from)
are frozen out of the collector (``gc.freeze``) once recorded: a process that
forgets holds one session, not this harness's dozen.

    python -m benchmarks.bench_late_target [--turns 20,100,400] [--repeat 7] [--agents full,delta] [--cold]

``--cold``: no graph read before the forget (a process that did not record the
session: the forget's first read builds the graph from the whole record).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import shutil
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

from benchmarks.bench_forget import SECRET, lookup_policy

SUFFIX = 3
TARGET = 2.0
THREAD = "s"
SYSTEM = "You are support. Answer in one short sentence."
AGENTS = {"full": "full-state", "delta": "DeltaChannel"}


class _Collections:
    """Seconds the cyclic garbage collector ran while the block ran (``gc.callbacks``)."""

    def __init__(self):
        self.spent = 0.0
        self._t0 = 0.0

    def _callback(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._t0 = time.perf_counter()
        else:
            self.spent += time.perf_counter() - self._t0

    def __enter__(self) -> _Collections:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc) -> None:
        gc.callbacks.remove(self._callback)


def _text(i: int, tau: int) -> str:
    return (f"My card is {SECRET}. " if i == tau else "") + f"Please look up ticket T-{i}"


def _cfg(thread: str = THREAD) -> dict:
    return {"configurable": {"thread_id": thread}}


def _agent(saver, delta: bool, u=None):
    """The scripted support agent on ``saver`` (an ``InMemorySaver``); with ``u``, recorded by it."""
    from langchain.agents import create_agent
    from langchain_core.tools import tool

    from unsee.plugins.model import ScriptedChatModel

    def lookup_ticket(ticket_id: str) -> str:
        """Look up a support ticket by id."""
        return f"Ticket {ticket_id}: parcel delayed."

    fn = u.tool(effect="read")(lookup_ticket) if u is not None else tool(lookup_ticket)
    extra = {}
    if delta:
        from benchmarks.bench_erasure import delta_state

        extra["state_schema"] = delta_state()
    return create_agent(ScriptedChatModel(policy=lookup_policy), [fn], system_prompt=SYSTEM,
                        middleware=[u.middleware()] if u is not None else [], checkpointer=saver, **extra)


def _copy_saver(saver):
    """A new ``InMemorySaver`` holding what ``saver`` holds (its dicts copied; the serialised
    values, immutable bytes, shared)."""
    from collections import defaultdict as dd

    from langgraph.checkpoint.memory import InMemorySaver

    new = InMemorySaver()
    for thread, spaces in saver.storage.items():
        new.storage[thread] = dd(dict, {ns: dict(cps) for ns, cps in spaces.items()})
    for key, writes in saver.writes.items():
        new.writes[key] = dict(writes)
    new.blobs.update(saver.blobs)
    return new


def _record(agent, turns: int) -> dict:
    """Run the session; returns the config of the checkpoint the suffix starts from."""
    from langchain_core.messages import HumanMessage

    tau = turns - SUFFIX + 1
    fork = None
    for i in range(1, turns + 1):
        if i == tau:
            fork = agent.get_state(_cfg()).config
        agent.invoke({"messages": [HumanMessage(_text(i, tau))]}, _cfg())
    return fork


class Bare:
    """LangGraph alone: the session recorded once; each :meth:`replay` on a fresh copy of its thread."""

    def __init__(self, turns: int, delta: bool):
        from langgraph.checkpoint.memory import InMemorySaver

        self.turns, self.delta = turns, delta
        agent = _agent(InMemorySaver(), delta)
        self.fork = _record(agent, turns)
        self.saver = agent.checkpointer

    def replay(self) -> dict[str, float]:
        """Fork before the suffix, re-run it, write the counterfactual back: seconds per step."""
        from langchain_core.messages import HumanMessage, RemoveMessage
        from langgraph.graph.message import REMOVE_ALL_MESSAGES

        agent = _agent(_copy_saver(self.saver), self.delta)
        tau = self.turns - SUFFIX + 1
        gc.collect()
        with _Collections() as collections:
            t0 = time.perf_counter()
            values = agent.get_state(self.fork).values
            agent.update_state(_cfg("s-replay"), values)
            t1 = time.perf_counter()
            for i in range(tau, self.turns + 1):
                agent.invoke({"messages": [HumanMessage(_text(i, -1))]}, _cfg("s-replay"))
            t2 = time.perf_counter()
            # the counterfactual becomes the thread's state, as a forget's commit makes it
            final = agent.get_state(_cfg("s-replay")).values["messages"]
            agent.update_state(_cfg(), {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *final]})
            t3 = time.perf_counter()
        return {"total": t3 - t0, "fork": t1 - t0, "turns": t2 - t1, "commit": t3 - t2, "gc": collections.spent}


@contextlib.contextmanager
def _phase_timers() -> Iterator[dict[str, float]]:
    """Seconds spent in the forget's steps while the block runs (patched in, then restored)."""
    from unsee.plugins.forget import forgetter, pipeline, replay

    spent: dict[str, float] = defaultdict(float)
    patched = [(forgetter.Forgetter, "locate", "plan"), (forgetter.Forgetter, "make_plan", "plan"),
               (forgetter, "check_replayable", "check"), (replay, "fork_state", "fork"),
               (forgetter, "run_replay", "replay"), (forgetter, "prepare", "pre-commit"),
               (forgetter, "swap_in", "commit"), (pipeline.RevocationPipeline, "record", "view record")]
    saved = []
    for owner, name, label in patched:
        orig = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)

        def timed(*a, _orig=orig, _label=label, **k):
            t0 = time.perf_counter()
            try:
                return _orig(*a, **k)
            finally:
                spent[_label] += time.perf_counter() - t0

        saved.append((owner, name, orig))
        setattr(owner, name, timed)
    try:
        yield spent
    finally:
        for owner, name, orig in saved:
            setattr(owner, name, orig)


class Recorded:
    """unsee: the session recorded once into a home; each :meth:`forget` on a fresh copy."""

    def __init__(self, turns: int, delta: bool, root: Path):
        from langgraph.checkpoint.memory import InMemorySaver

        from unsee import Unsee

        self.turns, self.delta, self.root = turns, delta, root
        self.template = root / "template"
        u = Unsee(home=self.template)
        agent = _agent(InMemorySaver(), delta, u)
        _record(agent, turns)
        u.flush()
        u.close()
        self.saver = agent.checkpointer
        self.copies = 0

    def forget(self, warm: bool = True) -> dict[str, float]:
        """B7 on a fresh copy of the session: seconds, in all and per step."""
        from unsee import RevocationEvent, Unsee

        self.copies += 1
        home = self.root / f"copy{self.copies}"
        shutil.copytree(self.template, home)
        u = Unsee(home=home)
        agent = _agent(_copy_saver(self.saver), self.delta, u)
        try:
            if warm:  # a live process keeps the session's graph (and has forgotten before)
                u.graph(THREAD)
                u.forget(THREAD, RevocationEvent(target=SECRET), "B7", agent=agent, dry_run=True)
            else:
                _ = u.revocations
            gc.collect()
            with _phase_timers() as spent, _Collections() as collections:
                t0 = time.perf_counter()
                r = u.forget(THREAD, RevocationEvent(target=SECRET), "B7", agent=agent, erase=False)
                total = time.perf_counter() - t0
            assert r.committed and r.transitions_replayed == 2 * SUFFIX, r
            out = {"total": total, **spent, "gc": collections.spent}
            out["turns"] = out.pop("replay") - out["fork"]
            return out
        finally:
            u.close()
            shutil.rmtree(home, ignore_errors=True)


def _q(xs: list[float]) -> tuple[float, float, float]:
    if len(xs) < 2:
        return xs[0], xs[0], xs[0]
    q1, q2, q3 = statistics.quantiles(xs, n=4, method="inclusive")
    return q1, q2, q3


def _fmt(xs: list[float]) -> str:
    q1, q2, q3 = _q(xs)
    return f"{q2:.3f} [{q1:.3f}-{q3:.3f}]"


def _ratio(rounds: list[tuple[float, float]]) -> tuple[float, float, float]:
    """(ratio of the medians, quartiles of the per-round ratios) of (top, base) pairs."""
    top = statistics.median(t for t, _ in rounds)
    base = statistics.median(b for _, b in rounds)
    per = [t / b for t, b in rounds if b > 0]
    q1, _, q3 = _q(per) if per else (float("nan"),) * 3
    return (top / base if base > 0 else float("inf")), q1, q3


def _verdict(ratio: float) -> str:
    return "PASS" if ratio <= TARGET else "FAIL"


#: unsee's part split by step: each B7 step beyond the floor's same step, and B7's own steps
PARTS = (("plan", None), ("check", None), ("fork", "fork"), ("turns", "turns"), ("pre-commit", None),
         ("commit", "commit"), ("view record", None))


def report(kind: str, sizes: list[int], b7: dict, floor: dict, repeat: int, warm: bool) -> None:
    base, top = sizes[0], sizes[-1]
    name = AGENTS[kind]
    print(f"\n{name}: suffix fixed at {SUFFIX} turns; {repeat} rounds, medians [quartiles], seconds"
          + ("" if warm else "; cold: no graph read before the forget"))
    print(f"{'turns':>6} {'B7':>22} {'LangGraph floor':>22} {'unsee part (B7-floor)':>22}")
    part = {n: [b["total"] - f["total"] for b, f in zip(b7[n], floor[n])] for n in sizes}
    for n in sizes:
        print(f"{n:>6} {_fmt([b['total'] for b in b7[n]]):>22} {_fmt([f['total'] for f in floor[n]]):>22} "
              f"{_fmt(part[n]):>22}")
    rows = [("B7", [(b["total"], c["total"]) for b, c in zip(b7[top], b7[base])]),
            ("LangGraph floor", [(f["total"], c["total"]) for f, c in zip(floor[top], floor[base])]),
            ("unsee part", list(zip(part[top], part[base])))]
    print(f"ratio {top}/{base} turns (target <= {TARGET:g}x; the quartiles of the per-round ratios):")
    for label, pairs in rows:
        r, q1, q3 = _ratio(pairs)
        target = (kind == "full" and label == "unsee part") or (kind == "delta" and label == "B7")
        print(f"  {label:16} {r:6.2f}x [{q1:.2f}-{q3:.2f}]  {_verdict(r)}" + ("  <- the target" if target else ""))
    print("the floor by step (ms, medians): fork = a state read + the scratch's seed write, turns = "
          f"{SUFFIX} invokes, write-back = a state read + the thread's write")
    print(f"{'turns':>6}{'fork':>10}{'turns':>10}{'write-back':>12}")
    for n in sizes:
        print(f"{n:>6}" + "".join(f"{statistics.median(f[step] for f in floor[n]) * 1000:{w}.1f}"
                                  for step, w in (("fork", 10), ("turns", 10), ("commit", 12))))
    print("where unsee's part goes (ms, medians; B7's step minus the floor's where it has one):")
    print(f"{'turns':>6}" + "".join(f"{label:>13}" for label, _ in PARTS) + f"{'rest':>9}"
          + f"{'(gc in B7 / floor)':>21}")
    for n in sizes:
        cells = []
        for label, fl in PARTS:
            vals = [b.get(label, 0.0) - (f[fl] if fl else 0.0) for b, f in zip(b7[n], floor[n])]
            cells.append(statistics.median(vals))
        rest = statistics.median(p - sum(b.get(label, 0.0) - (f[fl] if fl else 0.0) for label, fl in PARTS)
                                 for p, b, f in zip(part[n], b7[n], floor[n]))
        gcs = f"{statistics.median(b['gc'] for b in b7[n]) * 1000:.1f} / {statistics.median(f['gc'] for f in floor[n]) * 1000:.1f}"
        print(f"{n:>6}" + "".join(f"{c * 1000:13.1f}" for c in cells) + f"{rest * 1000:9.1f}" + f"{gcs:>21}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", default="20,100,400")
    ap.add_argument("--repeat", type=int, default=7, help="rounds (each size's forget and floor once per round)")
    ap.add_argument("--agents", default="full,delta", help="full (full-state checkpoints), delta (DeltaChannel)")
    ap.add_argument("--cold", action="store_true", help="no graph read before the forget")
    args = ap.parse_args(argv if argv is not None else [])
    sizes = [int(x) for x in args.turns.split(",")]
    kinds = [k for k in args.agents.split(",") if k]
    for k in kinds:
        if k not in AGENTS:
            ap.error(f"unknown agent {k!r} (full, delta)")
    t_start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="unsee-bench-late-") as tmp:
        bare = {(k, n): Bare(n, k == "delta") for k in kinds for n in sizes}
        rec = {(k, n): Recorded(n, k == "delta", Path(tmp) / f"{k}{n}") for k in kinds for n in sizes}
        print(f"recorded {len(rec)} sessions and their bare twins in {time.perf_counter() - t_start:.0f} s")
        # The recorded sessions stay in memory for the copies; out of the collector's sight (a
        # process forgetting holds one session, not this harness's dozen)
        gc.collect()
        gc.freeze()
        b7: dict = defaultdict(lambda: defaultdict(list))
        floor: dict = defaultdict(lambda: defaultdict(list))
        try:
            for r in range(args.repeat):
                order = sizes if r % 2 == 0 else sizes[::-1]  # interleaved: every size once per round
                for n in order:
                    for k in kinds:
                        steps = [lambda: floor[k][n].append(bare[(k, n)].replay()),
                                 lambda: b7[k][n].append(rec[(k, n)].forget(warm=not args.cold))]
                        for step in (steps if r % 2 == 0 else steps[::-1]):
                            step()
        finally:
            gc.unfreeze()
    for k in kinds:
        report(k, sizes, b7[k], floor[k], args.repeat, not args.cold)


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
