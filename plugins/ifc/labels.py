"""Trust labels of artifacts from their sources, propagated along provenance edges.

Pure logic over a :class:`~unsee.middleware.graph.ProvenanceGraph`:

- a user input is ``trusted``;
- a tool return or memory read is ``untrusted`` unless one of its source ids
  matches a declared trusted source key (``tool:lookup_ticket``,
  ``memory:users``); matching is by prefix on a boundary: the key equals the
  source id, or the source id continues after the key with ``/``, ``:`` or
  ``.`` (``memory:users`` matches ``memory:users/42/name`` but not
  ``memory:users_old/1``; ``tool:send`` does not match ``tool:send_money``);
- a tool return or memory read whose id is in ``endorsed`` (its content was
  vetted, e.g. an injection detector found nothing in it) is ``trusted`` and
  ``endorsed``;
- an artifact named in ``revoked`` (by id, or by a source key matched the same
  way) is ``revoked`` and never ``trusted``;
- a derived artifact (model turn, plan, tool call, summary, ...) has no label
  of its own; one with no parents in the graph (the system prompt) is trusted;
- restrictive labels already on the record (``Artifact.labels`` containing
  ``untrusted`` or ``revoked``) are kept;
- every artifact gets the union of its parents' ``untrusted``/``revoked``
  labels; it is ``trusted`` only if none reaches it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from unsee.middleware.graph import ProvenanceGraph
from unsee.middleware.records import Artifact, ArtifactType

TRUSTED = "trusted"
UNTRUSTED = "untrusted"
REVOKED = "revoked"
#: an untrusted observation whose content was vetted (endorsement raises integrity)
ENDORSED = "endorsed"

#: labels that flow from parent to child
RESTRICTIVE = frozenset({UNTRUSTED, REVOKED})

_SEPARATORS = "/:."
_EXTERNAL = frozenset({ArtifactType.TOOL_RETURN, ArtifactType.MEMORY_READ})

Labels = Mapping[str, frozenset[str]]


def source_matches(source_id: str, key: str) -> bool:
    """Whether ``source_id`` falls under the declared source ``key`` (boundary-aware prefix)."""
    if not key:
        return False
    if source_id == key:
        return True
    if not source_id.startswith(key):
        return False
    return key[-1] in _SEPARATORS or source_id[len(key)] in _SEPARATORS


def _any_source(artifact: Artifact, keys: Iterable[str]) -> bool:
    return any(source_matches(s, k) for s in artifact.source_ids for k in keys)


def own_labels(
    artifact: Artifact,
    trusted_sources: Iterable[str] = (),
    revoked: Iterable[str] = (),
    *,
    has_parents: bool | None = None,
    endorsed: Iterable[str] = (),
) -> frozenset[str]:
    """The labels an artifact gets from its own type and sources (before propagation).

    ``has_parents`` tells whether any parent is in the graph (default: the
    record has parents at all); a derived artifact with none is trusted.
    ``endorsed``: ids of observations whose content was vetted.
    """
    trusted_sources = tuple(trusted_sources)
    revoked = tuple(revoked)
    labels: set[str] = set(artifact.labels) & RESTRICTIVE
    if artifact.type is ArtifactType.USER_INPUT:
        labels.add(TRUSTED)
    elif artifact.type in _EXTERNAL:
        if artifact.id in endorsed:
            labels |= {TRUSTED, ENDORSED}
        else:
            labels.add(TRUSTED if _any_source(artifact, trusted_sources) else UNTRUSTED)
    elif not (bool(artifact.parents) if has_parents is None else has_parents):
        labels.add(TRUSTED)
    if artifact.id in revoked or _any_source(artifact, revoked):
        labels.add(REVOKED)
    if labels & RESTRICTIVE:
        labels -= {TRUSTED, ENDORSED}
    return frozenset(labels)


def label_graph(
    graph: ProvenanceGraph,
    trusted_sources: Iterable[str] = (),
    revoked: Iterable[str] = (),
    *,
    reset_at_trusted_sources: bool = False,
    endorsed: Iterable[str] = (),
) -> dict[str, frozenset[str]]:
    """Labels of every artifact of ``graph``, keyed by id, in recording order.

    ``trusted_sources`` are source keys declared trusted; ``revoked`` are
    artifact ids or source keys whose artifacts are revoked. A parent outside
    the graph contributes nothing.

    Strict propagation (the default) lets ``untrusted`` flow into a trusted
    tool's return through its call (the call's arguments may have been steered
    by untrusted data). ``reset_at_trusted_sources=True`` treats a declared
    trusted source's content as trusted whatever led to the call; ``revoked``
    still flows.

    ``endorsed`` are ids of tool returns / memory reads whose content was
    vetted (an injection detector found nothing in it as recorded): they are
    ``trusted`` and ``endorsed`` whatever led to the call, since the
    endorsement is about that content; ``revoked`` still flows and wins.
    """
    trusted_sources = tuple(trusted_sources)
    revoked = tuple(revoked)
    endorsed = frozenset(endorsed)
    artifacts = list(graph)
    own: dict[str, frozenset[str]] = {}
    present: dict[str, tuple[str, ...]] = {}
    for a in artifacts:
        present[a.id] = tuple(p for p in a.parents if p in graph)
        own[a.id] = own_labels(a, trusted_sources, revoked, has_parents=bool(present[a.id]), endorsed=endorsed)
    flows: dict[str, frozenset[str]] = {}
    # Parents are recorded before children, so one pass in seq order suffices;
    # a parent recorded later than its child (or a cycle) is settled by further
    # passes: restrictive labels only grow, so this reaches a fixpoint.
    while True:
        changed = False
        for a in artifacts:
            restrictive = set(own[a.id] & RESTRICTIVE)
            inherited: set[str] = set()
            for p in present[a.id]:
                inherited |= flows.get(p, frozenset())
            if TRUSTED in own[a.id] and a.type in _EXTERNAL and (
                    reset_at_trusted_sources or ENDORSED in own[a.id]):
                inherited &= {REVOKED}
            new = frozenset(restrictive | inherited)
            if flows.get(a.id) != new:
                changed = changed or a.id in flows or any(
                    c in flows for c in graph.children(a.id))
                flows[a.id] = new
        if not changed:
            break
    out: dict[str, frozenset[str]] = {}
    for a in artifacts:
        if flows[a.id]:
            out[a.id] = flows[a.id]
        else:
            out[a.id] = frozenset({TRUSTED, ENDORSED}) if ENDORSED in own[a.id] else frozenset({TRUSTED})
    return out


def is_trusted(labels: frozenset[str]) -> bool:
    return TRUSTED in labels and not (labels & RESTRICTIVE)


def is_restricted(labels: frozenset[str]) -> bool:
    """Untrusted or revoked: identifiers it introduces are policed at sinks."""
    return bool(labels & RESTRICTIVE)
