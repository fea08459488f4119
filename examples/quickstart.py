"""Quickstart: record a LangChain agent with unsee, look at the provenance of a
secret, forget it, and go on from the counterfactual state.

    python examples/quickstart.py            # scripted model (instant)
    python examples/quickstart.py --local    # the local CPU model (a few minutes)
"""

import sys
import tempfile

from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from unsee import RevocationEvent, Unsee
from unsee.demo import SECRET, ToolRouting, support_policy
from unsee.plugins.model import ScriptedChatModel

u = Unsee(home=tempfile.mkdtemp(prefix="unsee-quickstart-"))


@u.tool(effect="read")
def lookup_ticket(ticket_id: str) -> str:
    """Look up a support ticket by id (e.g. T-1001)."""
    return f"Ticket {ticket_id}: blender arrived broken. Payment card on file {SECRET}."


local = "--local" in sys.argv
model = u.chat_model(max_tokens=64) if local else ScriptedChatModel(policy=support_policy)
agent = create_agent(
    model,
    [lookup_ticket],
    system_prompt="You are a support agent. Use lookup_ticket to read tickets.",
    middleware=([ToolRouting()] if local else []) + [u.middleware()],   # one line: u.middleware()
    checkpointer=InMemorySaver(),
)
cfg = {"configurable": {"thread_id": "t1"}}
for text in ["Please look up ticket T-1001.", "Thanks! Anything else on file?"]:
    print("user> ", text)
    print("agent>", agent.invoke({"messages": [HumanMessage(text)]}, cfg)["messages"][-1].content)

g = u.graph("t1")
hit = g.locate(SECRET)
print(f"\nthe secret entered at step {hit.step} via {hit.artifact_type.value} from {hit.source_ids}; "
      f"{len(g.taint(hit))} artifacts depend on it")

report = u.forget("t1", RevocationEvent(target=SECRET, reason="user revoked"))
print(f"forgot it: {report.model_turns_decoded} turns decoded, {report.model_turns_rematerialised} re-materialised, "
      f"committed={report.committed}")
out = agent.invoke({"messages": [HumanMessage("Which card is on file?")]}, cfg)
print("agent>", out["messages"][-1].content)
assert all(SECRET not in str(m.content) for m in out["messages"])
u.close()
