"""Frozen records of the provenance layer: artifacts, checkpoints, sessions.

These are the units the span processor writes to the store and the graph
queries read. They never carry payload text: content lives in the vault.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class ArtifactType(str, Enum):
    USER_INPUT = "user_input"
    MEMORY_READ = "memory_read"
    TOOL_RETURN = "tool_return"
    PROMPT_BLOCK = "prompt_block"
    MODEL_TURN = "model_turn"
    REPLY = "reply"
    PLAN = "plan"
    TOOL_CALL = "tool_call"
    SUMMARY = "summary"
    MEMORY_WRITE = "memory_write"
    #: what a graph run was given, as LangGraph got it (a state update's keys, a Command with a
    #: human's decision): its messages are references to their own artifacts (``run_inputs``)
    RUN_INPUT = "run_input"
    #: a value a tool wrote into a state key other than ``messages`` (a ``Command(update=...)``,
    #: or a channel write during the call: deepagents' files); its parent is the tool call
    STATE_WRITE = "state_write"
    #: a message a graph handed to an agent it runs nested in it on the same thread (a subagent a
    #: tool invokes: the tool call's question): data derived from its outer producer, never a
    #: user turn of the session
    NESTED_INPUT = "nested_input"
    #: a reconciliation's compensation of a call the world the forget replaced fired (its parent:
    #: that call); kept with the forget's record, never in a session's live graph
    COMPENSATION = "compensation"


#: Artifacts that bring data from outside the agent (the observation stream o_t).
OBSERVATION_TYPES = frozenset(
    {ArtifactType.USER_INPUT, ArtifactType.MEMORY_READ, ArtifactType.TOOL_RETURN}
)


class ContextRef(BaseModel):
    """How a context manifest is stored when it is not stored whole: what it changed in the
    manifest of an earlier record (its *base*: a model turn's is an earlier model turn, a
    checkpoint's an earlier checkpoint of the session). The ids it added are the record's own
    list (a model turn's ``parents``, a checkpoint's ``prompt_manifest``); ``dropped`` are the
    base's ids it no longer holds; ``at`` the positions of the added ids in the whole manifest
    (empty: they come after the base's kept ids). ``context_delta.expand`` rebuilds it."""

    model_config = ConfigDict(frozen=True)

    base: str
    dropped: tuple[str, ...] = ()
    at: tuple[int, ...] = ()


class Artifact(BaseModel):
    """One node of the provenance graph.

    ``token_span`` is ``(start, end)`` in the session's token stream (end
    exclusive), counted with the model's tokenizer where known, else tiktoken.
    ``seq`` is the total recording order inside the session; ``step`` is the
    index of the observation the artifact belongs to (observations open a new
    step, derived artifacts take the step of the transition producing them).

    A model turn's parents are its context manifest (what its prompt was built
    from). ``context`` None: ``parents`` is all of it; else ``parents`` is what
    it added to its base's (:class:`ContextRef`), and the whole manifest is
    ``ProvenanceGraph.manifest``.
    """

    model_config = ConfigDict(frozen=True)

    id: str
    session_id: str
    type: ArtifactType
    parents: tuple[str, ...] = ()
    source_ids: tuple[str, ...] = ()
    token_span: tuple[int, int] = (0, 0)
    turn: int = 0
    step: int = 0
    seq: int = 0
    committed: bool = True
    content_hash: str = ""
    labels: tuple[str, ...] = ()
    attrs: dict[str, Any] = Field(default_factory=dict)
    trace_id: str | None = None
    span_id: str | None = None
    context: ContextRef | None = None

    @property
    def is_observation(self) -> bool:
        return self.type in OBSERVATION_TYPES


class CheckpointKind(str, Enum):
    SESSION_START = "session_start"
    TURN = "turn"
    MEMORY_INJECTION = "memory_injection"
    TOOL_CALL = "tool_call"
    COMPACTION = "compaction"


class Checkpoint(BaseModel):
    """Metadata of a splice point. No tensors: restoring is cropping to ``token_offset``.

    ``step`` is the step of the next observation (the checkpoint lies before it),
    so the latest checkpoint usable for a target entering at tau is the last
    one with ``step <= tau``.
    """

    model_config = ConfigDict(frozen=True)

    id: str
    session_id: str
    kind: CheckpointKind
    step: int
    turn: int
    seq: int
    token_offset: int
    cache_handle: str | None = None
    env_snapshot_id: str | None = None
    prompt_manifest: tuple[str, ...] = ()
    #: None: ``prompt_manifest`` is the whole manifest; else what it added to its base's
    #: (``ProvenanceGraph.checkpoint_manifest`` gives the whole one)
    context: ContextRef | None = None
    langgraph_checkpoint_id: str | None = None
    #: the LangGraph thread that checkpoint id lives in (a replay's scratch thread
    #: after a forget was committed; the session's own thread otherwise)
    langgraph_thread_id: str | None = None
    created_ns: int = 0


class SessionInfo(BaseModel):
    model_config = ConfigDict(frozen=True)

    session_id: str
    artifacts: int
    checkpoints: int
    turns: int
    incomplete: bool
    failures: int
    tokenizer: str | None
    created_ns: int
    updated_ns: int
    #: a process died during one of the session's runs, or after it before its records were
    #: written (its run lease was left held): the next forget checks the records against the
    #: agent's LangGraph state (``RecordsBehind``)
    run_died: bool = False


class Hit(BaseModel):
    """Where a target first entered: the step tau, the artifact and its sources."""

    model_config = ConfigDict(frozen=True)

    target_hash: str
    step: int
    artifact_id: str
    artifact_type: ArtifactType
    source_ids: tuple[str, ...]
    occurrences: tuple[str, ...] = ()
