"""IFC sink decisions on a long session: uncached vs with the adapter's extraction cache.

A synthetic provenance graph of N turns (model turn -> tool call -> tool return,
each return carrying an e-mail address and a URL) stands in for a long agent
session. For each size it times one ``evaluate`` of a ``send_money.recipient``
call without a cache (what every sink call cost before), the first call with
an empty cache (cold) and a later one (warm, what the IFC interceptor pays per
sink call once the session's artifacts were extracted), and prints warm/uncached
as a ratio from the same run.
"""

from __future__ import annotations

import statistics
import time

from unsee.middleware.graph import ProvenanceGraph
from unsee.middleware.records import Artifact, ArtifactType
from unsee.plugins.ifc import evaluate
from unsee.plugins.ifc.adapter import BoundedLRU

SINKS = ["send_money.recipient"]


def session_graph(turns: int) -> ProvenanceGraph:
    arts = [Artifact(id="in0", session_id="s", type=ArtifactType.USER_INPUT, seq=0, content_hash="h-in0")]
    contents = {"in0": "Pay my landlord DE89 3704 0044 0532 0130 00, then summarise my inbox."}
    prev, seq = "in0", 1
    for i in range(turns):
        for aid, typ, parents, text in (
            (f"mt{i}", ArtifactType.MODEL_TURN, (prev,), f"Reading page {i}."),
            (f"c{i}", ArtifactType.TOOL_CALL, (f"mt{i}",), "read_inbox()"),
            (f"tr{i}", ArtifactType.TOOL_RETURN, (f"c{i}",),
             f"From bob{i}@mail{i}.example.com: invoice at https://pay{i}.example.org/x?id={i} " * 4),
        ):
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


def main(sizes=(100, 500, 2000)) -> None:
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


if __name__ == "__main__":
    main()
