"""``tool_choice="auto"`` and tool calls that outrun ``max_tokens``, on the real CPU model.

The prompts here were not used to pick the system prompt or the decision
threshold (those were tuned on another set, docs/model.md).
"""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from unsee.plugins.model import LocalChatModel

pytestmark = pytest.mark.model


@tool
def lookup_ticket(ticket_id: str) -> str:
    """Look up a support ticket by id (e.g. T-1001)."""
    return f"Ticket {ticket_id}: the printer on floor 3 is jammed; status open."


@tool
def issue_refund(order_id: str, amount: float) -> str:
    """Issue a refund for an order."""
    return f"Refund of {amount:.2f} EUR issued for order {order_id}."


@tool
def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    return f"{city}: 18 C, light rain."


@tool
def save_note(note: str) -> str:
    """Save a note to the customer's case file."""
    return "Case note saved."


TOOLS = [lookup_ticket, issue_refund, get_weather]
BY_NAME = {t.name: t for t in TOOLS + [save_note]}

#: (prompt, the tool it names): ten explicit requests, varied wording.
EXPLICIT = [
    ("Use the lookup_ticket tool to look up ticket T-1001", "lookup_ticket"),
    ("Please run lookup_ticket for T-8812 and tell me what it says.", "lookup_ticket"),
    ("Could you check ticket T-4400 with lookup_ticket?", "lookup_ticket"),
    ("lookup_ticket T-3141 please", "lookup_ticket"),
    ("Use issue_refund to refund order 7781 for 49.90.", "issue_refund"),
    ("Call the issue_refund tool: order 5520, amount 12.5.", "issue_refund"),
    ("Refund order 1234 (amount 30) with the issue_refund tool.", "issue_refund"),
    ("Use get_weather to find the weather in Lisbon.", "get_weather"),
    ("Check the weather in Oslo using the get_weather tool.", "get_weather"),
    ("get_weather for Nairobi, please.", "get_weather"),
]
CHIT_CHAT = [
    "Thanks, that's all.",
    "Good morning! How is your day going?",
    "You've been very helpful, bye!",
    "What does a support agent do?",
]


def _valid(call: dict) -> bool:
    try:
        BY_NAME[call["name"]].args_schema.model_validate(call["args"], strict=True)
    except Exception:
        return False
    return True


@pytest.fixture()
def auto_model(cpu_runtime):
    # the demo's setting: a short max_tokens
    return LocalChatModel(runtime=cpu_runtime, max_tokens=64)


def test_auto_calls_the_named_tool_when_asked(auto_model, capsys):
    bound = auto_model.bind_tools(TOOLS)  # tool_choice "auto", as in the README
    hits, rows = 0, []
    for i, (prompt, name) in enumerate(EXPLICIT):
        reply = bound.invoke([HumanMessage(prompt)], session=f"auto-{i}")
        d = reply.response_metadata["unsee"]["tool_decision"]
        ok = (len(reply.tool_calls) == 1 and reply.tool_calls[0]["name"] == name
              and _valid(reply.tool_calls[0]) and not reply.invalid_tool_calls)
        hits += ok
        rows.append(f"{'call' if ok else 'MISS'} {d['score']:6.2f} {prompt!r} -> "
                    f"{reply.tool_calls or reply.content!r}")
    texts, chat_rows = 0, []
    for i, prompt in enumerate(CHIT_CHAT):
        reply = bound.invoke([HumanMessage(prompt)], session=f"chat-{i}")
        d = reply.response_metadata["unsee"]["tool_decision"]
        is_text = not reply.tool_calls and not reply.invalid_tool_calls and bool(reply.content)
        texts += is_text
        chat_rows.append(f"{'text' if is_text else 'CALL'} {d['score']:6.2f} {prompt!r}")
    with capsys.disabled():
        print(f"\nauto tool calls: {hits}/{len(EXPLICIT)} explicit prompts; "
              f"text answers: {texts}/{len(CHIT_CHAT)} chit-chat prompts")
        print("\n".join(rows + chat_rows))
    assert hits >= 9, rows
    assert texts >= 3, chat_rows


def test_create_agent_with_auto_calls_then_answers(auto_model):
    """The README path: create_agent(model, tools), no routing middleware."""
    from langchain.agents import create_agent

    agent = create_agent(auto_model, TOOLS, system_prompt="You are a support agent.")
    config = {"configurable": {"thread_id": "auto-agent"}, "recursion_limit": 10}
    out = agent.invoke({"messages": [HumanMessage("Use the lookup_ticket tool to look up ticket T-1001")]},
                       config)
    msgs = out["messages"]
    calls = [c for m in msgs if isinstance(m, AIMessage) for c in m.tool_calls]
    assert calls and calls[0]["name"] == "lookup_ticket" and calls[0]["args"] == {"ticket_id": "T-1001"}
    assert any(isinstance(m, ToolMessage) and "jammed" in str(m.content) for m in msgs)
    final = msgs[-1]
    assert isinstance(final, AIMessage) and not final.tool_calls and final.content  # then answers in text


NOTE = ("Customer called about order 7781: the parcel arrived damaged, the box was crushed and two "
        "of the three mugs inside were broken. She wants a replacement rather than a refund and asked "
        "us to call her back on Monday morning before ten.")


@pytest.mark.parametrize("choice", ["save_note", "any"])
def test_tool_call_is_completed_past_max_tokens(cpu_runtime, choice):
    model = LocalChatModel(runtime=cpu_runtime, max_tokens=8)
    bound = model.bind_tools([save_note, lookup_ticket], tool_choice=choice)
    reply = bound.invoke([HumanMessage(f"Use the save_note tool to save this note: {NOTE}")],
                         session=f"long-{choice}")
    assert not reply.invalid_tool_calls, reply
    (call,) = reply.tool_calls
    assert call["name"] == "save_note" and _valid(call)
    assert len(model.get_token_ids(call["args"]["note"])) > 8  # longer than max_tokens on its own
    meta = reply.response_metadata["unsee"]
    assert meta["decoded_tokens"] > 8 and reply.response_metadata["finish_reason"] != "length"
    assert meta["offset_end"] == model.pool.runtime(f"long-{choice}").length


def test_tool_call_cut_at_the_hard_cap_is_invalid_not_text(cpu_runtime):
    model = LocalChatModel(runtime=cpu_runtime, max_tokens=4, tool_call_overrun=6)
    bound = model.bind_tools([save_note], tool_choice="save_note")
    reply = bound.invoke([HumanMessage(f"Save this note: {NOTE}")], session="capped")
    assert reply.content == "" and not reply.tool_calls
    (bad,) = reply.invalid_tool_calls
    assert bad["args"].startswith("<tool_call>") and "token limit" in bad["error"]
    assert reply.response_metadata["unsee"]["decoded_tokens"] == 10


def test_auto_decision_is_deterministic_and_keeps_counters(auto_model):
    bound = auto_model.bind_tools(TOOLS)
    msgs = [HumanMessage("Use get_weather to find the weather in Lisbon.")]
    first = bound.invoke(msgs, session="det")
    counters = auto_model.session_counters("det")
    meta = first.response_metadata["unsee"]
    assert counters["prefilled"] == meta["prefilled_tokens"] == meta["prompt_tokens"]
    assert counters["decoded"] == meta["decoded_tokens"] and counters["scored"] > 0
    auto_model.restore("det", meta["offset_start"])
    again = bound.invoke(msgs, session="det")
    assert again.tool_calls == first.tool_calls
    assert again.response_metadata["unsee"]["tool_decision"] == meta["tool_decision"]
