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
        # (a failure at the same place: the same call meets the same environment, and fails again)
        return (Action.RECORD, None, True) if record in ("recorded", "error") else (Action.EXECUTE, None, False)
    if effect == "write":
        return Action.EXECUTE, None, False
    if record in ("recorded", "no_content", "error"):  # external / undeclared: fired before, de-duplicated
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


# -- state effects: run again, whatever the record ------------------------------------------------
@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("record", RECORDS)
def test_a_state_effect_is_executed_again(record, policy):
    r = rec(record)
    d = decide(ToolCall("t", dict(ARGS), call_id="c1", effect="state"), r, policy, identical=[rec("recorded")])
    assert (d.action, d.status, d.record) == (Action.EXECUTE, None, None)


@pytest.mark.parametrize("policy", POLICIES)
def test_an_undeclared_call_whose_original_returned_a_command_is_a_state_effect(policy):
    r = RecordedCall(**{**rec("recorded").__dict__, "command": True})
    assert decide(ToolCall("t", ARGS, call_id="c1", effect=None), r, policy).action is Action.EXECUTE
    # a declared effect wins over what the record shows
    assert decide(ToolCall("t", ARGS, call_id="c1", effect="read"), r, policy).action is Action.RECORD


# -- the clean prefix: the recorded observation, verbatim -----------------------------------------
def prefix(kind: str) -> RecordedCall:
    return RecordedCall(**{**rec(kind).__dict__, "prefix": True})


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("kind", ["recorded", "error", "never_ran"])
@pytest.mark.parametrize("effect", ["read", "external", None])
def test_a_prefix_observation_answers_verbatim(effect, kind, policy):
    r = prefix(kind)
    later_success = rec("recorded", aid="later")
    d = decide(ToolCall("t", dict(ARGS), call_id="c1", effect=effect), r, policy, identical=[later_success])
    assert (d.action, d.record) == (Action.RECORD, r)  # (never the later identical success)
    assert d.status == ("deduplicated" if effect != "read" and r.fired else None)


@pytest.mark.parametrize("effect", ["write", "state"])
def test_a_prefix_write_or_state_effect_still_runs_again(effect):
    # (the restored environment and state must receive the write again)
    assert decide(ToolCall("t", ARGS, call_id="c1", effect=effect), prefix("recorded")).action is Action.EXECUTE


def test_a_prefix_record_without_content_is_not_reused():
    d = decide(ToolCall("t", ARGS, call_id="c1", effect="read"), prefix("no_content"))
    assert d.action is Action.EXECUTE


@pytest.mark.parametrize("effect", ["read", "external", None])
def test_after_the_entry_a_failed_counterpart_answers_verbatim_too(effect):
    failed, later_success = rec("error"), rec("recorded", aid="later")
    d = decide(ToolCall("t", dict(ARGS), call_id="c1", effect=effect), failed, "defer", identical=[later_success])
    assert (d.action, d.record) == (Action.RECORD, failed)


def test_after_the_entry_a_call_that_never_ran_is_a_new_call():
    later_success = rec("recorded", aid="later")
    d = decide(ToolCall("t", dict(ARGS), call_id="c1", effect="external"), rec("never_ran"), "defer",
               identical=[later_success])
    assert (d.action, d.status, d.record) == (Action.RECORD, "deduplicated", later_success)
    assert decide(ToolCall("t", ARGS, call_id="c1", effect="read"), rec("never_ran")).action is Action.EXECUTE
