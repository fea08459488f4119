"""The provenance graph of one session and its queries (pure logic).

``locate`` finds where a target first entered (tau), ``taint`` returns the
reachability closure I(z) from that entry, ``independent`` tells whether a
model turn's prompt manifest is disjoint from a closure. Nothing here touches
storage, spans or LangChain: the graph is built from artifact records and a
content accessor, so tests drive it directly.

A graph can be *extended* with artifacts recorded after its own
(:meth:`ProvenanceGraph.extended`): the new graph shares the old one's
structure, which only ever grows at its end, and the old graph keeps seeing
exactly what it saw (each graph reads only the first ``len(graph)`` entries).
That is what lets a session's graph be kept up to date as a session grows
(``graph_cache``) without rebuilding it from the store at every read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import islice

from .context_delta import whole
from .errors import InvalidArgument, TargetNotFound, UnknownArtifact
from .records import OBSERVATION_TYPES, Artifact, ArtifactType, Checkpoint, CheckpointKind, Hit
from .run_inputs import without_refs

ContentOf = Callable[[str], "str | None"]
#: checkpoints at a turn boundary (where a forget may fork: the agent state is between turns)
TURN_BOUNDARY: tuple[CheckpointKind, ...] = (CheckpointKind.SESSION_START, CheckpointKind.TURN)


def _no_content(_: str) -> None:
    return None


class Lineage:
    """The structure a graph and the graphs extended from it share (append-only).

    Positions are recording order. Nothing already in it changes, with one
    exception kept versioned: a *replaced* record (the same artifact, e.g. a
    tool call marked committed once its tool ran) is stored with the version
    that replaced it, so a graph made before still reads the old record. A
    graph is the lineage's *head* when it sees all of it; only the head is
    extended in place (extending an older graph copies). Opaque to callers:
    they compare lineages by identity (same lineage, same positions).
    """

    __slots__ = ("by_id", "order", "index", "kids", "waiting", "replaced", "version", "contents", "dups",
                 "turns", "deltas", "loose", "manifests", "__weakref__")

    def __init__(self, ordered: list[Artifact], contents: dict[str, str] | None):
        self.by_id: dict[str, Artifact] = {a.id: a for a in ordered}
        self.order: list[str] = [a.id for a in ordered]
        # Integer adjacency: taint is a walk over ints and a bytearray, which
        # keeps a 100k-artifact closure within tens of milliseconds.
        self.index: dict[str, int] = {aid: i for i, aid in enumerate(self.order)}
        self.kids: list[list[int]] = [[] for _ in self.order]
        #: parent id not (yet) in the graph -> positions of the artifacts naming it
        self.waiting: dict[str, list[int]] = {}
        #: artifact id -> [(version that replaced it, the record before)]
        self.replaced: dict[str, list[tuple[int, Artifact]]] = {}
        self.version = 0
        #: the content dict extensions add to (None: the graph reads a caller's accessor)
        self.contents = contents
        #: repeated ids among the records it was built from (counted once, as ever)
        self.dups = len(self.order) - len(self.by_id)
        #: model turn position -> (its base's position or -1 when stored whole, the positions of
        #: the ids it added, of the base's ids it dropped): what taint counts (``_taint_counting``)
        self.turns: dict[int, tuple[int, tuple[int, ...], tuple[int, ...]]] = {}
        #: model turns stored as deltas, and whether one names an id not recorded before it
        #: (``loose``: taint then takes the walk over whole manifests, ``_taint_reference``)
        self.deltas = 0
        self.loose = False
        #: model turn id -> its whole manifest, the latest few rebuilt (``ProvenanceGraph.manifest``)
        self.manifests: dict[str, tuple[str, ...]] = {}
        self._link(ordered, 0)

    def _link(self, new: list[Artifact], first: int) -> None:
        index, kids, waiting = self.index, self.kids, self.waiting
        # a parent recorded after its child gets the edge a full build would give it, children in order
        for i, a in enumerate(new, first):
            early = waiting.pop(a.id, None)
            if early:
                kids[i].extend(early)
        for i, a in enumerate(new, first):
            for p in a.parents:
                j = index.get(p)
                if j is None:
                    waiting.setdefault(p, []).append(i)
                else:
                    kids[j].append(i)
            if a.type is ArtifactType.MODEL_TURN:
                self._turn(i, a)

    def _turn(self, i: int, a: Artifact) -> None:
        """What taint needs of a model turn's manifest, by position (O(its delta))."""
        index = self.index
        added = tuple(index.get(p, -1) for p in a.parents)
        ref = a.context
        if ref is None:
            base, dropped = -1, ()
        else:
            self.deltas += 1
            base = index.get(ref.base, -1)
            dropped = tuple(index.get(p, -1) for p in ref.dropped)
            if base < 0 or base >= i or base in dropped:
                self.loose = True
        if -1 in added or -1 in dropped or any(j >= i for j in added):
            self.loose = True  # (an id recorded after the turn, or never: the walk over whole lists)
        self.turns[i] = (base, added, dropped)

    def append(self, new: list[Artifact]) -> None:
        first = len(self.order)
        for a in new:
            self.by_id[a.id] = a
            self.index[a.id] = len(self.order)
            self.order.append(a.id)
            self.kids.append([])
        self._link(new, first)


class ProvenanceGraph:
    """Artifacts of one session, indexed for reachability.

    The graph is immutable once built; ``children`` is derived from parents
    once so each ``taint`` is a single breadth-first walk. :meth:`extended`
    returns a new graph with later artifacts added and leaves this one as it is.
    """

    def __init__(
        self,
        artifacts: Iterable[Artifact],
        checkpoints: Iterable[Checkpoint] = (),
        content_of: ContentOf = _no_content,
        hash_of: Callable[[str], str] | None = None,
        session_id: str | None = None,
    ):
        self._setup(Lineage(sorted(artifacts, key=lambda a: a.seq), None),
                    sorted(checkpoints, key=lambda c: c.seq), content_of, hash_of or (lambda s: ""), session_id)

    @classmethod
    def from_records(cls, artifacts: Iterable[Artifact], checkpoints: Iterable[Checkpoint] = (),
                     contents: dict[str, str] | None = None, hash_of: Callable[[str], str] | None = None,
                     session_id: str | None = None) -> ProvenanceGraph:
        """A graph whose content is the dict ``contents``, which the graph then owns: extensions
        add the new artifacts' content to it (no copy), so the caller must not change it."""
        contents = {} if contents is None else contents
        g = cls.__new__(cls)
        g._setup(Lineage(sorted(artifacts, key=lambda a: a.seq), contents),
                 sorted(checkpoints, key=lambda c: c.seq), contents.get, hash_of or (lambda s: ""), session_id)
        return g

    def _setup(self, lineage: Lineage, checkpoints: list[Checkpoint], content_of: ContentOf,
               hash_of: Callable[[str], str], session_id: str | None) -> None:
        self._lin = lineage
        self._n = len(lineage.order)
        self._version = lineage.version
        first = lineage.by_id[lineage.order[0]] if lineage.order else None
        self.session_id = session_id or (first.session_id if first is not None else None)
        self.checkpoints: list[Checkpoint] = checkpoints
        self._content_of = content_of
        self._hash_of = hash_of

    # -- access -----------------------------------------------------------
    def _record(self, aid: str) -> Artifact:
        lin = self._lin
        a = lin.by_id[aid]
        if self._version != lin.version:  # a record replaced after this graph was made reads as it was
            hist = lin.replaced.get(aid)
            if hist is not None and hist[-1][0] > self._version:
                return next(old for v, old in hist if v > self._version)
        return a

    def __len__(self) -> int:
        return self._n - self._lin.dups

    def __contains__(self, artifact_id: object) -> bool:
        i = self._lin.index.get(artifact_id)  # type: ignore[arg-type]
        return i is not None and i < self._n

    def __iter__(self):
        lin = self._lin
        if self._version == lin.version:  # (a record replaced while this runs may read as replaced)
            return map(lin.by_id.__getitem__, islice(lin.order, self._n))
        return map(self._record, islice(lin.order, self._n))

    def get(self, artifact_id: str) -> Artifact:
        if artifact_id not in self:
            raise UnknownArtifact(f"no artifact {artifact_id!r} in this graph")
        return self._record(artifact_id)

    def position(self, artifact_id: str) -> int | None:
        """Where an artifact is in recording order (0-based), None when it is not in the graph."""
        i = self._lin.index.get(artifact_id)
        return i if i is not None and i < self._n else None

    def since_seq(self, seq: int) -> list[Artifact]:
        """The artifacts recorded at ``seq`` or later, in recording order: what a forget that forks
        at ``seq`` replays. A binary search over the recording order (sorted by seq), so the cost
        is the suffix's, not the session's; a walk of every artifact only where repeated ids
        among the records make that order not one of distinct seqs."""
        if self._lin.dups:
            return [a for a in self if a.seq >= seq]
        order, record = self._lin.order, self._record
        lo, hi = 0, self._n
        while lo < hi:
            mid = (lo + hi) // 2
            if record(order[mid]).seq < seq:
                lo = mid + 1
            else:
                hi = mid
        return self.tail(lo)

    def tail(self, start: int) -> list[Artifact]:
        """The artifacts from position ``start`` on, in recording order (what an extension added)."""
        return list(map(self._record, self._lin.order[max(0, start):self._n]))  # (a slice: no walk to start)

    @property
    def lineage(self) -> Lineage:
        """What this graph shares with the graphs extended from it (or it from): same lineage,
        same positions. A rebuilt graph has a new one."""
        return self._lin

    def children(self, artifact_id: str) -> list[str]:
        i = self.position(artifact_id)
        if i is None:
            return []
        n, order = self._n, self._lin.order
        return [order[k] for k in self._lin.kids[i] if k < n]

    def content(self, artifact_id: str) -> str | None:
        return self._content_of(artifact_id)

    def of_type(self, *types: ArtifactType) -> list[Artifact]:
        wanted = set(types)
        return [a for a in self if a.type in wanted]

    # -- growing ----------------------------------------------------------
    def extended(self, artifacts: Iterable[Artifact] = (), checkpoints: Iterable[Checkpoint] = (),
                 contents: Mapping[str, str] | None = None, replaced: Iterable[Artifact] = ()) -> ProvenanceGraph:
        """This graph with ``artifacts`` (recorded after every artifact of it), ``checkpoints``
        and the ``contents`` of new artifacts added; ``replaced``: new records of artifacts it
        holds that differ only in ``committed`` (a tool call whose tool has run since).

        ``self`` never changes. When it is the newest graph of its lineage the new graph
        shares its structure (cost: the new records); otherwise the structure is copied.
        Raises ``InvalidArgument`` for an artifact already in the graph, one recorded before
        its last artifact, a replacement that changes more than ``committed``, or a content
        that differs from the one the graph holds: rebuild the graph instead. Extending one
        graph from two threads at once is the caller's to prevent (``GraphCache`` holds a lock).
        """
        new = sorted(artifacts, key=lambda a: a.seq)
        fresh = list(replaced)
        lin = self._lin
        last = self._record(lin.order[self._n - 1]).seq if self._n else None
        seen: set[str] = set()
        for a in new:
            if a.id in self or a.id in seen:
                raise InvalidArgument(f"artifact {a.id!r} is in the graph already")
            if last is not None and a.seq <= last:
                raise InvalidArgument(f"artifact {a.id!r} (seq {a.seq}) was recorded before the graph's last one")
            seen.add(a.id)
        for a in fresh:
            if a.id not in self:
                raise InvalidArgument(f"no artifact {a.id!r} in this graph to replace")
            # (only the flag that changes after recording: what is derived from a record, its
            # place, labels, identifiers, stays true for every graph of the lineage)
            if self._record(a.id).model_copy(update={"committed": a.committed}) != a:
                raise InvalidArgument(f"replacing {a.id!r} would change more than whether it is committed")
        new_contents = dict(contents or {})
        owned = lin.contents
        if owned is not None and any(owned.get(k, v) != v for k, v in new_contents.items()):
            raise InvalidArgument("the content of an artifact in the graph changed")
        ckpts = sorted([*self.checkpoints, *checkpoints], key=lambda c: c.seq)
        if self._n != len(lin.order) or self._version != lin.version or owned is None:
            return self._copied(new, ckpts, new_contents, fresh)
        owned.update(new_contents)  # new keys only (checked above): older graphs read the same values
        if fresh:
            lin.version += 1
            for a in fresh:
                lin.replaced.setdefault(a.id, []).append((lin.version, lin.by_id[a.id]))
                lin.by_id[a.id] = a
        if new:
            lin.append(new)
        g = ProvenanceGraph.__new__(ProvenanceGraph)
        g._setup(lin, ckpts, owned.get, self._hash_of, self.session_id)
        return g

    def _copied(self, new: list[Artifact], ckpts: list[Checkpoint], contents: dict[str, str],
                fresh: list[Artifact]) -> ProvenanceGraph:
        by_id = {a.id: a for a in fresh}
        arts = [by_id.get(a.id, a) for a in self] + new
        if self._lin.contents is not None:
            merged = {**self._lin.contents, **contents}
            return ProvenanceGraph.from_records(arts, ckpts, merged, self._hash_of, self.session_id)
        old = self._content_of
        return ProvenanceGraph(arts, ckpts, content_of=lambda i: contents[i] if i in contents else old(i),
                               hash_of=self._hash_of, session_id=self.session_id)

    # -- queries ----------------------------------------------------------
    def occurrences(self, target: str, source: str | None = None) -> list[Artifact]:
        """Artifacts whose content contains ``target``, in recording order.

        ``source`` restricts to one artifact id or one source key (an entry of
        ``source_ids``, e.g. ``tool:lookup_ticket`` or ``memory:users/42``).
        """
        if not isinstance(target, str) or not target.strip():
            raise InvalidArgument("target must be a non-empty string")
        out = []
        for a in self:
            if source is not None and a.id != source and source not in a.source_ids:
                continue
            if target in self._said(a):
                out.append(a)
        return out

    def _said(self, a: Artifact) -> str:
        """What ``a`` holds that a target can be in: its content, a run input's less its references
        to recorded messages (names: a short target can be a part of one, without being said)."""
        text = self._content_of(a.id) or ""
        return without_refs(text) if a.type is ArtifactType.RUN_INPUT else text

    def locate(self, target: str, source: str | None = None) -> Hit:
        """Where ``target`` first entered the session.

        The entry is the earliest *observation* (user input, memory read, tool
        return) containing it, or state write that brought it in
        (:meth:`brings_in`); if only derived artifacts contain it (the model
        produced it), the earliest of those. Raises ``TargetNotFound``.
        """
        found = self.occurrences(target, source)
        if not found:
            raise TargetNotFound(target, self.session_id, source)
        observations = [a for a in found if self.brings_in(a, target)]
        entry = (observations or found)[0]
        return Hit(
            target_hash=self._hash_of(target),
            step=entry.step,
            artifact_id=entry.id,
            artifact_type=entry.type,
            source_ids=entry.source_ids,
            occurrences=tuple(a.id for a in found),
        )

    def brings_in(self, artifact: Artifact, target: str) -> bool:
        """Whether ``target`` may have entered the session through ``artifact`` (which holds it):
        an observation, or a ``state_write`` none of whose parents holds it (the tool put into
        state what it fetched itself, not what the model gave it: that write is where the value
        came in; a later read of it is derived from it)."""
        if artifact.type in OBSERVATION_TYPES:
            return True
        return artifact.type is ArtifactType.STATE_WRITE and not self._parent_holds(artifact, target)

    def _parent_holds(self, artifact: Artifact, target: str) -> bool:
        return any(target in (self._content_of(p) or "") for p in artifact.parents)

    def entry_sources(self, target: str) -> list[str]:
        """Distinct sources through which ``target`` entered independently.

        An observation is a new entry when none of its parents contains the
        target; one whose parent does (a tool echoing arguments that quoted
        it, a ``read_file`` of a file a tool wrote: its parent is the state
        write) is derived, not an entry. A state write that brought the target
        in (:meth:`brings_in`) is an entry too.
        """
        seen: dict[str, None] = {}
        for a in self.occurrences(target):
            if a.type not in OBSERVATION_TYPES and a.type is not ArtifactType.STATE_WRITE:
                continue
            if self._parent_holds(a, target):
                continue
            seen[a.source_ids[0] if a.source_ids else a.id] = None
        return list(seen)

    def taint(self, hit: Hit | str | Sequence[str]) -> frozenset[str]:
        """I(z): ids of every artifact reachable from the entry (entry included).

        A model turn is reached when any id of its whole manifest is, however its manifest
        is stored: a session of whole manifests is walked edge by edge; one with deltas is
        counted in recording order (``_taint_counting``: O(artifacts after the entry + their
        deltas)), or, when a delta names an id recorded after it, walked over whole
        manifests (``_taint_reference``). All three give the same closure."""
        if isinstance(hit, Hit):
            roots = [hit.artifact_id]
        elif isinstance(hit, str):
            roots = [hit]
        else:
            roots = list(hit)
        start = self._positions(roots)
        if self._lin.deltas:
            return self._taint_reference(start) if self._lin.loose else self._taint_counting(start)
        return self._walk(start)

    def _positions(self, roots: Iterable[str]) -> list[int]:
        index, n = self._lin.index, self._n
        start = []
        for r in roots:
            i = index.get(r)
            if i is None or i >= n:
                raise UnknownArtifact(f"no artifact {r!r} in this graph")
            start.append(i)
        return start

    def _walk(self, start: list[int]) -> frozenset[str]:
        """The closure by the edges alone (every manifest stored whole: a turn's parents are all of it)."""
        n = self._n
        seen = bytearray(n)
        for i in start:
            seen[i] = 1
        stack = list(start)
        kids = self._lin.kids
        while stack:
            for c in kids[stack.pop()]:
                if c < n and not seen[c]:  # (positions past n belong to graphs extended from this one)
                    seen[c] = 1
                    stack.append(c)
        order = self._lin.order
        first = min(start) if start else 0  # descendants always come later in seq order
        return frozenset([order[i] for i in range(first, n) if seen[i]])

    def _taint_counting(self, start: list[int]) -> frozenset[str]:
        """The closure in one pass in recording order, a model turn's manifest counted: how many
        of its ids are reached is its base's count, plus its added ones reached, less its
        dropped ones reached (every id and base of a turn is recorded before it: ``Lineage.loose``
        says when not). An edge to an earlier artifact (a parent recorded after its child) starts
        the pass again from there, with what it reached kept: reaching only grows."""
        n, lin = self._n, self._lin
        kids, turns, order = lin.kids, lin.turns, lin.order
        seen = bytearray(n)
        for i in start:
            seen[i] = 1
        first = min(start) if start else n
        while first < n:
            count: dict[int, int] = {}
            again = n
            for i in range(first, n):
                t = turns.get(i)
                if t is not None:
                    base, added, dropped = t
                    c = count.get(base, 0)  # (a base before the pass's start holds nothing reached)
                    for j in added:
                        c += seen[j]
                    for j in dropped:
                        c -= seen[j]
                    count[i] = c
                    if c > 0:
                        seen[i] = 1
                if seen[i]:
                    for k in kids[i]:
                        if k < n and not seen[k]:
                            seen[k] = 1
                            if k < i:
                                again = min(again, k)
            first = again
        low = min(start) if start else n  # (as the walk: descendants come later in recording order)
        return frozenset([order[i] for i in range(low, n) if seen[i]])

    def _taint_reference(self, start: list[int]) -> frozenset[str]:
        """The closure walked over whole manifests (rebuilt: O(their sizes)); what the other
        two ways must give. A manifest that cannot be rebuilt (its base was never recorded)
        is taken as reaching whatever was reached before it."""
        n, order = self._n, self._lin.order
        parents: list[tuple[int, ...] | None] = []
        index = self._lin.index
        for i in range(n):
            a = self._record(order[i])
            if a.type is ArtifactType.MODEL_TURN and a.context is not None:
                try:
                    ids: tuple[str, ...] | None = self.manifest(a.id)
                except UnknownArtifact:
                    ids = None
            else:
                ids = a.parents
            parents.append(None if ids is None else tuple(j for j in map(index.get, ids) if j is not None and j < n))
        seen = bytearray(n)
        for i in start:
            seen[i] = 1
        changed = True
        while changed:  # (a parent recorded after its child takes another pass)
            changed = False
            reached = False
            for i in range(n):
                reached = reached or bool(seen[i])
                if seen[i]:
                    continue
                ps = parents[i]
                if (reached if ps is None else any(seen[j] for j in ps)):
                    seen[i] = 1
                    changed = reached = True
        low = min(start) if start else n
        return frozenset([order[i] for i in range(low, n) if seen[i]])

    def manifest(self, model_turn_id: str) -> tuple[str, ...]:
        """The prompt manifest of a model turn: the artifacts its prompt was built from, rebuilt
        from the nearest one stored whole (at most ``context_delta.FULL_EVERY`` deltas back;
        the latest few are kept, so rebuilding a run of turns in order costs their deltas)."""
        a = self.get(model_turn_id)
        if a.type is not ArtifactType.MODEL_TURN:
            raise InvalidArgument(f"{model_turn_id!r} is a {a.type.value}, not a model_turn")
        return whole(a, self._lin.manifests, self.get)

    def checkpoint_manifest(self, checkpoint: Checkpoint) -> tuple[str, ...]:
        """A checkpoint's prompt manifest (the messages the agent's state held), rebuilt like a
        model turn's from the session's earlier checkpoints."""
        if checkpoint.context is None:
            return checkpoint.prompt_manifest
        by_id = {c.id: c for c in self.checkpoints}

        def get(cid: str) -> Checkpoint:
            c = by_id.get(cid)
            if c is None:
                raise UnknownArtifact(f"checkpoint {checkpoint.id!r}'s manifest is a delta of {cid!r}, "
                                      "which is not recorded")
            return c
        return whole(checkpoint, {}, get)

    def inputs(self, artifact_id: str) -> tuple[str, ...]:
        """What an artifact was derived from: its parents, a model turn's whole manifest."""
        a = self.get(artifact_id)
        return self.manifest(artifact_id) if a.context is not None and a.type is ArtifactType.MODEL_TURN else a.parents

    def independent(self, model_turn_id: str, closure: frozenset[str]) -> bool:
        """A model turn is independent of z when its prompt manifest is disjoint from I(z)."""
        return model_turn_id not in closure and not (set(self.manifest(model_turn_id)) & closure)

    def checkpoint_before(self, step: int, kinds: Iterable[CheckpointKind] | None = None) -> Checkpoint | None:
        """The latest checkpoint at or before ``step``, of one of ``kinds`` if given (None if there is none)."""
        wanted = None if kinds is None else frozenset(kinds)
        best = None
        for c in self.checkpoints:
            if c.step <= step and (wanted is None or c.kind in wanted):
                best = c
        return best

    def fork_checkpoint(self, tau: int) -> Checkpoint | None:
        """Where a forget forks: the latest turn-boundary checkpoint at or before ``tau``.

        Between it and tau there are only model turns and tool calls of the
        same turn, re-materialised from the record (prefill only).
        """
        return self.checkpoint_before(tau, TURN_BOUNDARY)

