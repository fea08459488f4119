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
from collections.abc import Mapping, Sequence
from typing import Any

from .records import Artifact, ArtifactType, Checkpoint, CheckpointKind, ContextRef

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
# (the memory operations: ``MEMORY`` and the ``OP_*_MEMORY`` names, at the end of this file)

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

#: the tracers (instrumentation scopes) whose spans describe a session without being its records:
#: a forget's own trace, an erasure's, a detector's verdicts and screenings, the IFC's decisions. Made after the
#: fact, they carry the session only as ``gen_ai.conversation.id``; the store keeps them with the
#: session's spans (so ``unsee export`` sends them). A later forget's commit replaces the session's
#: spans from its fork point on: it keeps the traces of their own (a forget's, a late verdict's:
#: the roots of these scopes and every span of ``KEPT_SCOPES``), which say what happened to the
#: session; the ones hanging under a replaced tool call (an IFC decision, a sync screening) go
#: with it (the replay made its own)
DESCRIBING_SCOPES = ("unsee.forget", "unsee.erasure", "unsee.detect", "unsee.ifc")
KEPT_SCOPES = ("unsee.forget", "unsee.erasure")

A = "unsee.artifact."
C = "unsee.checkpoint."
#: a context manifest (a model turn's parents on its ``chat`` span or event, a checkpoint's
#: prompt manifest on its event) as a delta: the id of the record whose manifest it changed
#: (a span link points at the span that holds that one), the ids it added, the ids of the
#: base's it dropped, where the added ones sit when not at the end; or, every
#: ``context_delta.FULL_EVERY``-th of a chain, ``unsee.context.full``: the whole list
CONTEXT = "unsee.context."
CONTEXT_BASE = CONTEXT + "base"
CONTEXT_ADDED = CONTEXT + "added"
CONTEXT_DROPPED = CONTEXT + "dropped"
CONTEXT_AT = CONTEXT + "at"
CONTEXT_FULL = CONTEXT + "full"


def context_attributes(ids: tuple[str, ...], ref: ContextRef | None) -> dict[str, Any]:
    if ref is None:
        return {CONTEXT_FULL: list(ids)}
    out: dict[str, Any] = {CONTEXT_BASE: ref.base, CONTEXT_ADDED: list(ids)}
    if ref.dropped:
        out[CONTEXT_DROPPED] = list(ref.dropped)
    if ref.at:
        out[CONTEXT_AT] = list(ref.at)
    return out


def context_from_attributes(attrs: Mapping[str, Any]) -> tuple[tuple[str, ...], ContextRef | None] | None:
    """What :func:`context_attributes` wrote, None when ``attrs`` has neither form."""
    if CONTEXT_FULL in attrs:
        return tuple(attrs[CONTEXT_FULL]), None
    if CONTEXT_BASE in attrs:
        return tuple(attrs.get(CONTEXT_ADDED, ())), ContextRef(
            base=str(attrs[CONTEXT_BASE]), dropped=tuple(attrs.get(CONTEXT_DROPPED, ())),
            at=tuple(int(i) for i in attrs.get(CONTEXT_AT, ())))
    return None


def artifact_attributes(a: Artifact, content: str | None = None) -> dict[str, Any]:
    """Flat OTel attributes for an artifact (``content`` only when opted in)."""
    out: dict[str, Any] = {
        A + "id": a.id,
        A + "type": a.type.value,
        A + "source_ids": list(a.source_ids),
        A + "token_span": [a.token_span[0], a.token_span[1]],
        A + "turn": a.turn,
        A + "step": a.step,
        A + "seq": a.seq,
        A + "committed": a.committed,
        A + "content_hash": a.content_hash,
        A + "labels": list(a.labels),
    }
    if a.type is ArtifactType.MODEL_TURN:  # (its parents are its context manifest)
        out.update(context_attributes(a.parents, a.context))
    else:
        out[A + "parents"] = list(a.parents)
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
    parents, ref = context_from_attributes(attrs) or (tuple(attrs.get(A + "parents", ())), None)
    return Artifact(
        id=str(attrs[A + "id"]),
        session_id=session_id,
        type=ArtifactType(attrs[A + "type"]),
        parents=parents,
        context=ref,
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
        C + "created_ns": c.created_ns,
        **context_attributes(c.prompt_manifest, c.context),
    }
    for key in ("cache_handle", "env_snapshot_id", "langgraph_checkpoint_id", "langgraph_thread_id"):
        value = getattr(c, key)
        if value is not None:
            out[C + key] = value
    return out


def checkpoint_from_attributes(attrs: Mapping[str, Any], session_id: str) -> Checkpoint | None:
    if C + "id" not in attrs:
        return None
    manifest, ref = context_from_attributes(attrs) or (tuple(attrs.get(C + "prompt_manifest", ())), None)
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
        prompt_manifest=manifest,
        context=ref,
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
#: the draft's event for one security finding on a ``run_guardrail`` span (its attributes: the
#: ``GUARDRAIL`` names of the finding's category, score, rule and content hash)
GUARDRAIL_FINDING_EVENT = "gen_ai.guardrail.security.finding"


def guardrail_attributes(component: str, session: str, *, target_type: str, target_subtype: str,
                         target_id: str, verdict: str, action: str | None = None, reason: str | None = None,
                         **security: Any) -> dict[str, Any]:
    """The attributes every ``run_guardrail`` span of unsee starts with (pure; one layout for the
    IFC's decisions and the detector's verdicts). ``security``: more ``GUARDRAIL`` entries by
    their short key (``risk_category=``, ``rule_id=``, ...); None values are left out, as is
    ``action`` when the caller's action is not known (the draft asks for it only then)."""
    attrs: dict[str, Any] = {
        GEN_AI_OPERATION: OP_RUN_GUARDRAIL, GEN_AI_PROVIDER: "unsee", GEN_AI_CONVERSATION_ID: session,
        GUARDRAIL["component"]: component, GUARDRAIL["target_type"]: target_type,
        GUARDRAIL["target_subtype"]: target_subtype, GUARDRAIL["target_id"]: target_id,
        GUARDRAIL["verdict"]: verdict,
    }
    if action is not None:
        attrs[GUARDRAIL["action"]] = action
    if reason is not None:
        attrs[GUARDRAIL["verdict_reason"]] = reason
    for key, value in security.items():
        if value is not None:
            attrs[GUARDRAIL[key]] = value  # (KeyError: a name not in the table)
    return attrs


# Memory spans: the GenAI conventions' ``gen_ai.memory.client`` span, followed as merged in
# open-telemetry/semantic-conventions-genai PR #140 ("Add GenAI memory operation conventions",
# opened 2026-05-11: the proposal of open-telemetry/semantic-conventions PR #3250, closed there,
# moved and narrowed), read at commit 002c8a6ea1c8 (model/gen-ai/spans.yaml and registry.yaml;
# status Development). Every memory name is in this one table, so a rename is one edit. Where
# unsee had to choose:
# - a recorded ``BaseStore.put`` is ``upsert_memory`` (the merged text: "a public API that may
#   create, update, or consolidate memory records without the caller choosing which"; #3250 had
#   only ``update_memory``, with upsert semantics); a put of None (``store.delete``) is
#   ``delete_memory``; the memory injection's read is ``search_memory``;
# - the span name is the operation alone (the conventions' ``{gen_ai.operation.name}``): no
#   namespace in it (a namespace often names a user; it is an attribute);
# - ``store.id`` is the LangGraph namespace joined by "/" (the conventions ask each component to
#   say what the store id maps to), ``record.id`` the item's key, set only when the operation
#   applies to one record; on a forget's trace (made after the erasure, kept by trace backends
#   beyond its reach) both are the home's keyed hashes: of the namespace as the erasure receipts
#   label it, of the record's source id (``memory:<namespace>/<key>``);
# - ``query.text`` and ``records`` (opt-in in the conventions) are never set: payload reaches
#   spans only as ``unsee.content`` on the artifacts, under ``Unsee(content_in_spans=True)``, as
#   for every other span (the injection's search has no query text anyway).
OP_SEARCH_MEMORY = "search_memory"
OP_UPSERT_MEMORY = "upsert_memory"
OP_DELETE_MEMORY = "delete_memory"
#: every operation name of the pinned ``gen_ai.memory.client`` span (unsee records the three above)
MEMORY_OPERATIONS = ("create_memory_store", "search_memory", "create_memory", "update_memory",
                     "upsert_memory", "delete_memory", "delete_memory_store")
MEMORY = {
    "store_id": "gen_ai.memory.store.id",
    "record_id": "gen_ai.memory.record.id",
    "record_count": "gen_ai.memory.record.count",
    "query_text": "gen_ai.memory.query.text",  # opt-in there; never set by unsee (see above)
    "records": "gen_ai.memory.records",  # opt-in there; never set by unsee (see above)
    # unsee's own: on a forget's trace, the keyed hashes of the records an operation changed (the
    # first ``MEMORY_RECORD_IDS_MAX``; ``record_count`` says how many there were)
    "record_ids": "unsee.memory.record.ids",
}
MEMORY_RECORD_IDS_MAX = 100


def memory_store_id(namespace: Sequence[str]) -> str:
    """What ``gen_ai.memory.store.id`` is for a LangGraph namespace (on an agent's spans)."""
    return "/".join(namespace)


def memory_attributes(op: str, store_id: str, count: int, record_id: str | None = None) -> dict[str, Any]:
    """The ``gen_ai.memory.*`` attributes of a memory span (pure, cheap: what the caller has at
    hand). ``store_id`` "" (the whole store) is left out, as the conventions allow."""
    attrs: dict[str, Any] = {GEN_AI_OPERATION: op, MEMORY["record_count"]: count}
    if store_id:
        attrs[MEMORY["store_id"]] = store_id
    if record_id is not None:
        attrs[MEMORY["record_id"]] = record_id
    return attrs
