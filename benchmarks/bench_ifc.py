"""IFC sink decisions on a long session: the pure pipeline, and the interceptor's path.

(a) ``evaluate`` on a synthetic provenance graph of N turns (model turn -> tool
    call -> tool return, each return carrying an e-mail address and a URL): one
    call without a cache (what every sink call cost before the extraction
    cache), the first with an empty cache (cold) and a later one (warm), with
    warm/uncached as a ratio from the same run.
(b) The interceptor's path end to end (``IFCInterceptor.decision_for``): a real
    ``Unsee`` home (SQLite store) holding one session of 1 001 / 6 001 / 10 001
    artifacts of that shape (written through the store's batching writer), one
    new artifact recorded between decisions as in a live session, and a
    ``send_money.recipient`` call carrying an address from a tool return in the
    middle. Timed: a warm decision now (the session's graph kept and extended,
    labels and an identifier index kept up to date: ``middleware/graph_cache.py``,
    ``plugins/ifc/index.py``) against the baseline of the path before (the graph
    rebuilt from the store, ``label_graph`` and ``evaluate`` at every call, with a
    warm extraction cache), both in the same run; then the same with an endorser
    that vets every observation asked about (the call is decided twice). Every
    decision of the two paths is checked to be the same.
(c) The agent's own path of a sink call: ``IFCInterceptor._decide`` inside an
    ``execute_tool`` span of the home's tracer (the decision, its span event and
    its ``run_guardrail`` span handed to the recorder's deferred queue), one
    blocked and one allowed call, median per call in microseconds, against the
    path before guardrail spans (the decision and its span event) and the span
    made on the path (no queue handed over), taking turns in one run; "later" is
    the queued work the store's writer (or a flush) does afterwards, off that path.

    python -m benchmarks bench_ifc      (or: python -m benchmarks.bench_ifc [--sizes 1001,6001]
                                         [--path-only] [--path-runs 300])
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from unsee.middleware.graph import ProvenanceGraph
from unsee.middleware.records import Artifact, ArtifactType
from unsee.plugins.ifc import evaluate
from unsee.plugins.ifc.adapter import BoundedLRU

SINKS = ["send_money.recipient"]


def _turn(i: int, prev: str) -> list[tuple[str, ArtifactType, tuple[str, ...], str]]:
    return [
        (f"mt{i}", ArtifactType.MODEL_TURN, (prev,), f"Reading page {i}."),
        (f"c{i}", ArtifactType.TOOL_CALL, (f"mt{i}",), "read_inbox()"),
        (f"tr{i}", ArtifactType.TOOL_RETURN, (f"c{i}",),
         f"From bob{i}@mail{i}.example.com: invoice at https://pay{i}.example.org/x?id={i} " * 4),
    ]


def session_graph(turns: int) -> ProvenanceGraph:
    arts = [Artifact(id="in0", session_id="s", type=ArtifactType.USER_INPUT, seq=0, content_hash="h-in0")]
    contents = {"in0": "Pay my landlord DE89 3704 0044 0532 0130 00, then summarise my inbox."}
    prev, seq = "in0", 1
    for i in range(turns):
        for aid, typ, parents, text in _turn(i, prev):
            arts.append(Artifact(id=aid, session_id="s", type=typ, seq=seq, parents=parents,
                                 source_ids=("tool:read_inbox",) if typ is ArtifactType.TOOL_RETURN else (),
                                 content_hash=f"h-{aid}"))
            contents[aid] = text
            seq += 1
        prev = f"tr{i}"
    return ProvenanceGraph(arts, content_of=contents.get)


def _ms(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def synthetic(sizes=(100, 500, 2000)) -> None:
    print("(a) evaluate() on a synthetic graph")
    print(f"{'turns':>6} {'artifacts':>9} {'uncached ms':>12} {'cold ms':>8} {'warm ms':>8} {'warm/uncached':>14}")
    for n in sizes:
        g = session_graph(n)
        call = {"recipient": f"bob{n // 2}@mail{n // 2}.example.com"}
        uncached = _ms(lambda: evaluate(g, "send_money", call, SINKS), 3)
        cache = BoundedLRU(200_000)
        t = time.perf_counter()
        d = evaluate(g, "send_money", call, SINKS, cache=cache)
        cold = (time.perf_counter() - t) * 1000
        warm = _ms(lambda: evaluate(g, "send_money", call, SINKS, cache=cache), 5)
        assert d.action == "block"
        print(f"{n:>6} {len(g):>9} {uncached:>12.1f} {cold:>8.1f} {warm:>8.1f} {warm / uncached:>14.3f}")


# -- (b) the interceptor's path on a real home ----------------------------------------

class VetAll:
    """An endorser that vets every observation it is asked about (a detector finding nothing)."""

    def endorsed(self, session, graph, artifact_ids):
        return set(artifact_ids)


class Live:
    """One recorded session of ``n`` artifacts, growing by one artifact per :meth:`grow`."""

    def __init__(self, u, n: int, sid: str = "s"):
        from unsee.middleware.store import Batch

        self.u, self.sid, self.Batch = u, sid, Batch
        self.seq, self.prev, self.i = 0, "in0", 0
        arts, contents = [self._art("in0", ArtifactType.USER_INPUT, ())], {
            "in0": "Pay my landlord DE89 3704 0044 0532 0130 00, then summarise my inbox."}
        while len(arts) < n:
            for aid, typ, parents, text in _turn(self.i, self.prev):
                if len(arts) < n:
                    arts.append(self._art(aid, typ, parents))
                    contents[aid] = text
            self.prev, self.i = f"tr{self.i}", self.i + 1
        for k in range(0, len(arts), 1000):  # the writer thread, in batches (as spans arrive, only faster)
            part = arts[k:k + 1000]
            u.store.submit(Batch(session_id=sid, artifacts=part, content={a.id: contents[a.id] for a in part}))
        u.store.flush()

    def _art(self, aid: str, typ: ArtifactType, parents: tuple[str, ...]) -> Artifact:
        self.seq += 1
        return Artifact(id=aid, session_id=self.sid, type=typ, seq=self.seq, parents=parents,
                        source_ids=("tool:read_inbox",) if typ is ArtifactType.TOOL_RETURN else (),
                        content_hash=f"h-{aid}-{self.seq}")

    def grow(self) -> None:
        """Record one more artifact (a model turn or a tool return with new identifiers)."""
        k = self.seq
        if k % 2:
            a = self._art(f"live{k}", ArtifactType.MODEL_TURN, (self.prev,))
            text = f"Noted page {k}."
        else:
            a = self._art(f"live{k}", ArtifactType.TOOL_RETURN, (self.prev,))
            text = f"From carol{k}@mail{k}.example.net: see https://docs{k}.example.org/{k}"
        self.prev = a.id
        self.u.store.submit(self.Batch(session_id=self.sid, artifacts=[a], content={a.id: text}))
        self.u.store.flush()  # (written by the writer thread during the agent's step: not timed)


def baseline(u, ifc, cache, sid: str, tool: str, args: dict):
    """The path before: the graph rebuilt from the store and labelled whole at every call."""
    from unsee.plugins.ifc.index import unvetted_sources

    u.flush()
    u.store.require(sid)
    contents = u.store.contents(sid)
    graph = ProvenanceGraph(u.store.artifacts(sid), u.store.checkpoints(sid), content_of=contents.get,
                            hash_of=u.hasher.hash, session_id=sid)
    revoked = ifc.revoked(sid)

    def run(endorsed=frozenset()):
        return evaluate(graph, tool, args, ifc.sinks, trusted_sources=ifc.trusted_sources, revoked=revoked,
                        mode=ifc.mode, reset_at_trusted_sources=ifc.reset_at_trusted_sources,
                        endorsed=endorsed, cache=cache)

    decision = run()
    if decision.flagged and ifc.endorser is not None:
        asked = unvetted_sources(graph, decision.artifact_ids)
        endorsed = frozenset(ifc.endorser.endorsed(sid, graph, asked)) & frozenset(asked)
        if endorsed:
            decision = run(endorsed)
    return decision


def interceptor(sizes=(1001, 6001, 10001), runs: int = 15, base_runs: int = 5) -> None:
    from unsee import Unsee

    print("\n(b) the interceptor's path: a warm sink decision, one new artifact recorded between decisions")
    print(f"{'artifacts':>9} {'endorse':>7} {'before ms':>10} {'now ms':>8} {'now/before':>11} {'rebuilds':>9}")
    rows = []
    for n in sizes:
        with tempfile.TemporaryDirectory() as d:
            u = Unsee(home=Path(d) / "home")
            try:
                live = Live(u, n)
                ifc = u.ifc(SINKS)
                k = live.i // 2
                call = {"recipient": f"bob{k}@mail{k}.example.com", "amount": 10}
                cache = BoundedLRU(200_000)
                for endorse in (False, True):
                    ifc.set_endorser(VetAll() if endorse else None)
                    want = "allow" if endorse else "block"
                    # warm both paths (extraction, the kept graph and index)
                    assert ifc.decision_for("s", "send_money", call, ifc.sinks).action == want
                    assert baseline(u, ifc, cache, "s", "send_money", call).action == want
                    now, before = [], []
                    for r in range(max(runs, base_runs)):
                        live.grow()
                        t = time.perf_counter()
                        d_now = ifc.decision_for("s", "send_money", call, ifc.sinks)
                        now.append((time.perf_counter() - t) * 1000)
                        if r < base_runs:
                            t = time.perf_counter()
                            d_before = baseline(u, ifc, cache, "s", "send_money", call)
                            before.append((time.perf_counter() - t) * 1000)
                            assert d_now == d_before, (d_now, d_before)
                    b, w = statistics.median(before), statistics.median(now)
                    rows.append((n, endorse, b, w))
                    # rebuilds: how often the kept graph was built from the store (once, cold)
                    print(f"{n:>9} {'yes' if endorse else 'no':>7} {b:>10.1f} {w:>8.2f} {w / b:>11.4f}"
                          f" {u._graphs.stats['rebuilt']:>9}", flush=True)
            finally:
                u.close()
    for endorse in (False, True):
        own = [(n, w) for n, e, _, w in rows if e is endorse]
        if len(own) > 1:
            print(f"flatness ({'with' if endorse else 'without'} endorsement): now at {own[-1][0]} artifacts"
                  f" / at {own[0][0]} = {own[-1][1] / own[0][1]:.2f}")


def decide_before(ifc, request):
    """The sink call's path before guardrail spans (``IFCInterceptor._decide`` at 2f834ee): the
    decision and its span event, nothing handed off. Kept here to time both in one run."""
    from opentelemetry import trace

    from unsee.middleware.context import current_session

    sinks = ifc._sinks_for(request)
    thread, _ = current_session()
    if not sinks or not ifc.sessions.has_session(thread):
        return None
    name, args = request.tool_call.get("name", ""), request.tool_call.get("args", {}) or {}
    decision = ifc.decision_for(thread, name, args, sinks)
    trace.get_current_span().add_event("unsee.ifc.decision", decision.to_event(hash_of=ifc.hasher.hash))
    ifc.decisions.append(decision)
    return decision


def agent_path(n: int = 1001, runs: int = 300) -> None:
    """(c): what a sink call costs the agent's thread, span work included (µs, median)."""
    from types import SimpleNamespace

    from opentelemetry import trace

    from unsee import Unsee
    from unsee.middleware.trace_after import AfterSpans

    print(f"\n(c) the agent's path of a sink call (_decide in its execute_tool span), {n} artifacts, {runs} calls")
    print(f"{'action':>7} {'path':>22} {'path us':>8} {'later us':>9}")
    with tempfile.TemporaryDirectory() as d:
        u = Unsee(home=Path(d) / "home")
        try:
            live = Live(u, n, sid="default")  # (outside a LangGraph run the session is "default")
            ifc = u.ifc(SINKS)
            deferred = ifc.spans
            at_once = AfterSpans(deferred.tracer)  # (no queue handed over: made on the agent's path)
            tracer = u.tracer_provider.get_tracer("bench")
            k = live.i // 2
            calls = (("block", {"recipient": f"bob{k}@mail{k}.example.com", "amount": 10}),
                     ("allow", {"recipient": "DE89 3704 0044 0532 0130 00", "amount": 10}))

            def before(req):
                return decide_before(ifc, req)

            def now(req):
                ifc.spans = deferred
                return ifc._decide(req)

            def now_at_once(req):
                ifc.spans = at_once
                try:
                    return ifc._decide(req)
                finally:
                    ifc.spans = deferred

            paths = (("before (event only)", before), ("now (span deferred)", now),
                     ("now, no queue", now_at_once))
            for want, args in calls:
                req = SimpleNamespace(tool_call={"name": "send_money", "args": args, "id": "call-1"}, tool=None)
                times = {label: ([], []) for label, _ in paths}
                for r in range(runs + 20):  # (the first 20 warm up; the paths take turns, so load hits all alike)
                    for label, fn in paths:
                        span = tracer.start_span("execute_tool send_money")
                        with trace.use_span(span, end_on_exit=False):
                            t = time.perf_counter()
                            got = fn(req)
                            took = time.perf_counter() - t
                        t = time.perf_counter()
                        u.recorder.run_tasks()  # (the writer's or a flush's work, off the agent's path)
                        after = time.perf_counter() - t
                        span.end()
                        assert got is not None and got.action == want, got
                        if r >= 20:
                            times[label][0].append(took * 1e6)
                            times[label][1].append(after * 1e6)
                for label, _ in paths:
                    path, later = times[label]
                    print(f"{want:>7} {label:>22} {statistics.median(path):>8.1f} {statistics.median(later):>9.1f}",
                          flush=True)
        finally:
            u.close()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="1001,6001,10001", help="session sizes of (b), in artifacts")
    p.add_argument("--runs", type=int, default=15, help="decisions timed per size in (b)")
    p.add_argument("--path-only", action="store_true", help="only (c), the agent's path of a sink call")
    p.add_argument("--path-runs", type=int, default=300, help="sink calls timed per action in (c)")
    a = p.parse_args(argv if argv is not None else [])
    if not a.path_only:
        synthetic()
        interceptor(tuple(int(s) for s in a.sizes.split(",")), runs=a.runs)
    agent_path(runs=a.path_runs)


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
