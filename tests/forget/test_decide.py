"""The replay's tool-call decision, as a table (pure: no agent, no LangChain)."""

from __future__ import annotations

import pytest

from unsee.plugins.forget.decide import Action, Decision, ToolCall, decide, same_args
from unsee.plugins.forget.plan import RecordedCall

ARGS = {"order": "A7", "reason": "late"}


def rec(kind: str, *, name: str = "t", args: dict = ARGS, aid: str = "call-1") -> RecordedCall | None:
    """A recorded counterpart in one of the states the decision distinguishes."""
    if kind == "none":  # no counterpart: the run diverged or the call is new
        return None
    base = dict(artifact_id=aid, call_id="c1", name=name, args=args, effect=None, return_id="ret-1",
                return_content="recorded result", return_status="success", executed=True)
    if kind == "never_ran":  # an IFC block or a deferral: the tool did not run
        base.update(executed=False, return_status="error", return_content="[unsee] not executed")
    elif kind == "error":  # it ran and failed
        base.update(return_status="error", return_content="boom")
    elif kind == "no_return":  # the call was recorded, its return never was
        base.update(return_id=None, return_content=None, return_status=None)
    elif kind == "no_content":  # a return without recorded content (vault record deleted)
        base.update(return_content=None)
    else:
        assert kind == "recorded"
    return RecordedCall(**base)


RECORDS = ["recorded", "none", "never_ran", "error", "no_return", "no_content"]
POLICIES = ["defer", "ask", "execute"]
NEW_EXTERNAL = {"defer": (Action.DEFER, "deferred"), "ask": (Action.DEFER, "awaiting_approval"),
                "execute": (Action.EXECUTE_EXTERNAL, None)}


def expected(effect: str | None, record: str, policy: str) -> tuple[Action, str | None, bool]:
    """(action, status, answered by the record) per the rules of ``decide``."""
    if effect == "read":
        return (Action.RECORD, None, True) if record == "recorded" else (Action.EXECUTE, None, False)
    if effect == "write":
        return Action.EXECUTE, None, False
    if record in ("recorded", "no_content"):  # external / undeclared: fired before, de-duplicated
        return Action.RECORD, "deduplicated", True
    return (*NEW_EXTERNAL[policy], False)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("record", RECORDS)
@pytest.mark.parametrize("effect", ["read", "write", "external", None])
def test_decision_table(effect, record, policy):
    call = ToolCall(name="t", args=dict(ARGS), call_id="c1", effect=effect)
    r = rec(record)
    d = decide(call, r, policy)
    action, status, from_record = expected(effect, record, policy)
    assert isinstance(d, Decision)
    assert (d.action, d.status) == (action, status)
    assert d.record is (r if from_record else None)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("effect", ["external", None])
def test_external_call_matching_a_fired_call_elsewhere_is_deduplicated(effect, policy):
    call = ToolCall(name="t", args={"reason": "late", "order": "A7"}, effect=effect)  # key order differs
    fired = rec("recorded", aid="elsewhere")
    d = decide(call, None, policy, identical=[rec("never_ran", aid="blocked"), rec("error", aid="failed"), fired])
    assert (d.action, d.status, d.record) == (Action.RECORD, "deduplicated", fired)


@pytest.mark.parametrize("policy", POLICIES)
def test_candidates_with_other_tool_or_args_never_answer(policy):
    call = ToolCall(name="t", args=ARGS, effect="external")
    others = [rec("recorded", name="u"), rec("recorded", args={"order": "A8", "reason": "late"})]
    assert decide(call, None, policy, identical=others).action is NEW_EXTERNAL[policy][0]


def test_read_and_write_ignore_candidates():
    fired = [rec("recorded")]
    assert decide(ToolCall("t", ARGS, effect="read"), None, "defer", fired).action is Action.EXECUTE
    assert decide(ToolCall("t", ARGS, effect="write"), rec("recorded"), "defer", fired).action is Action.EXECUTE


def test_same_args_is_canonical_json():
    assert same_args({"a": 1, "b": [1, {"c": "é"}]}, {"b": [1, {"c": "é"}], "a": 1})
    assert not same_args({"a": 1}, {"a": "1"})
    assert same_args(None, None) and not same_args({}, None)
    obj = object()
    assert same_args({"x": obj}, {"x": obj})  # not JSON: compared as values
