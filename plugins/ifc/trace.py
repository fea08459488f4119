"""An IFC sink decision as a ``run_guardrail unsee.ifc`` span (the GenAI conventions' draft
guardrail span; the names are in ``unsee.middleware.semconv.GUARDRAIL``). Pure layout.

One span per decision, a child of the tool call's ``execute_tool`` span: the target is what
the call would send (``target.type=input``, ``subtype=tool_call``, its artifact id, the tool
call id and tool name), the verdict and the action apart (:data:`VERDICTS`), the IFC policy
and the rule that fired (:func:`rule_of`: which label of data reached which sink), the risk
category :data:`RISK_CATEGORY` when a flow was found, and one
``gen_ai.guardrail.security.finding`` event per identifier carried: its keyed hash, the sink
arguments and the artifacts that introduced it. Never the identifier's text.

The interceptor times the decision and captures the span context on the agent's thread; this
layout (and its hashing) runs later, off that path (``AfterSpans``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from unsee.middleware.messages import tool_call_artifact_id
from unsee.middleware.semconv import (GEN_AI_TOOL_CALL_ID, GEN_AI_TOOL_NAME, GUARDRAIL, GUARDRAIL_FINDING_EVENT,
                                      OP_RUN_GUARDRAIL, guardrail_attributes)
from unsee.middleware.trace_after import SpanSpec

from .decision import ALLOW, Decision
from .labels import ENDORSED, REVOKED, UNTRUSTED

__all__ = ["COMPONENT", "POLICY_ID", "RISK_CATEGORY", "VERDICTS", "decision_span", "rule_of"]

COMPONENT = "unsee.ifc"
#: the one IFC policy (its mode is ``unsee.ifc.mode``)
POLICY_ID = "unsee.ifc.identifier_sinks"
#: the draft's categories are OWASP's LLM Top 10 (``prompt_injection``, ``excessive_agency``, ...)
#: plus ``custom:*``: none names a flow of data, which is what the IFC checks (the injection is
#: the detector's category; the flow is how an injection, or a revoked value, would act)
RISK_CATEGORY = "custom:untrusted_identifier_flow"
#: the decision's action -> (the draft's verdict type, its action type). ``audit``: the policy
#: found the flow and was told only to record it; both enums have ``audit``, and ``warn``/``allow``
#: would make an audited flow look like a clean call to a search on the action
VERDICTS = {
    "block": ("deny", "block"),
    "ask": ("escalate", "escalate"),
    "audit": ("audit", "audit"),
    ALLOW: ("allow", "allow"),
}


def rule_of(decision: Decision) -> str:
    """The rule that decided: ``<label>@<tool.arg>[,<tool.arg>...]`` — the label of the data that
    reached the sinks (``revoked`` over ``untrusted``; an allowed call: ``endorsed`` when
    endorsed observations vouched for its identifiers, else ``trusted``), and the sink arguments
    (those that carried the identifiers; all checked ones when allowed). ``no_sink@<tool>``: none
    of the call's arguments is a sink."""
    if not decision.args:
        return f"no_sink@{decision.tool}"
    sinks = ",".join(f"{decision.tool}.{a}" for a in decision.args)
    if decision.flagged:
        found = set(decision.labels)
        label = REVOKED if REVOKED in found else UNTRUSTED
    else:
        label = ENDORSED if decision.endorsements else "trusted"
    return f"{label}@{sinks}"


def decision_span(decision: Decision, *, session: str, thread: str, tool_call_id: str, parent: Any,
                  hash_text: Callable[[str], str], start_ns: int, end_ns: int) -> SpanSpec:
    """The guardrail span of one IFC decision (pure). ``session``: the conversation (a replay's
    session, not its scratch ``thread``, which names the call's artifact); ``parent``: the span
    context of the tool call's ``execute_tool`` span; ``hash_text``: the home's keyed hash."""
    verdict, action = VERDICTS[decision.action]
    rule = rule_of(decision)
    flagged = decision.flagged
    attrs = guardrail_attributes(
        COMPONENT, session, target_type="input", target_subtype="tool_call",
        target_id=tool_call_artifact_id(thread, tool_call_id), verdict=verdict, action=action,
        reason=decision.reason,  # (never repeats an identifier: policy._reason)
        risk_category=RISK_CATEGORY if flagged else None, policy_id=POLICY_ID, rule_id=rule,
        input_hash=hash_text(decision.identifier) if flagged and decision.identifier else None)
    attrs[GEN_AI_TOOL_CALL_ID] = tool_call_id
    attrs[GEN_AI_TOOL_NAME] = decision.tool
    attrs.update(decision.to_event())  # unsee.ifc.* (action, mode, sinks, evidence, labels, ...; no hashes)
    sinks = [f"{decision.tool}.{a}" for a in decision.args]
    events = tuple(
        (GUARDRAIL_FINDING_EVENT, {
            GUARDRAIL["risk_category"]: RISK_CATEGORY, GUARDRAIL["policy_id"]: POLICY_ID,
            GUARDRAIL["rule_id"]: rule, GUARDRAIL["input_hash"]: hash_text(ident),
            "unsee.ifc.sinks": sinks, "unsee.ifc.evidence": list(decision.artifact_ids),
        })
        for ident in decision.identifiers) if flagged else ()
    return SpanSpec(f"{OP_RUN_GUARDRAIL} {COMPONENT}", start_ns, end_ns, attrs, parent_context=parent,
                    events=events)
