"""Invalid or cut-off tool calls: the error return LangChain adds is recorded
under the model turn that made the call, so taint reaches it."""

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from tests.support.recording_agents import lookup, refund, say
from unsee import ArtifactType
from unsee.plugins.model import ScriptedChatModel

CUT_OFF = '<tool_call>\n{"name": "lookup", "arguments": {"ticket": "T1 4417-22'


def cut_off_policy(messages, tools):
    last = messages[-1]
    if isinstance(last, HumanMessage) and "T1" in str(last.content):
        return AIMessage(content="", invalid_tool_calls=[{
            "type": "invalid_tool_call", "name": "lookup", "args": CUT_OFF, "id": "bad-call-1",
            "error": "tool call cut off at the token limit"}])
    return AIMessage(content=f"ok ({len(messages)} messages)")


def test_invalid_tool_call_return_has_the_model_turn_as_parent(u):
    agent = create_agent(ScriptedChatModel(policy=cut_off_policy), [lookup, refund],
                         system_prompt="You are support.", middleware=[u.middleware()],
                         checkpointer=InMemorySaver())
    say(agent, "inv", "look at T1 please")
    out = say(agent, "inv", "and now?")
    assert out["messages"][-1].content.startswith("ok (")
    g = u.graph("inv")
    turns = g.of_type(ArtifactType.MODEL_TURN)
    first = turns[0]
    assert first.attrs.get("invalid_tool_calls") == 1
    assert "T1 4417-22" in (g.content(first.id) or "")  # what the model wrote is in its turn
    rets = [a for a in g.of_type(ArtifactType.TOOL_RETURN) if a.attrs.get("tool_call_id") == "bad-call-1"]
    assert len(rets) == 1, [a.attrs for a in g.of_type(ArtifactType.TOOL_RETURN)]
    ret = rets[0]
    assert first.id in ret.parents
    assert ret.source_ids == ("tool:lookup",) and ret.attrs["status"] == "error"
    # taint from the turn reaches the return, and the later turn that read it
    closure = g.taint(first.id)
    assert ret.id in closure and turns[-1].id in closure
    assert ret.id in g.manifest(turns[-1].id)


def test_valid_calls_still_hang_under_their_call(u):
    from tests.support.recording_agents import make_agent

    agent = make_agent(u, InMemorySaver())
    say(agent, "ok", "look at T1 please")
    g = u.graph("ok")
    ret = g.of_type(ArtifactType.TOOL_RETURN)[0]
    assert g.get(ret.parents[0]).type is ArtifactType.TOOL_CALL
