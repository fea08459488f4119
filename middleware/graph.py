"""The provenance graph of one session and its queries (pure logic).

``locate`` finds where a target first entered (tau), ``taint`` returns the
reachability closure I(z) from that entry, ``independent`` tells whether a
model turn's prompt manifest is disjoint from a closure. Nothing here touches
storage, spans or LangChain: the graph is built from artifact records and a
content accessor, so tests drive it directly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from .errors import InvalidArgument, TargetNotFound, UnknownArtifact
from .records import OBSERVATION_TYPES, Artifact, ArtifactType, Checkpoint, CheckpointKind, Hit

ContentOf = Callable[[str], "str | None"]
#: checkpoints at a turn boundary (where a forget may fork: the agent state is between turns)
TURN_BOUNDARY: tuple[CheckpointKind, ...] = (CheckpointKind.SESSION_START, CheckpointKind.TURN)


def _no_content(_: str) -> None:
    return None


class ProvenanceGraph:
    """Artifacts of one session, indexed for reachability.

    The graph is immutable once built; ``children`` is derived from parents
    once so each ``taint`` is a single breadth-first walk.
    """

    def __init__(
        self,
        artifacts: Iterable[Artifact],
        checkpoints: Iterable[Checkpoint] = (),
        content_of: ContentOf = _no_content,
        hash_of: Callable[[str], str] | None = None,
        session_id: str | None = None,
    ):
        ordered = sorted(artifacts, key=lambda a: a.seq)
        self.session_id = session_id or (ordered[0].session_id if ordered else None)
        self._by_id: dict[str, Artifact] = {a.id: a for a in ordered}
        self._order: list[str] = [a.id for a in ordered]
        # Integer adjacency: taint is a walk over ints and a bytearray, which
        # keeps a 100k-artifact closure within tens of milliseconds.
        self._index: dict[str, int] = {aid: i for i, aid in enumerate(self._order)}
        kids: list[list[int]] = [[] for _ in self._order]
        index = self._index
        for i, a in enumerate(ordered):
            for p in a.parents:
                j = index.get(p)
                if j is not None:
                    kids[j].append(i)
        self._kids = kids
        self.checkpoints: list[Checkpoint] = sorted(checkpoints, key=lambda c: c.seq)
        self._content_of = content_of
        self._hash_of = hash_of or (lambda s: "")

    # -- access -----------------------------------------------------------
    def __len__(self) -> int:
        return len(self._by_id)

    def __contains__(self, artifact_id: object) -> bool:
        return artifact_id in self._by_id

    def __iter__(self):
        return (self._by_id[i] for i in self._order)

    def get(self, artifact_id: str) -> Artifact:
        try:
            return self._by_id[artifact_id]
        except KeyError:
            raise UnknownArtifact(f"no artifact {artifact_id!r} in this graph") from None

    def children(self, artifact_id: str) -> list[str]:
        i = self._index.get(artifact_id)
        return [] if i is None else [self._order[k] for k in self._kids[i]]

    def content(self, artifact_id: str) -> str | None:
        return self._content_of(artifact_id)

    def of_type(self, *types: ArtifactType) -> list[Artifact]:
        wanted = set(types)
        return [a for a in self if a.type in wanted]

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
            text = self._content_of(a.id)
            if text is not None and target in text:
                out.append(a)
        return out

    def locate(self, target: str, source: str | None = None) -> Hit:
        """Where ``target`` first entered the session.

        The entry is the earliest *observation* (user input, memory read, tool
        return) containing it; if only derived artifacts contain it (the model
        produced it), the earliest of those. Raises ``TargetNotFound``.
        """
        found = self.occurrences(target, source)
        if not found:
            raise TargetNotFound(target, self.session_id, source)
        observations = [a for a in found if a.type in OBSERVATION_TYPES]
        entry = (observations or found)[0]
        return Hit(
            target_hash=self._hash_of(target),
            step=entry.step,
            artifact_id=entry.id,
            artifact_type=entry.type,
            source_ids=entry.source_ids,
            occurrences=tuple(a.id for a in found),
        )

    def entry_sources(self, target: str) -> list[str]:
        """Distinct sources through which ``target`` entered independently.

        An observation is a new entry when none of its parents contains the
        target; one whose parent does (a tool echoing arguments that quoted
        it) is derived, not an entry.
        """
        seen: dict[str, None] = {}
        for a in self.occurrences(target):
            if a.type not in OBSERVATION_TYPES:
                continue
            if any(target in (self._content_of(p) or "") for p in a.parents):
                continue
            seen[a.source_ids[0] if a.source_ids else a.id] = None
        return list(seen)

    def taint(self, hit: Hit | str | Sequence[str]) -> frozenset[str]:
        """I(z): ids of every artifact reachable from the entry (entry included)."""
        if isinstance(hit, Hit):
            roots = [hit.artifact_id]
        elif isinstance(hit, str):
            roots = [hit]
        else:
            roots = list(hit)
        index = self._index
        start = []
        for r in roots:
            i = index.get(r)
            if i is None:
                raise UnknownArtifact(f"no artifact {r!r} in this graph")
            start.append(i)
        seen = bytearray(len(self._order))
        for i in start:
            seen[i] = 1
        stack = list(start)
        kids = self._kids
        while stack:
            for c in kids[stack.pop()]:
                if not seen[c]:
                    seen[c] = 1
                    stack.append(c)
        order = self._order
        first = min(start) if start else 0  # descendants always come later in seq order
        return frozenset([order[i] for i in range(first, len(order)) if seen[i]])

    def manifest(self, model_turn_id: str) -> tuple[str, ...]:
        """The prompt manifest of a model turn: the artifacts its prompt was built from."""
        a = self.get(model_turn_id)
        if a.type is not ArtifactType.MODEL_TURN:
            raise InvalidArgument(f"{model_turn_id!r} is a {a.type.value}, not a model_turn")
        return a.parents

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
