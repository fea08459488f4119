"""A detector's verdict as a ``run_guardrail unsee.detector`` span (the GenAI conventions' draft
guardrail span; the names are in ``unsee.middleware.semconv.GUARDRAIL``). Pure layout: one
function, :func:`verdict_attributes`, lays out every kind.

- A late verdict (:func:`verdict_span`): one span per finding a scan acted on, on the
  observation it judged (``target.type=output``: what a tool returned), in its own trace: the
  verdict (``deny``: the detector flagged the text), the action taken apart from it
  (``escalate``: handed to the revocation pipeline, whose forget trace links back to this span;
  ``audit``: only recorded). Made by the scan that found it (the detection loop's thread, or the
  caller of ``scan``), never inside an agent's run.
- A screening (:func:`screening_span`): one span per observation screened while the agent
  waits — a tool return in ``timing="sync"`` (a child of that tool call's ``execute_tool`` span),
  or an observation the IFC asked the detector to endorse at a sink call (a child of the sink
  call's span) — with its verdict, ``allow`` or ``deny`` (:data:`SCREEN_ACTIONS`). Timed on the
  agent's thread, laid out and sent later (``AfterSpans``).

Every kind names the detector as the policy rule and the risk category ``prompt_injection``
with the detector's score; each finding is a ``gen_ai.guardrail.security.finding`` event; the
flagged text appears only as a keyed hash and its offsets in the observation. No payload.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from unsee.middleware.semconv import (GEN_AI_TOOL_CALL_ID, GEN_AI_TOOL_NAME, GUARDRAIL, GUARDRAIL_FINDING_EVENT,
                                      OP_RUN_GUARDRAIL, guardrail_attributes)
from unsee.middleware.trace_after import SpanSpec

__all__ = ["ACTIONS", "COMPONENT", "RISK_CATEGORY", "SCREEN_ACTIONS", "finding_event", "screening_span",
           "verdict_attributes", "verdict_span"]

COMPONENT = "unsee.detector"
RISK_CATEGORY = "prompt_injection"
#: what the service does with a late verdict, by policy: the conventions' action values
ACTIONS = {"auto": "escalate", "queue": "escalate", "alert": "audit"}
#: a screening's action on a flagged observation, by (screening, policy): in sync mode ``auto``
#: removes the flagged spans before the model sees them (``modify``), the other policies only
#: record them (``audit``: ``queue`` has nothing to queue, the run goes on); an endorsement refused
#: is no action of the detector's (the observation stays untrusted; what is enforced is the IFC's
#: own span next to it), so the action is left out, as the draft asks when it is not known
SCREEN_ACTIONS = {("sync", "auto"): "modify", ("sync", "queue"): "audit", ("sync", "alert"): "audit"}
REASONS = {
    "deny": "injection detected in a tool observation",
    "allow": "no injection detected in the observation",
}


def verdict_attributes(session: str, artifact_id: str, finding: Any, *, verdict: str, action: str | None,
                       hash_text: Callable[[str], str], target_subtype: str = "tool_call",
                       reason: str | None = None) -> dict[str, Any]:
    """The attributes of a detector's guardrail span (pure). ``finding``: the one the span is
    about (a late verdict's, a flagged screening's highest-scoring one), None for ``allow``."""
    return {
        **guardrail_attributes(
            COMPONENT, session, target_type="output", target_subtype=target_subtype, target_id=artifact_id,
            verdict=verdict, action=action, reason=reason or REASONS[verdict],
            risk_category=RISK_CATEGORY if finding is not None else None,
            risk_score=float(finding.score) if finding is not None else None,
            rule_id=str(finding.detector) if finding is not None else None,
            input_hash=hash_text(finding.text) if finding is not None else None),
        **({"unsee.finding.start": finding.start, "unsee.finding.end": finding.end} if finding is not None else {}),
    }


def finding_event(finding: Any, hash_text: Callable[[str], str]) -> tuple[str, dict[str, Any]]:
    """One finding as the draft's ``gen_ai.guardrail.security.finding`` event (no text)."""
    return GUARDRAIL_FINDING_EVENT, {
        GUARDRAIL["risk_category"]: RISK_CATEGORY, GUARDRAIL["risk_score"]: float(finding.score),
        GUARDRAIL["rule_id"]: str(finding.detector), GUARDRAIL["input_hash"]: hash_text(finding.text),
        "unsee.finding.start": finding.start, "unsee.finding.end": finding.end,
    }


def verdict_span(session: str, artifact_id: str, finding: Any, *, policy: str, hash_text: Any,
                 start_ns: int, end_ns: int, event_id: str | None = None) -> SpanSpec:
    """The guardrail span of one late finding (pure). ``hash_text``: the home's keyed hash."""
    attrs = verdict_attributes(session, artifact_id, finding, verdict="deny", action=ACTIONS[policy],
                               hash_text=hash_text)
    if event_id:
        attrs["unsee.revocation.event_id"] = event_id
    return SpanSpec(f"{OP_RUN_GUARDRAIL} {COMPONENT}", start_ns, end_ns, attrs,
                    events=(finding_event(finding, hash_text),))


def screening_span(session: str, artifact_id: str, findings: Sequence[Any], *, screening: str, policy: str,
                   hash_text: Callable[[str], str], start_ns: int, end_ns: int, parent: Any = None,
                   target_subtype: str = "tool_call", tool_call_id: str | None = None,
                   tool_name: str | None = None, cached: bool | None = None) -> SpanSpec:
    """The guardrail span of one observation screened on an agent's path (pure): ``screening``
    is ``sync`` (a tool return as it arrives) or ``endorsement`` (vetted for the IFC at a sink
    call); ``findings``: what the detectors found in it (none: ``allow``); ``parent``: the span
    context of the tool call it was screened for; ``cached``: the verdict was the one kept for
    this content (no detector ran again)."""
    top = max(findings, key=lambda f: f.score) if findings else None
    verdict = "deny" if findings else "allow"
    action = "allow" if not findings else SCREEN_ACTIONS.get((screening, policy))
    reason = ("injection detected: the observation is not endorsed"
              if findings and screening == "endorsement" else None)
    attrs = verdict_attributes(session, artifact_id, top, verdict=verdict, action=action, hash_text=hash_text,
                               target_subtype=target_subtype, reason=reason)
    attrs["unsee.detector.screening"] = screening
    if tool_call_id:
        attrs[GEN_AI_TOOL_CALL_ID] = tool_call_id
    if tool_name:
        attrs[GEN_AI_TOOL_NAME] = tool_name
    if cached is not None:
        attrs["unsee.detector.cached"] = cached
    return SpanSpec(f"{OP_RUN_GUARDRAIL} {COMPONENT}", start_ns, end_ns, attrs, parent_context=parent,
                    events=tuple(finding_event(f, hash_text) for f in findings))
