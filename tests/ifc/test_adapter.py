"""The IFC interceptor on a real create_agent agent with an injection-following policy."""

from langchain_core.messages import ToolMessage

from tests.support.ifc_agents import ATTACKER, FRIEND, INJECTION, say, setup
from unsee import RevocationEvent


def test_block_laundered_identifier_from_untrusted_observation(tmp_path):
    u, agent, sent, exporter = setup(tmp_path)
    out = say(agent, "check my inbox")
    assert sent == []  # the real tool never ran
    blocked = [m for m in out["messages"] if isinstance(m, ToolMessage) and m.name == "send_money"]
    assert blocked and blocked[0].status == "error" and "blocked by unsee IFC" in blocked[0].content
    u.flush()  # (a run returns before its last spans end)
    events = [e for s in exporter.get_finished_spans() for e in s.events if e.name == "unsee.ifc.decision"]
    assert events and events[0].attributes["unsee.ifc.action"] == "block"
    ret = u.graph("s").of_type(__import__("unsee").ArtifactType.TOOL_RETURN)[0]
    assert ret.id in events[0].attributes["unsee.ifc.evidence"]
    assert ATTACKER.replace(" ", "") not in repr(dict(events[0].attributes))  # hashes, not identifiers


def test_trusted_identifier_typed_by_user_is_allowed(tmp_path):
    u, agent, sent, _ = setup(tmp_path)
    say(agent, f"pay {FRIEND}")
    assert sent == [FRIEND]


def test_audit_runs_and_records(tmp_path):
    u, agent, sent, exporter = setup(tmp_path, mode="audit")
    say(agent, "check my inbox")
    assert len(sent) == 1
    u.flush()  # (a run returns before its last spans end)
    events = [e for s in exporter.get_finished_spans() for e in s.events if e.name == "unsee.ifc.decision"]
    assert events[0].attributes["unsee.ifc.action"] == "audit"


def test_ask_interrupts_for_a_human(tmp_path):
    u, agent, sent, _ = setup(tmp_path, mode="ask")
    out = say(agent, "check my inbox")
    assert "__interrupt__" in out and sent == []


def test_b8_blocks_sinks_but_b9_removes_the_text(tmp_path):
    u, agent, sent, _ = setup(tmp_path, mode="audit")  # the attack succeeded once, before detection
    say(agent, "check my inbox")
    assert len(sent) == 1
    target = INJECTION
    r8 = u.forget("s", RevocationEvent(target=target, raised_by="detector"), strategy="B8")
    live = repr(agent.get_state({"configurable": {"thread_id": "s"}}).values["messages"])
    assert r8.committed and target in live  # B8 leaves the injected text in the state
    r9 = u.forget("s", RevocationEvent(target=target, raised_by="detector"), strategy="B9")
    live = repr(agent.get_state({"configurable": {"thread_id": "s"}}).values["messages"])
    assert r9.committed and target not in live and len(sent) == 1
    assert [o.tool for o in r9.orphaned_side_effects] == ["send_money"]  # the payment the injection caused
