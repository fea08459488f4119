"""Per-session recording state (counters, known artifacts, live messages).

One ``SessionState`` per LangGraph thread, each guarded by its own lock: runs
on different threads never share mutable state, and parallel tool calls of
one run serialise only their (short) bookkeeping. A state is rebuilt from the
store when a process records more turns of a session it did not start.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from opentelemetry.trace import Span, SpanContext, TraceFlags

from .context_delta import Chains
from .records import Artifact, ArtifactType
from .tokens import TokenCounter

if TYPE_CHECKING:
    from .messages import MessageIds

#: Artifact types that stand for a message in the agent's ``messages`` state.
MESSAGE_TYPES = frozenset(
    {ArtifactType.USER_INPUT, ArtifactType.MODEL_TURN, ArtifactType.TOOL_RETURN, ArtifactType.SUMMARY,
     ArtifactType.NESTED_INPUT}
)


@dataclass
class SessionState:
    session_id: str
    counter: TokenCounter
    lock: threading.RLock = field(default_factory=threading.RLock)
    seq: int = 0
    step: int = 0
    turn: int = 0
    offset: int = 0
    #: artifact id -> span context of the span that recorded it (for links; read it with
    #: ``context_of``: a rebuilt record holds its (trace id, span id) until a link needs it)
    known: dict[str, SpanContext | None] = field(default_factory=dict)
    #: artifact id -> type, for the known ids
    types: dict[str, ArtifactType] = field(default_factory=dict)
    #: artifact id -> content hash, for the known ids
    hashes: dict[str, str] = field(default_factory=dict)
    #: message artifacts currently in the agent's state (not compacted away)
    live: dict[str, None] = field(default_factory=dict)
    #: the known ids whose type is one of MESSAGE_TYPES
    message_artifacts: set[str] = field(default_factory=set)
    #: memory source key -> latest memory_write artifact id in this session
    last_write: dict[str, str] = field(default_factory=dict)
    #: state slot (a key, or ``key/entry`` of a dict-merged key: ``files//notes.txt``) -> (its
    #: latest state_write artifact id, the significant pieces of its value, their anchors)
    #: (``state_flow``)
    state_writes: dict[str, tuple[str, tuple[str, ...], frozenset[str] | None]] = field(default_factory=dict)
    #: (artifact id, key) of a rebuilt state's state writes, in order, values not read back yet
    state_writes_unloaded: list[tuple[str, str | None]] = field(default_factory=list)
    #: tool call artifact id -> step reserved for its return
    return_steps: dict[str, int] = field(default_factory=dict)
    #: the previous model call's prompt manifest (links are added for what is new), and its set
    last_manifest: list[str] = field(default_factory=list)
    last_manifest_set: set[str] = field(default_factory=set)
    last_manifest_distinct: bool = True
    #: the bases the next model turn's and checkpoint's manifests are stored against (a fresh
    #: state, rebuilt or a replay's, stores its first ones whole: ``context_delta``)
    turn_contexts: Chains = field(default_factory=Chains)
    checkpoint_contexts: Chains = field(default_factory=Chains)
    #: checkpoint id -> the span that holds it, the latest few (a delta's span links to its base's)
    checkpoint_spans: dict[str, SpanContext] = field(default_factory=dict)
    root: Span | None = None
    #: the provider the session's model calls named (``gen_ai.provider.name``): the next run's
    #: ``invoke_agent`` span has it from its start; the first run's gets it at its first model call
    provider: str | None = None
    #: the graph run now recording here has its end watched (``run_end``): set when a run's
    #: first hook registers it, cleared when the run ends
    watched: bool = False
    #: queued tasks that put a record-only artifact or checkpoint onto the next operation span
    #: opened in this run (``deferred``): the turn's checkpoint and input go onto its first chat span
    pending_events: list = field(default_factory=list)
    cache_handle: str | None = None
    cache_offset: int | None = None
    started: bool = False
    #: the outer graph's run the latest nested run of this thread belonged to (the id of the
    #: checkpoint its input wrote): a nested run of the same outer run is part of its turn
    outer_run: str | None = None
    #: tool call artifact id -> the last model turn of a run nested in that call (its result)
    nested_results: dict[str, str] = field(default_factory=dict)
    #: the session attributes of this thread's spans (computed once, in the thread's first run)
    span_attrs: dict | None = None
    _message_ids: Any = field(default=None, repr=False)

    @property
    def message_ids(self) -> "MessageIds":
        """The session's message -> artifact id map (made on first use: it needs LangChain)."""
        if self._message_ids is None:
            from .messages import MessageIds

            self._message_ids = MessageIds(self.session_id)
        return self._message_ids

    def next_seq(self) -> int:
        self.seq += 1
        return self.seq

    def next_step(self) -> int:
        self.step += 1
        return self.step

    def advance(self, n_tokens: int) -> tuple[int, int]:
        start = self.offset
        self.offset += n_tokens
        return (start, self.offset)

    def new_in(self, manifest: list[str]) -> list[str]:
        """The ids of ``manifest`` not in the previous call's (O(new) when it extends that one)."""
        prev, seen = self.last_manifest, self.last_manifest_set
        n0 = len(prev)
        tail = manifest[n0:] if n0 and len(manifest) >= n0 and manifest[:n0] == prev else manifest
        return [a for a in tail if a not in seen]

    def set_manifest(self, manifest: list[str]) -> bool:
        """``manifest`` is the model call's (kept for the next call's :meth:`new_in`); whether
        its ids are distinct (known without a pass over it when it extends the previous one)."""
        prev, seen = self.last_manifest, self.last_manifest_set
        n0 = len(prev)
        if n0 and len(manifest) >= n0 and manifest[:n0] == prev:
            before = len(seen)
            seen.update(manifest[n0:])
            distinct = self.last_manifest_distinct and len(seen) == before + len(manifest) - n0
        else:
            self.last_manifest_set = set(manifest)
            distinct = len(self.last_manifest_set) == len(manifest)
        self.last_manifest, self.last_manifest_distinct = manifest, distinct
        return distinct

    def context_of(self, aid: str) -> SpanContext | None:
        """The span context of the span that recorded ``aid`` (None: unknown, or no span yet)."""
        ctx = self.known.get(aid)
        if type(ctx) is tuple:  # (trace id, span id) of a rebuilt record, in hex
            ctx = self.known[aid] = SpanContext(int(ctx[0], 16), int(ctx[1], 16), is_remote=True,
                                                trace_flags=TraceFlags(TraceFlags.SAMPLED))
        return ctx

    def remember(self, a: Artifact, ctx: SpanContext | tuple[str, str] | None) -> None:
        self.known[a.id] = ctx
        self.types[a.id] = a.type
        self.hashes[a.id] = a.content_hash
        if a.type in MESSAGE_TYPES:
            self.message_artifacts.add(a.id)
            self.live[a.id] = None
        else:
            self.message_artifacts.discard(a.id)

    @classmethod
    def rebuild(cls, session_id: str, counter: TokenCounter, artifacts: list[Artifact], checkpoints) -> "SessionState":
        st = cls(session_id=session_id, counter=counter)
        replaced: set[str] = set()
        for a in artifacts:
            # the span context of a recorded artifact is made when a link first needs it
            # (``context_of``): a long session rebuilds thousands, and most are never linked again
            st.remember(a, (a.trace_id, a.span_id) if a.trace_id and a.span_id else None)
            st.seq = max(st.seq, a.seq)
            st.step = max(st.step, a.step)
            st.turn = max(st.turn, a.turn)
            st.offset = max(st.offset, a.token_span[1])
            if a.type is ArtifactType.SUMMARY:
                replaced.update(a.parents)
            if a.type is ArtifactType.MEMORY_WRITE and a.source_ids:
                st.last_write[a.source_ids[0]] = a.id
            if a.type is ArtifactType.STATE_WRITE:  # (its value is read from the vault when needed)
                st.state_writes_unloaded.append((a.id, a.attrs.get("key")))
            if a.type is ArtifactType.TOOL_CALL and "return_step" in a.attrs:
                st.step = max(st.step, int(a.attrs["return_step"]))
        for c in checkpoints:
            st.seq = max(st.seq, c.seq)
            st.turn = max(st.turn, c.turn)
            st.started = True
        for r in replaced:
            st.live.pop(r, None)
        st.started = st.started or bool(artifacts)
        return st
