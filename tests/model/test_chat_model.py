"""LocalChatModel on the CPU model: prefix reuse, seeding, tool calls, agents."""

from __future__ import annotations

import asyncio
from typing import Literal

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool

from unsee.plugins.model import LocalChatModel
from unsee.plugins.model.sampling import seed_for

pytestmark = pytest.mark.model


@tool
def lookup(key: str) -> str:
    """Look up the value stored under a key (account numbers, names, codes)."""
    return "4417-2231" if "account" in key.lower() else "unknown"


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def set_alarm(hour: int, period: Literal["am", "pm"]) -> str:
    """Set an alarm."""
    return f"alarm set for {hour} {period}"


TOOLS = [lookup, add, set_alarm]


def _strict_valid(name: str, args: dict) -> None:
    schema_tool = {t.name: t for t in TOOLS}[name]
    schema_tool.args_schema.model_validate(args, strict=True)
    props = schema_tool.tool_call_schema.model_json_schema()["properties"]
    assert set(args) <= set(props)


def test_ten_turn_session_reuses_prefix_with_exact_counters(chat_model):
    msgs = [SystemMessage("You are a terse assistant.")]
    stateless = 0
    for turn in range(10):
        msgs.append(HumanMessage(f"Turn {turn}: say a word about number {turn}."))
        rt = chat_model.pool.runtime("ten")
        before = rt.tokens
        prompt = chat_model.prompt_tokens(msgs)
        reply = chat_model.invoke(msgs, session="ten", max_tokens=5)
        meta = reply.response_metadata["unsee"]
        common = next((i for i, (a, b) in enumerate(zip(before, prompt)) if a != b),
                      min(len(before), len(prompt)))
        assert meta["reused_tokens"] == min(common, len(prompt) - 1)
        assert meta["reused_tokens"] + meta["prefilled_tokens"] == meta["prompt_tokens"] == len(prompt)
        assert meta["offset_start"] == len(prompt)
        assert meta["offset_end"] == len(prompt) + meta["decoded_tokens"] == rt.length
        assert meta["cache_handle"] == f"ten@{meta['offset_end']}"
        assert meta["step"] == len(msgs) and meta["seed"] == seed_for("ten", len(msgs))
        assert reply.usage_metadata["input_token_details"]["cache_read"] == meta["reused_tokens"]
        stateless += len(prompt)
        msgs.append(reply)
    c = chat_model.session_counters("ten")
    assert c["prefilled"] * 5 <= stateless, (c, stateless)
    assert c["reused"] + c["prefilled"] == stateless


def test_restore_and_sampled_replay(cpu_runtime):
    model = LocalChatModel(runtime=cpu_runtime, temperature=0.9, max_tokens=8)
    msgs = [HumanMessage("Name three colours.")]
    first = model.invoke(msgs, session="smp")
    offset = first.response_metadata["unsee"]["offset_start"]
    other = model.invoke(msgs, session="smp", unsee_step=99)
    model.restore("smp", offset)
    again = model.invoke(msgs, session="smp")
    assert again.content == first.content
    assert other.response_metadata["unsee"]["seed"] != first.response_metadata["unsee"]["seed"]
    step_cfg = model.invoke(msgs, config={"configurable": {"thread_id": "cfg", "unsee_step": 99}})
    assert step_cfg.response_metadata["unsee"]["session"] == "cfg"
    assert step_cfg.response_metadata["unsee"]["step"] == 99


def test_count_tokens_matches_tokenizer(chat_model):
    text = "unsee forgets without restarting"
    assert chat_model.count_tokens(text) == len(chat_model.runtime.tokenize(text))
    assert chat_model.get_num_tokens(text) == chat_model.count_tokens(text)


PROMPTS = [
    "What is the account number? Look it up.",
    "Add 17 and 25.",
    "Wake me up at 7 in the morning.",
    "Look up the code for the front door.",
    "What is 3 plus 4?",
    "Set an alarm for 9 pm.",
    "Find the name stored under 'manager'.",
    "Hi! How are you today?",
    "Tell me a joke.",
    "Please look up the account number.",
]
N_FORCED = 7


def test_constrained_tool_calls_are_always_valid(chat_model):
    forced = chat_model.bind_tools(TOOLS, tool_choice="any")
    auto = chat_model.bind_tools(TOOLS)
    n_calls, ids = 0, set()
    for i, q in enumerate(PROMPTS):
        runnable = forced if i < N_FORCED else auto
        reply = runnable.invoke([HumanMessage(q)], session="tools", max_tokens=40)
        assert not reply.invalid_tool_calls, reply
        if i < N_FORCED:
            assert len(reply.tool_calls) == 1, reply
        for j, call in enumerate(reply.tool_calls):
            _strict_valid(call["name"], call["args"])
            assert call["id"].startswith("call_") and call["id"] not in ids  # (one prompt's, never another's)
            ids.add(call["id"])
            n_calls += 1
        if not reply.tool_calls:
            assert isinstance(reply.content, str) and reply.content
    assert n_calls >= N_FORCED
    again = forced.invoke([HumanMessage(PROMPTS[0])], session="tools", max_tokens=40)
    assert again.tool_calls[0]["id"] in ids  # the same prompt gives the same id (a replay's)
    # a named tool_choice forces that tool
    named = chat_model.bind_tools(TOOLS, tool_choice="set_alarm")
    reply = named.invoke([HumanMessage("Add 2 and 2.")], session="tools", max_tokens=40)
    assert [c["name"] for c in reply.tool_calls] == ["set_alarm"]
    _strict_valid("set_alarm", reply.tool_calls[0]["args"])


def test_async_matches_sync(chat_model):
    msgs = [HumanMessage("Say hello.")]
    sync = chat_model.invoke(msgs, session="sync", max_tokens=6)
    async_ = asyncio.run(chat_model.ainvoke(msgs, session="async", max_tokens=6))
    assert async_.content == sync.content


def test_eviction_rebuilds_by_prefill(cpu_runtime):
    model = LocalChatModel(runtime=cpu_runtime, max_tokens=5, token_budget=60)
    msgs = [HumanMessage("Count to three.")]
    a1 = model.invoke(msgs, session="ev-a")
    model.invoke([HumanMessage("Name a fruit.")], session="ev-b")
    assert model.pool.runtime("ev-a").length == 0  # evicted (LRU, over budget)
    a2 = model.invoke(msgs, session="ev-a")
    assert a2.content == a1.content
    assert a2.response_metadata["unsee"]["reused_tokens"] == 0
    assert model.session_counters("ev-a")["evictions"] == 1


def test_create_agent_calls_a_tool(cpu_runtime):
    from langchain.agents import create_agent
    from langchain.agents.middleware import wrap_model_call

    chat_model = LocalChatModel(runtime=cpu_runtime, max_tokens=48)

    @wrap_model_call
    def call_tool_first(request, handler):
        used = any(isinstance(m, ToolMessage) for m in request.messages)
        return handler(request.override(tool_choice="none" if used else "lookup"))

    agent = create_agent(
        model=chat_model,
        tools=[lookup],
        system_prompt="Answer using the lookup tool.",
        middleware=[call_tool_first],
    )
    config = {"configurable": {"thread_id": "agent-1"}, "recursion_limit": 8}
    result = agent.invoke({"messages": [HumanMessage("What is the account number?")]}, config)
    msgs = result["messages"]
    tool_msgs = [m for m in msgs if isinstance(m, ToolMessage)]
    assert tool_msgs and tool_msgs[0].name == "lookup"
    calls = [c for m in msgs if isinstance(m, AIMessage) for c in m.tool_calls]
    assert calls and calls[0]["name"] == "lookup" and isinstance(calls[0]["args"]["key"], str)
    final = msgs[-1]
    assert isinstance(final, AIMessage) and not final.tool_calls and final.content
    assert final.response_metadata["unsee"]["session"] == "agent-1"
    assert chat_model.session_counters("agent-1")["reused"] > 0
