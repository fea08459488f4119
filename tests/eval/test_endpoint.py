"""``openai_chat_model`` (the chat model of ``--model openai --base-url URL``): refusing an
endpoint that does not answer, and LangChain's ``ChatOpenAI`` against unsee's own
OpenAI-compatible server (unsee/openai_server.py) serving the local CPU model."""

import os
import threading
from pathlib import Path

import openai
import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from tests.support.endpoint_server import serve

from unsee.middleware.errors import InvalidArgument
from unsee.eval.endpoint import PLACEHOLDER_KEY, EndpointUnreachable, api_key, openai_chat_model

NAME = "smollm2-135m-instruct"


@tool
def lookup(ticket: str) -> str:
    """Look up a support ticket by its id."""
    return f"{ticket}: parcel delayed, refund pending"


@pytest.mark.parametrize("url", ["http://127.0.0.1:9/v1", "ftp://127.0.0.1/v1", "localhost:8000/v1", ""])
def test_unreachable_endpoint_is_refused_fast(url, monkeypatch):
    monkeypatch.setenv("UNSEE_OPENAI_API_KEY", "sk-test-do-not-print")
    with pytest.raises(EndpointUnreachable) as err:
        openai_chat_model(url)
    assert isinstance(err.value, InvalidArgument)  # the CLI's exit 2
    assert repr(url) in str(err.value) and "do-not-print" not in str(err.value)


def test_non_2xx_answer_is_refused():
    server, url = serve(None)  # GET needs no model
    try:
        with pytest.raises(EndpointUnreachable, match="HTTP 404"):
            openai_chat_model(url.replace("/v1", "/nowhere"))
    finally:
        server.shutdown()
        server.server_close()


def test_api_key_order(monkeypatch):
    monkeypatch.delenv("UNSEE_OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert api_key() == PLACEHOLDER_KEY
    monkeypatch.setenv("OPENAI_API_KEY", "sk-b")
    assert api_key() == "sk-b"
    monkeypatch.setenv("UNSEE_OPENAI_API_KEY", "sk-a")
    assert api_key() == "sk-a"


@pytest.mark.model
def test_chat_openai_against_the_local_server(endpoint):
    model = openai_chat_model(endpoint, max_tokens=16)
    assert model.model_name == NAME  # the first (only) id the server lists
    ai = model.invoke("say hi")
    assert isinstance(ai, AIMessage) and isinstance(ai.content, str) and ai.content
    assert ai.usage_metadata["input_tokens"] > 0 and 0 < ai.usage_metadata["output_tokens"] <= 16
    # content as a list of parts; with a seed, sampling is reproducible
    sampled = openai_chat_model(endpoint, max_tokens=8, temperature=0.9, seed=7)
    parts = [HumanMessage([{"type": "text", "text": "Name a colour."}])]
    assert sampled.invoke(parts).content == sampled.invoke(parts).content


@pytest.mark.model
def test_forced_tool_call_and_tool_round_trip(endpoint):
    model = openai_chat_model(endpoint, max_tokens=32)
    ai = model.bind_tools([lookup], tool_choice="lookup").invoke("look up T1")
    assert [c["name"] for c in ai.tool_calls] == ["lookup"] and isinstance(ai.tool_calls[0]["args"]["ticket"], str)
    assert ai.response_metadata["finish_reason"] == "tool_calls"
    # the history goes back as an assistant message with content null + tool_calls and a tool message
    history = [HumanMessage("look up T1"), ai, ToolMessage(lookup.invoke(ai.tool_calls[0]["args"]),
                                                          tool_call_id=ai.tool_calls[0]["id"])]
    after = model.bind_tools([lookup], tool_choice="none").invoke(history)
    assert isinstance(after, AIMessage) and not after.tool_calls and after.content


@pytest.mark.model
def test_create_agent_runs_over_the_endpoint(endpoint):
    from langchain.agents import create_agent

    agent = create_agent(openai_chat_model(endpoint, max_tokens=32), [lookup],
                         system_prompt="You help with support tickets.")
    # tool_choice "auto": this request scores ~6 nats for a call against the local model's
    # threshold of 4 (a bare "look up T1" sits at 4.02, too close to rely on)
    out = agent.invoke({"messages": [HumanMessage("Use the lookup tool to look up ticket T1.")]})["messages"]
    calls = [c for m in out if isinstance(m, AIMessage) for c in m.tool_calls]
    results = [m for m in out if isinstance(m, ToolMessage)]
    assert [c["name"] for c in calls] == ["lookup"] and "T1" in calls[0]["args"]["ticket"]
    assert [r.tool_call_id for r in results] == [calls[0]["id"]] and "refund pending" in results[0].content
    assert isinstance(out[-1], AIMessage) and not out[-1].tool_calls  # the answer after the tool result


@pytest.mark.model
def test_refused_requests(endpoint):
    client = openai.OpenAI(base_url=endpoint, api_key=PLACEHOLDER_KEY, max_retries=0)
    hi = [{"role": "user", "content": "hi"}]
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
    unbound = {"type": "function", "function": {"name": "nope"}}
    for extra in ({"stream": True}, {"n": 2}, {"tools": tools, "tool_choice": unbound}):
        with pytest.raises(openai.BadRequestError):
            client.chat.completions.create(model=NAME, messages=hi, max_tokens=4, **extra)
