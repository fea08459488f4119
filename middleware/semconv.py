"""Span attribute names and the artifact/checkpoint <-> attribute encoding.

Spans are the wire format of the provenance graph: an operation span
(``chat``, ``execute_tool``, memory, compaction) carries its primary artifact
in ``unsee.artifact.*`` attributes and further artifacts it produced as span
events named ``unsee.artifact``; checkpoints are events named
``unsee.checkpoint``. Data-flow parents are span links *and* the
``unsee.artifact.parents`` attribute (Jaeger's graph does not draw links).
GenAI semantic-convention names are used wherever one exists.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .records import Artifact, ArtifactType, Checkpoint, CheckpointKind

# OpenTelemetry GenAI semantic conventions
GEN_AI_OPERATION = "gen_ai.operation.name"
GEN_AI_PROVIDER = "gen_ai.provider.name"
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_RESPONSE_MODEL = "gen_ai.response.model"
GEN_AI_RESPONSE_ID = "gen_ai.response.id"
GEN_AI_FINISH_REASONS = "gen_ai.response.finish_reasons"
GEN_AI_INPUT_TOKENS = "gen_ai.usage.input_tokens"
GEN_AI_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
GEN_AI_CONVERSATION_ID = "gen_ai.conversation.id"
GEN_AI_AGENT_NAME = "gen_ai.agent.name"
GEN_AI_TOOL_NAME = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID = "gen_ai.tool.call.id"
GEN_AI_TOOL_TYPE = "gen_ai.tool.type"
GEN_AI_INPUT_MESSAGES = "gen_ai.input.messages"
GEN_AI_OUTPUT_MESSAGES = "gen_ai.output.messages"

OP_CHAT = "chat"
OP_EXECUTE_TOOL = "execute_tool"
OP_INVOKE_AGENT = "invoke_agent"
OP_SEARCH_MEMORY = "search_memory"
OP_UPDATE_MEMORY = "update_memory"

# unsee attributes
SESSION = "unsee.session.id"
#: the thread a span was recorded in when that is not the session itself: a forget's replay
#: rebuilds the session in a scratch thread (its records go there until the commit)
RECORDED_IN = "unsee.replay.thread"
#: the revocation event a replayed span was recorded for
REPLAY_EVENT = "unsee.replay.event"
TURN = "unsee.turn"
ARTIFACT_EVENT = "unsee.artifact"
CHECKPOINT_EVENT = "unsee.checkpoint"
#: on an artifact event that stands for what used to be a span of its own: its kind
#: (``user_input``, ``prompt_block system``, ``summarize``, ...)
RECORD_KIND = "unsee.record.kind"
COMMITS = "unsee.commits"
CONTENT = "unsee.content"
TOKENIZER = "unsee.tokenizer"
EFFECT = "unsee.tool.effect"

A = "unsee.artifact."
C = "unsee.checkpoint."


def artifact_attributes(a: Artifact, content: str | None = None) -> dict[str, Any]:
    """Flat OTel attributes for an artifact (``content`` only when opted in)."""
    out: dict[str, Any] = {
        A + "id": a.id,
        A + "type": a.type.value,
        A + "parents": list(a.parents),
        A + "source_ids": list(a.source_ids),
        A + "token_span": [a.token_span[0], a.token_span[1]],
        A + "turn": a.turn,
        A + "step": a.step,
        A + "seq": a.seq,
        A + "committed": a.committed,
        A + "content_hash": a.content_hash,
        A + "labels": list(a.labels),
    }
    if a.attrs:
        out[A + "attrs"] = json.dumps(a.attrs, sort_keys=True, default=str)
    if content is not None:
        out[CONTENT] = content
    return out


def artifact_from_attributes(
    attrs: Mapping[str, Any], session_id: str, trace_id: str | None, span_id: str | None
) -> Artifact | None:
    if A + "id" not in attrs:
        return None
    span = list(attrs.get(A + "token_span", (0, 0)))
    return Artifact(
        id=str(attrs[A + "id"]),
        session_id=session_id,
        type=ArtifactType(attrs[A + "type"]),
        parents=tuple(attrs.get(A + "parents", ())),
        source_ids=tuple(attrs.get(A + "source_ids", ())),
        token_span=(int(span[0]), int(span[1])),
        turn=int(attrs.get(A + "turn", 0)),
        step=int(attrs.get(A + "step", 0)),
        seq=int(attrs.get(A + "seq", 0)),
        committed=bool(attrs.get(A + "committed", True)),
        content_hash=str(attrs.get(A + "content_hash", "")),
        labels=tuple(attrs.get(A + "labels", ())),
        attrs=json.loads(attrs[A + "attrs"]) if A + "attrs" in attrs else {},
        trace_id=trace_id,
        span_id=span_id,
    )


def checkpoint_attributes(c: Checkpoint) -> dict[str, Any]:
    out: dict[str, Any] = {
        C + "id": c.id,
        C + "kind": c.kind.value,
        C + "step": c.step,
        C + "turn": c.turn,
        C + "seq": c.seq,
        C + "token_offset": c.token_offset,
        C + "prompt_manifest": list(c.prompt_manifest),
        C + "created_ns": c.created_ns,
    }
    for key in ("cache_handle", "env_snapshot_id", "langgraph_checkpoint_id", "langgraph_thread_id"):
        value = getattr(c, key)
        if value is not None:
            out[C + key] = value
    return out


def checkpoint_from_attributes(attrs: Mapping[str, Any], session_id: str) -> Checkpoint | None:
    if C + "id" not in attrs:
        return None
    return Checkpoint(
        id=str(attrs[C + "id"]),
        session_id=session_id,
        kind=CheckpointKind(attrs[C + "kind"]),
        step=int(attrs[C + "step"]),
        turn=int(attrs[C + "turn"]),
        seq=int(attrs[C + "seq"]),
        token_offset=int(attrs[C + "token_offset"]),
        cache_handle=attrs.get(C + "cache_handle"),
        env_snapshot_id=attrs.get(C + "env_snapshot_id"),
        prompt_manifest=tuple(attrs.get(C + "prompt_manifest", ())),
        langgraph_checkpoint_id=attrs.get(C + "langgraph_checkpoint_id"),
        langgraph_thread_id=attrs.get(C + "langgraph_thread_id"),
        created_ns=int(attrs.get(C + "created_ns", 0)),
    )

# Guardrail spans: the GenAI conventions' draft for security checks (open-telemetry/
# semantic-conventions-genai PR #427, the `run_guardrail` design at 3155df2; unmerged, status
# Development: every name in this one table, so a rename is one edit)
OP_RUN_GUARDRAIL = "run_guardrail"
GUARDRAIL = {
    "component": "gen_ai.guardrail.component.name",
    "target_type": "gen_ai.guardrail.target.type",  # input | output
    "target_subtype": "gen_ai.guardrail.target.subtype",  # tool_call | memory | ...
    "target_id": "gen_ai.guardrail.target.id",
    "verdict": "gen_ai.guardrail.verdict.type",  # allow | deny | modify | warn | escalate | audit
    "verdict_reason": "gen_ai.guardrail.verdict.reason",
    "action": "gen_ai.guardrail.action.type",  # allow | block | modify | escalate | audit
    "risk_category": "gen_ai.guardrail.security.risk.category",
    "risk_score": "gen_ai.guardrail.security.risk.score",
    "policy_id": "gen_ai.guardrail.security.policy.id",
    "rule_id": "gen_ai.guardrail.security.policy.rule.id",
    "input_hash": "gen_ai.guardrail.security.content.input.hash",  # hmac-sha256:...
}
