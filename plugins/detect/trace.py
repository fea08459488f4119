"""A detector's verdict as a ``run_guardrail`` span (the GenAI conventions' draft guardrail span;
the names are in ``unsee.middleware.semconv.GUARDRAIL``).

One span per finding a scan acted on, on the observation it judged (``target.type=output``:
what a tool returned), in its own trace: the verdict (``deny``: the detector flagged the text),
the action taken apart from it (``escalate``: handed to the revocation pipeline, whose forget
trace links back to this span; ``audit``: only recorded), the detector as the policy rule, the
risk category ``prompt_injection`` with the detector's score, the flagged text only as a keyed
hash and its offsets in the observation. No payload. Made by the scan that found it (the
detection loop's thread, or the caller of ``scan``), never inside an agent's run.
"""

from __future__ import annotations

from typing import Any

from unsee.middleware.semconv import (GEN_AI_CONVERSATION_ID, GEN_AI_OPERATION, GEN_AI_PROVIDER, GUARDRAIL,
                                      OP_RUN_GUARDRAIL)
from unsee.middleware.trace_after import SpanSpec

__all__ = ["COMPONENT", "ACTIONS", "verdict_span"]

COMPONENT = "unsee.detector"
#: what the service does with a verdict, by policy: the conventions' action values
ACTIONS = {"auto": "escalate", "queue": "escalate", "alert": "audit"}


def verdict_span(session: str, artifact_id: str, finding: Any, *, policy: str, hash_text: Any,
                 start_ns: int, end_ns: int, event_id: str | None = None) -> SpanSpec:
    """The guardrail span of one finding (pure). ``hash_text``: the home's keyed hash."""
    attrs = {
        GEN_AI_OPERATION: OP_RUN_GUARDRAIL, GEN_AI_PROVIDER: "unsee", GEN_AI_CONVERSATION_ID: session,
        GUARDRAIL["component"]: COMPONENT,
        GUARDRAIL["target_type"]: "output", GUARDRAIL["target_subtype"]: "tool_call",
        GUARDRAIL["target_id"]: artifact_id,
        GUARDRAIL["verdict"]: "deny", GUARDRAIL["verdict_reason"]: "injection detected in a tool observation",
        GUARDRAIL["action"]: ACTIONS[policy],
        GUARDRAIL["risk_category"]: "prompt_injection", GUARDRAIL["risk_score"]: float(finding.score),
        GUARDRAIL["rule_id"]: str(finding.detector),
        GUARDRAIL["input_hash"]: hash_text(finding.text),
        "unsee.finding.start": finding.start, "unsee.finding.end": finding.end,
    }
    if event_id:
        attrs["unsee.revocation.event_id"] = event_id
    return SpanSpec(f"{OP_RUN_GUARDRAIL} {COMPONENT}", start_ns, end_ns, attrs)
