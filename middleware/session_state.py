"""Per-session recording state (counters, known artifacts, live messages).

One ``SessionState`` per LangGraph thread, each guarded by its own lock: runs
on different threads never share mutable state, and parallel tool calls of
one run serialise only their (short) bookkeeping. A state is rebuilt from the
store when a process records more turns of a session it did not start.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from opentelemetry.trace import Span, SpanContext, TraceFlags

from .records import Artifact, ArtifactType
from .tokens import TokenCounter

#: Artifact types that stand for a message in the agent's ``messages`` state.
MESSAGE_TYPES = frozenset(
    {ArtifactType.USER_INPUT, ArtifactType.MODEL_TURN, ArtifactType.TOOL_RETURN, ArtifactType.SUMMARY}
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
    #: artifact id -> span context of the span that recorded it (for links)
    known: dict[str, SpanContext | None] = field(default_factory=dict)
    #: artifact id -> type, for the known ids
    types: dict[str, ArtifactType] = field(default_factory=dict)
    #: artifact id -> content hash, for the known ids
    hashes: dict[str, str] = field(default_factory=dict)
    #: message artifacts currently in the agent's state (not compacted away)
    live: dict[str, None] = field(default_factory=dict)
    #: memory source key -> latest memory_write artifact id in this session
    last_write: dict[str, str] = field(default_factory=dict)
    #: tool call artifact id -> step reserved for its return
    return_steps: dict[str, int] = field(default_factory=dict)
    #: the previous model call's prompt manifest (links are added for what is new)
    last_manifest: frozenset[str] = frozenset()
    root: Span | None = None
    cache_handle: str | None = None
    cache_offset: int | None = None
    started: bool = False
    #: the session attributes of this thread's spans (computed once, in the thread's first run)
    span_attrs: dict | None = None

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

    def remember(self, a: Artifact, ctx: SpanContext | None) -> None:
        self.known[a.id] = ctx
        self.types[a.id] = a.type
        self.hashes[a.id] = a.content_hash
        if a.type in MESSAGE_TYPES:
            self.live[a.id] = None

    @classmethod
    def rebuild(cls, session_id: str, counter: TokenCounter, artifacts: list[Artifact], checkpoints) -> "SessionState":
        st = cls(session_id=session_id, counter=counter)
        replaced: set[str] = set()
        for a in artifacts:
            ctx = None
            if a.trace_id and a.span_id:
                ctx = SpanContext(
                    int(a.trace_id, 16), int(a.span_id, 16), is_remote=True,
                    trace_flags=TraceFlags(TraceFlags.SAMPLED),
                )
            st.remember(a, ctx)
            st.seq = max(st.seq, a.seq)
            st.step = max(st.step, a.step)
            st.turn = max(st.turn, a.turn)
            st.offset = max(st.offset, a.token_span[1])
            if a.type is ArtifactType.SUMMARY:
                replaced.update(a.parents)
            if a.type is ArtifactType.MEMORY_WRITE and a.source_ids:
                st.last_write[a.source_ids[0]] = a.id
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
