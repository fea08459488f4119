"""find_spread (pure): where a target went through shared memory keys, on hand-built graphs."""

from unsee.middleware.graph import ProvenanceGraph
from unsee.middleware.records import Artifact, ArtifactType as T
from unsee.plugins.forget import find_spread

Z = "4417-2231"


def graph(session, *rows):
    """rows: (id, type, parents, source key or None, content)."""
    arts, text = [], {}
    for seq, (aid, type_, parents, key, content) in enumerate(rows):
        arts.append(Artifact(id=aid, session_id=session, type=type_, parents=tuple(parents),
                             source_ids=(key,) if key else (), seq=seq, step=seq))
        text[aid] = content
    return ProvenanceGraph(arts, content_of=text.get, session_id=session)


A = graph("A", ("u1", T.USER_INPUT, [], "user", f"card {Z}"),
          ("mt", T.MODEL_TURN, ["u1"], None, "noted"),
          ("w_sum", T.MEMORY_WRITE, ["mt"], "memory:sum", "a card was given"),   # derived only
          ("w_card", T.MEMORY_WRITE, ["mt"], "memory:card", f"card {Z}"))
GRAPHS = {
    "B": graph("B", ("r1", T.MEMORY_READ, [], "memory:card", f"card {Z}"),
               ("bw", T.MEMORY_WRITE, ["r1"], "memory:b", f"B saw {Z}")),
    "C": graph("C", ("s", T.MEMORY_READ, [], "memory:sum", "a card was given"),     # derived read first
               ("c", T.MEMORY_READ, [], "memory:card", f"card {Z}")),
    "D": graph("D", ("old", T.MEMORY_READ, [], "memory:card", "no card yet")),       # read before the write
    "E": graph("E", ("e", T.MEMORY_READ, [], "memory:b", f"B saw {Z}")),             # reached through B
    "F": graph("F", ("f", T.MEMORY_READ, [], "memory:sum", "a card was given")),     # derived only
}


def test_spread_table():
    closure = A.taint("u1")
    got = find_spread("A", A, closure, Z, ["A", *GRAPHS], GRAPHS.__getitem__)
    entered = [(s.session_id, s.entry, s.via_key, s.from_session) for s in got if s.entry]
    assert entered == [("B", "r1", "memory:card", "A"), ("C", "c", "memory:card", "A"),
                       ("E", "e", "memory:b", "B")]
    assert sorted(s.session_id for s in got if s.entry is None) == ["D", "F"]  # named, not forgettable
