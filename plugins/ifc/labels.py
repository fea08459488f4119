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

import weakref
from collections.abc import Iterable, Iterator, Mapping

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


def inputs_of(graph: ProvenanceGraph, a: Artifact) -> tuple[str, ...]:
    """What ``a``'s labels flow from: its parents, a model turn's whole context manifest (stored
    as a delta of an earlier turn's, ``ProvenanceGraph.manifest`` rebuilds it)."""
    return a.parents if a.context is None else graph.inputs(a.id)


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
        present[a.id] = tuple(p for p in inputs_of(graph, a) if p in graph)
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


# -- labels kept up to date as a session grows -------------------------------------

_T, _U, _R, _E = 1, 2, 4, 8
_RESTRICT = _U | _R
_NAMES = ((_T, TRUSTED), (_U, UNTRUSTED), (_R, REVOKED), (_E, ENDORSED))
#: label mask -> the label set label_graph gives
LABEL_SETS: tuple[frozenset[str], ...] = tuple(
    frozenset(name for bit, name in _NAMES if mask & bit) for mask in range(16))


def _prefix_keys(source_id: str) -> Iterator[str]:
    """The keys ``source_matches(source_id, key)`` holds for: the source itself and its
    prefixes that end on, or are followed by, a separator."""
    if source_id:  # (an empty key matches nothing)
        yield source_id
    for m in range(1, len(source_id)):
        if source_id[m - 1] in _SEPARATORS or source_id[m] in _SEPARATORS:
            yield source_id[:m]


def _matches(source_ids: Iterable[str], keys: frozenset[str]) -> bool:
    """``any(source_matches(s, k) for s in source_ids for k in keys)``, by looking up the
    keys a source can match instead of trying every key."""
    return bool(keys) and any(k in keys for s in source_ids for k in _prefix_keys(s))


class LabelTable:
    """The labels :func:`label_graph` gives a graph, for one setting, kept up to date.

    :meth:`update` brings the table to a graph: artifacts recorded since the last
    update (the graph was extended, ``ProvenanceGraph.extended``) get theirs from their
    own sources and their parents' labels; anything else relabels the whole graph (a
    rebuilt graph, an older one, a parent recorded after an artifact naming it). Labels
    are masks by position in the graph (``masks``; :data:`LABEL_SETS` names them).
    """

    def __init__(self, trusted_sources: Iterable[str] = (), revoked: Iterable[str] = (), *,
                 reset_at_trusted_sources: bool = False, endorsed: Iterable[str] = ()):
        self._trusted = frozenset(trusted_sources)
        self._revoked = frozenset(revoked)
        self._reset = reset_at_trusted_sources
        self._endorsed = frozenset(endorsed)
        self._lineage: weakref.ref | None = None  # (weakly: see IdentifierIndex)
        self._len = 0
        self._own: list[int] = []
        self._flow: list[int] = []
        #: final label mask per position
        self.masks: list[int] = []
        self._missing: set[str] = set()  # parents named but not in the graph
        #: bumped whenever the table was relabelled from scratch
        self.relabels = 0

    def update(self, graph: ProvenanceGraph) -> None:
        if self._lineage is not None and graph.lineage is self._lineage() and len(graph) >= self._len:
            new = graph.tail(len(self.masks))
            if self._extend(graph, new):
                return
        self._full(graph)

    def get(self, graph: ProvenanceGraph, artifact_id: str) -> frozenset[str] | None:
        """The labels of an artifact of the graph last updated to (None when not in it)."""
        i = graph.position(artifact_id)
        return None if i is None or i >= len(self.masks) else LABEL_SETS[self.masks[i]]

    def _own_mask(self, a: Artifact, has_parents: bool) -> int:
        # own_labels as a mask (property-tested against it)
        m = (_U if UNTRUSTED in a.labels else 0) | (_R if REVOKED in a.labels else 0)
        if a.type is ArtifactType.USER_INPUT:
            m |= _T
        elif a.type in _EXTERNAL:
            if a.id in self._endorsed:
                m |= _T | _E
            else:
                m |= _T if _matches(a.source_ids, self._trusted) else _U
        elif not has_parents:
            m |= _T
        if a.id in self._revoked or _matches(a.source_ids, self._revoked):
            m |= _R
        if m & _RESTRICT:
            m &= ~(_T | _E)
        return m

    def _flow_of(self, i: int, a: Artifact, present: tuple[int, ...]) -> int:
        own, flow = self._own[i], self._flow
        inherited = 0
        for j in present:
            inherited |= flow[j]
        if own & _T and a.type in _EXTERNAL and (self._reset or own & _E):
            inherited &= _R
        return (own & _RESTRICT) | inherited

    def _final(self, i: int) -> int:
        f = self._flow[i]
        return f if f else (_T | _E if self._own[i] & _E else _T)

    def _extend(self, graph: ProvenanceGraph, new: list[Artifact]) -> bool:
        """Label artifacts appended to the graph; False when the graph must be relabelled."""
        if not new:
            self._len = len(graph)
            return True
        first = len(self.masks)
        position = graph.position
        rows = []
        for i, a in enumerate(new, first):
            if a.id in self._missing:
                return False  # a parent recorded after an artifact naming it: earlier labels change
            present = tuple(j for j in (position(p) for p in inputs_of(graph, a)) if j is not None)
            if any(j >= i for j in present):
                return False  # a parent later than its child (or itself): settled by the fixpoint
            rows.append((i, a, present))
        for i, a, present in rows:
            self._own.append(self._own_mask(a, bool(present)))
            self._flow.append(0)
            self._flow[i] = self._flow_of(i, a, present)
            self.masks.append(self._final(i))
            self._missing.update(p for p in inputs_of(graph, a) if position(p) is None)
        self._len = len(graph)
        return True

    def _full(self, graph: ProvenanceGraph) -> None:
        arts = graph.tail(0)
        position = graph.position
        present = [tuple(j for j in (position(p) for p in inputs_of(graph, a)) if j is not None) for a in arts]
        self._own = [self._own_mask(a, bool(p)) for a, p in zip(arts, present)]
        self._flow = [0] * len(arts)
        forward = any(j >= i for i, ps in enumerate(present) for j in ps)
        # In recording order one pass settles everything; a parent recorded later than its
        # child (or a cycle) takes more: restrictive labels only grow, up to the same least
        # fixpoint label_graph reaches.
        while True:
            changed = False
            for i, a in enumerate(arts):
                f = self._flow_of(i, a, present[i])
                if f != self._flow[i]:
                    self._flow[i] = f
                    changed = True
            if not (forward and changed):
                break
        self.masks = [self._final(i) for i in range(len(arts))]
        self._missing = {p for a in arts for p in inputs_of(graph, a) if position(p) is None}
        self._lineage = weakref.ref(graph.lineage)
        self._len = len(graph)
        self.relabels += 1
