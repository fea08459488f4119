"""Sink decisions that cost what the call carries, not what the session holds (pure logic).

:func:`~.policy.evaluate` labels the whole graph, collects the identifiers of
every artifact and scans them all at every sink call. :class:`SessionDecisions`
keeps what that needs for one session as its graph grows
(``ProvenanceGraph.extended``: the artifacts recorded since the last decision
are the only new work):

- an :class:`IdentifierIndex`, the same whatever the labels: the identifiers
  in each artifact's content (extracted once, through the adapter's extraction
  cache), which artifacts carry each, and each identifier by its soft form, its
  soft form without ``www.`` and its key, so the identifiers a sink value may
  hold are found from the value's own substrings;
- a :class:`~.labels.LabelTable` per setting in use (revoked and endorsed
  artifacts, trusted sources), extended as artifacts arrive and rebuilt when
  the setting or the graph's lineage changes.

A decision then looks up the candidates of the call's sink values and hands
them to :func:`~.policy.decide_known`, the same code :func:`~.policy.decide`
runs: its decision is :func:`~.policy.evaluate`'s, which stays the reference
(tests compare the two on random sessions).
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Any

from unsee.middleware.graph import ProvenanceGraph
from unsee.middleware.records import ArtifactType

from .decision import Decision
from .extract import ExtractorRegistry, default_registry
from .labels import _E, _RESTRICT, _T, LABEL_SETS, LabelTable
from .policy import ExtractionCache, SinkSpec, _check_mode, _Haystack, _identifiers_of, _key, _soft, decide_known

__all__ = ["IdentifierIndex", "SessionDecisions", "unvetted_sources"]


def unvetted_sources(graph: Any, artifact_ids: Iterable[str]) -> list[str]:
    """The tool returns and memory reads that ``artifact_ids`` are or derive from, in recording order.

    Only observations can be vetted; derived text (a model turn carrying an
    identifier) is endorsed through them: when every untrusted observation
    behind it is vetted, nothing untrusted reaches it any more.
    """
    seen: set[str] = set()
    stack = [i for i in artifact_ids if i in graph]
    while stack:
        aid = stack.pop()
        if aid in seen:
            continue
        seen.add(aid)
        stack.extend(p for p in graph.inputs(aid) if p in graph and p not in seen)
    found = [graph.get(i) for i in seen]
    # a return whose tool never ran (an IFC block, a replay deferral) is unsee's own text about the
    # call, not an observation of the world: vetting it would launder what the call carried
    return [a.id for a in sorted(found, key=lambda a: a.seq)
            if a.type in (ArtifactType.TOOL_RETURN, ArtifactType.MEMORY_READ) and a.attrs.get("executed", True)]


class _Forms:
    """Identifiers by one of their forms (never empty), found again from a text's substrings."""

    def __init__(self) -> None:
        self.by: dict[str, set[str]] = {}
        self._lengths: dict[int, int] = {}
        self._sorted: list[int] | None = []

    def add(self, form: str, ident: str) -> None:
        bucket = self.by.get(form)
        if bucket is None:
            bucket = self.by[form] = set()
            if len(form) not in self._lengths:
                self._sorted = None
            self._lengths[len(form)] = self._lengths.get(len(form), 0) + 1
        bucket.add(ident)

    def within(self, text: str) -> set[str]:
        """The identifiers whose form occurs in ``text``: its substrings of the forms' lengths
        looked up, or (when that would cost more) every form searched for in it."""
        if self._sorted is None:
            self._sorted = sorted(self._lengths)
        size = len(text)
        lengths = [n for n in self._sorted if n <= size]
        out: set[str] = set()
        by = self.by
        if sum(size - n + 1 for n in lengths) <= len(by):
            for n in lengths:
                for i in range(size - n + 1):
                    hit = by.get(text[i:i + n])
                    if hit:
                        out.update(hit)
        else:
            for form, idents in by.items():
                if form in text:
                    out.update(idents)
        return out


class IdentifierIndex:
    """The identifiers of a growing graph's artifacts, by artifact and by form (labels apart).

    ``update`` follows the graph: a graph extended from the one last seen adds its new
    artifacts; any other graph (rebuilt, older) or a changed extractor set starts over.
    ``structure`` moves when ancestry may have changed (a start over, or a parent recorded
    after an artifact naming it).
    """

    def __init__(self, registry: ExtractorRegistry | None = None, cache: ExtractionCache | None = None):
        self._registry = registry
        self._cache = cache
        # (weakly: what the graph cache let go of, with its text, is not held here)
        self._lineage: weakref.ref | None = None
        self._names: tuple[str, ...] | None = None
        self._len = 0
        self.structure = 0
        self._reset()

    def _reset(self) -> None:
        #: artifact id and identifiers per graph position
        self.ids: list[str] = []
        self.found: list[tuple[str, ...]] = []
        #: identifier -> positions of the artifacts carrying it
        self.postings: dict[str, list[int]] = {}
        self.soft = _Forms()   # soft form (trusted identifiers covering a sink value)
        self.bare = _Forms()   # soft form without "www." (what ``_Haystack.may_contain`` looks for)
        self.key = _Forms()    # key form
        #: identifiers ``may_contain`` finds in any text (a soft form that is "www." or has no key)
        self.always: set[str] = set()
        self._missing: set[str] = set()

    def update(self, graph: ProvenanceGraph) -> None:
        names = (self._registry or default_registry()).names()
        if (self._lineage is None or graph.lineage is not self._lineage() or len(graph) < self._len
                or names != self._names):
            self._reset()
            self._lineage, self._names = weakref.ref(graph.lineage), names
            self.structure += 1
        start = len(self.ids)
        for i, a in enumerate(graph.tail(start), start):
            if a.id in self._missing:
                self.structure += 1  # an artifact's parent arrived after it: its ancestry grew
                self._missing.discard(a.id)
            self._missing.update(p for p in a.parents if p not in graph)
            found = _identifiers_of(graph, a.id, self._registry, self._cache)
            self.ids.append(a.id)
            self.found.append(found)
            for ident in found:
                post = self.postings.get(ident)
                if post is None:
                    post = self.postings[ident] = []
                    self._add_forms(ident)
                post.append(i)
        self._len = len(graph)

    def _add_forms(self, ident: str) -> None:
        soft = _soft(ident)
        if not soft:
            return  # never in a sink value, never a trusted form
        bare, key = soft.removeprefix("www."), _key(ident)
        self.soft.add(soft, ident)
        if key:
            self.key.add(key, ident)
        if bare and key:
            self.bare.add(bare, ident)
        else:
            self.always.add(ident)

    def may_hold(self, hays: list[_Haystack]) -> set[str]:
        """The identifiers ``may_contain`` says one of ``hays`` may hold."""
        out = set(self.always)
        for soft, key in {(h.soft, h.key) for h in hays}:
            out |= self.bare.within(soft)
            out |= self.key.within(key)
        return out


class _Indexed:
    """:class:`~.policy.Known` from an index and a label table synced to ``graph``."""

    def __init__(self, graph: ProvenanceGraph, index: IdentifierIndex, table: LabelTable, endorsing: bool):
        self._graph = graph
        self._index = index
        self._masks = table.masks
        self._endorsing = endorsing
        self.labels = _Labels(graph, table.masks)

    def _carriers(self, ident: str, bits: int) -> list[str]:
        masks, ids = self._masks, self._index.ids
        return [ids[p] for p in self._index.postings.get(ident, ()) if masks[p] & bits]

    def _trusted(self, ident: str) -> bool:
        masks = self._masks
        return any(masks[p] & _T for p in self._index.postings.get(ident, ()))

    def _carrying(self, hays: list[_Haystack], bits: int) -> dict[str, set[str]]:
        """Identifiers the haystacks may hold -> the artifacts carrying them with any of ``bits``."""
        out = {}
        for ident in self._index.may_hold(hays):
            ids = self._carriers(ident, bits)
            if ids:
                out[ident] = set(ids)
        return out

    def untrusted_in(self, hays: list[_Haystack]) -> dict[str, set[str]]:
        return self._carrying(hays, _RESTRICT)

    def is_trusted(self, identifier: str) -> bool:
        if self._trusted(identifier):
            return True
        soft, key = _soft(identifier), _key(identifier)
        return ((bool(soft) and any(self._trusted(t) for t in self._index.soft.by.get(soft, ())))
                or (bool(key) and any(self._trusted(t) for t in self._index.key.by.get(key, ()))))

    def trusted_in(self, soft: str, key: str) -> list[str]:
        found = self._index.soft.within(soft) | self._index.key.within(key)
        return [t for t in found if self._trusted(t)]

    def endorsed_in(self, hays: list[_Haystack]) -> dict[str, set[str]] | None:
        if not self._endorsing:
            return None
        return self._carrying(hays, _E)

    def order(self, ids: Iterable[str]) -> list[str]:
        position = self._graph.position
        placed = sorted((p, i) for i in ids if (p := position(i)) is not None)
        return [i for _, i in placed] + sorted(i for i in ids if position(i) is None)


class _Labels:
    """``label_graph``'s mapping, read from a label table (only ``get`` and truth)."""

    def __init__(self, graph: ProvenanceGraph, masks: list[int]):
        self._graph = graph
        self._masks = masks

    def get(self, artifact_id: str, default: Any = None) -> Any:
        p = self._graph.position(artifact_id)
        return default if p is None or p >= len(self._masks) else LABEL_SETS[self._masks[p]]

    def __bool__(self) -> bool:
        return len(self._graph) > 0


class SessionDecisions:
    """Sink decisions on one session's growing graph (see the module docstring).

    :meth:`evaluate` takes :func:`~.policy.evaluate`'s arguments and gives its
    decision. ``cache``: the extraction cache (see ``identifiers_by_label``);
    ``settings``: how many label settings (revoked / endorsed sets) are kept.
    Thread-safe (one decision at a time per session).
    """

    def __init__(self, registry: ExtractorRegistry | None = None, cache: ExtractionCache | None = None,
                 settings: int = 8):
        self.index = IdentifierIndex(registry, cache)
        self._settings = settings
        self._tables: OrderedDict[tuple, LabelTable] = OrderedDict()
        #: artifact ids -> (lineage weakly, index structure, their unvetted sources)
        self._sources: OrderedDict[frozenset[str], tuple[Any, int, list[str]]] = OrderedDict()
        self._lock = threading.Lock()

    def table(self, graph: ProvenanceGraph, trusted_sources: Iterable[str] = (), revoked: Iterable[str] = (), *,
              reset_at_trusted_sources: bool = False, endorsed: Iterable[str] = ()) -> LabelTable:
        """The label table of one setting, synced to ``graph`` (call under the lock)."""
        key = (frozenset(trusted_sources), frozenset(revoked), bool(reset_at_trusted_sources), frozenset(endorsed))
        table = self._tables.get(key)
        if table is None:
            table = LabelTable(key[0], key[1], reset_at_trusted_sources=key[2], endorsed=key[3])
            self._tables[key] = table
            while len(self._tables) > self._settings:
                self._tables.popitem(last=False)
        self._tables.move_to_end(key)
        table.update(graph)
        return table

    def evaluate(self, graph: ProvenanceGraph, tool: str, args: Mapping[str, Any],
                 sinks: "Iterable[SinkSpec | str]", *, trusted_sources: Iterable[str] = (),
                 revoked: Iterable[str] = (), mode: str = "block", reset_at_trusted_sources: bool = False,
                 endorsed: Iterable[str] = ()) -> Decision:
        """What :func:`~.policy.evaluate` decides for this call on ``graph``."""
        _check_mode(mode)
        endorsed = frozenset(endorsed)
        with self._lock:
            self.index.update(graph)
            table = self.table(graph, trusted_sources, revoked, reset_at_trusted_sources=reset_at_trusted_sources,
                               endorsed=endorsed)
            return decide_known(tool, args, sinks, _Indexed(graph, self.index, table, bool(endorsed)), mode)

    def unvetted_sources(self, graph: ProvenanceGraph, artifact_ids: Iterable[str]) -> list[str]:
        """:func:`unvetted_sources`, remembered while the ancestry of the ids cannot have changed."""
        ids = frozenset(artifact_ids)
        with self._lock:
            self.index.update(graph)
            hit = self._sources.get(ids)
            if (hit is not None and hit[0]() is graph.lineage and hit[1] == self.index.structure
                    and all(i in graph for i in ids)):
                self._sources.move_to_end(ids)
                return list(hit[2])
            found = unvetted_sources(graph, ids)
            if all(i in graph for i in ids):
                self._sources[ids] = (weakref.ref(graph.lineage), self.index.structure, found)
                while len(self._sources) > 16:
                    self._sources.popitem(last=False)
            return list(found)
