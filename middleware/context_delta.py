"""Context manifests stored as deltas (pure logic).

A model turn's context manifest (the artifacts its prompt was built from) and a
checkpoint's (the messages the agent's state held) grow by a few ids a turn: stored
whole, a session's record grows with the square of its length. So a manifest is
stored as what it changed in an earlier one, its *base* (:class:`ContextRef`): the
ids it added, where they sit, and the base's ids it dropped. A chain stores a manifest
whole once its deltas since the last whole one hold as many ids as a whole one
(:data:`WHOLE_AFTER`), and at least every :data:`FULL_EVERY`-th, so a reader of one record
rebuilds its manifest from at most that many. A manifest that shrinks (a compaction,
context editing, a trim by an outer middleware) is a delta like any other: its
dropped ids say so; one whose kept ids changed order is stored whole.

:func:`diff` and :func:`expand` are inverse: ``expand(base, *diff(base, new)) == new``
for distinct ids. :class:`Chains` picks the base for the next manifest of a session.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .errors import UnknownArtifact
from .records import Artifact, ContextRef

#: a chain's manifests stored whole at least every this many: a reader rebuilds one manifest
#: from at most this many records (measured: docs/provenance.md)
FULL_EVERY = 256
#: and whenever the ids its deltas hold since the last whole one reach this share of a whole
#: one: whole manifests then take at most about as much room as the deltas (the record stays
#: linear in the session's length, where a fixed interval alone leaves (length)² / interval),
#: and a rebuild reads at most about twice a whole manifest
WHOLE_AFTER = 1.0
#: chains one session keeps at once: agents on one thread (a supervisor and its workers, a
#: subagent) each build their prompts from their own context; each gets its chain
MAX_CHAINS = 8

Delta = tuple[tuple[str, ...], tuple[str, ...], tuple[int, ...]]


def diff(base: Sequence[str], new: Sequence[str]) -> Delta | None:
    """(added, dropped, at) that turn ``base`` into ``new`` (both of distinct ids), or None
    when the ids both hold are not in the same order in both (stored whole then).
    ``at`` is empty when the added ids all come after the kept ones."""
    n0 = len(base)
    if len(new) >= n0 and new[:n0] == base:  # (a list compare in C: the common case, a manifest that grew)
        return tuple(new[n0:]), (), ()
    old = set(base)
    now = set(new)
    kept_new = [a for a in new if a in old]
    kept_old = [a for a in base if a in now]
    if kept_new != kept_old:
        return None
    added = [(i, a) for i, a in enumerate(new) if a not in old]
    dropped = tuple(a for a in base if a not in now)
    k = len(kept_new)
    trailing = all(i >= k for i, _ in added)
    return tuple(a for _, a in added), dropped, () if trailing else tuple(i for i, _ in added)


def expand(base: Sequence[str], added: Sequence[str], dropped: Sequence[str] = (), at: Sequence[int] = ()) -> tuple[str, ...]:
    """The manifest a delta describes: ``base`` less ``dropped``, ``added`` placed at ``at``
    (after the kept ids when ``at`` is empty)."""
    gone = set(dropped)
    kept = [a for a in base if a not in gone] if gone else list(base)
    if not at:
        return (*kept, *added)
    out: list[str] = []
    it = iter(kept)
    placed = dict(zip(at, added))
    for i in range(len(kept) + len(added)):
        out.append(placed[i] if i in placed else next(it))
    return tuple(out)


class _Chain:
    __slots__ = ("head", "ids", "length", "carried")

    def __init__(self, head: str, ids: tuple[str, ...], length: int = 0, carried: int = 0):
        #: the latest record, its whole manifest, deltas since the last whole one, the ids they hold
        self.head, self.ids, self.length, self.carried = head, ids, length, carried


class Chains:
    """The bases of one session's next manifests (kept by the recorder, per session and kind).

    :meth:`encode` takes a new record's id and whole manifest (distinct ids) and says how to
    store it: ``(ids, None)`` whole, or ``(added, ContextRef)``. A chain is chosen by the
    manifest's first id (a model turn's system prompt: each agent on a thread has its own),
    falling back to the latest chain. A fresh ``Chains`` (a rebuilt session, a replay's
    scratch session) stores its first manifest whole: a base is always a record this process
    saw written to the same session.
    """

    __slots__ = ("_by_first", "_latest", "full_every")

    def __init__(self, full_every: int | None = None):
        self._by_first: dict[str, _Chain] = {}
        self._latest: _Chain | None = None
        self.full_every = FULL_EVERY if full_every is None else full_every

    def encode(self, record_id: str, manifest: Sequence[str]) -> tuple[tuple[str, ...], ContextRef | None]:
        ids = tuple(manifest)
        key = ids[0] if ids else ""
        chain = self._by_first.get(key) or self._latest
        out: tuple[tuple[str, ...], ContextRef | None] = (ids, None)
        if chain is not None and chain.length + 1 < self.full_every:
            d = diff(chain.ids, ids)
            # deltas that hold as many ids as the manifest save nothing: stored whole, a new chain starts
            size = len(d[0]) + len(d[1]) + len(d[2]) if d is not None else 0
            if d is not None and chain.carried + size < WHOLE_AFTER * max(1, len(ids)):
                added, dropped, at = d
                out = (added, ContextRef(base=chain.head, dropped=dropped, at=at))
        if out[1] is None:
            chain = _Chain(record_id, ids)
            if len(self._by_first) >= MAX_CHAINS and key not in self._by_first:
                self._by_first.pop(next(iter(self._by_first)))
        else:
            chain = _Chain(record_id, ids, chain.length + 1, chain.carried + size)
        self._by_first[key] = chain
        self._latest = chain
        return out


def _own(rec: Any) -> tuple[str, ...]:
    return rec.parents if isinstance(rec, Artifact) else rec.prompt_manifest


def whole(rec: Any, cache: dict[str, tuple[str, ...]], get: Callable[[str], Any]) -> tuple[str, ...]:
    """The whole manifest of ``rec`` (a model turn or a checkpoint), rebuilt from the nearest
    record of its chain stored whole (``get``: a record by id, ``UnknownArtifact`` when it is
    not recorded). ``cache`` keeps the latest rebuilt ones: rebuilding a run of records in
    order costs their deltas."""
    if rec.context is None:
        return _own(rec)
    hit = cache.get(rec.id)
    if hit is not None:
        return hit
    chain = [rec]
    cur = rec
    while True:
        base = cur.context.base
        if base in cache:
            ids = cache[base]
            break
        try:
            cur = get(base)
        except UnknownArtifact as exc:
            raise UnknownArtifact(f"{rec.id!r}'s context manifest is a delta of {base!r}, "
                                  "which is not recorded") from exc
        if cur.context is None:
            ids = _own(cur)
            break
        chain.append(cur)
        if len(chain) > 100_000:  # (a cycle: records are never written so)
            raise UnknownArtifact(f"{rec.id!r}'s context manifest has no base stored whole")
    out = list(ids)
    for r in reversed(chain):  # (an append extends the list: O(its ids); a drop or a placement rebuilds it)
        ref = r.context
        if ref.dropped or ref.at:
            out = list(expand(out, _own(r), ref.dropped, ref.at))
        else:
            out.extend(_own(r))
    ids = tuple(out)
    if len(cache) >= 64:  # (the one asked for: a run read in order finds its base here)
        del cache[next(iter(cache))]
    cache[rec.id] = ids
    return ids


def whole_parents(artifacts: Sequence[Artifact]) -> Mapping[str, tuple[str, ...]]:
    """Each artifact's parents by id, a model turn's whole manifest (for a walk over a list of
    records without a graph: every manifest rebuilt, O(their sizes))."""
    by_id = {a.id: a for a in artifacts}
    cache: dict[str, tuple[str, ...]] = {}

    def get(aid: str) -> Artifact:
        if aid not in by_id:
            raise UnknownArtifact(f"no artifact {aid!r}")
        return by_id[aid]
    out: dict[str, tuple[str, ...]] = {}
    for a in artifacts:
        try:
            out[a.id] = whole(a, cache, get) if a.context is not None else a.parents
        except UnknownArtifact:
            out[a.id] = a.parents  # (what it added is all that is known of it)
    return out
