"""Tool-call parsing, rendering, tool_choice and message conversion (pure)."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from unsee.plugins.replay.chat_model import tool_call_id
from unsee.plugins.replay.errors import GrammarError, ToolCallParseError
from unsee.plugins.replay.grammar import (
    ToolSpec,
    build_grammar,
    normalize_tool_choice,
    parse_tool_calls,
    render_tool_call,
)
from unsee.plugins.replay.prompting import to_chat_messages

TOOLS = [
    ToolSpec("lookup", "Look up a key", {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]}),
    ToolSpec("add", "Add", {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}),
]


def test_render_parse_roundtrip():
    text = render_tool_call("add", {"a": 1, "b": 2})
    assert text == '<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n</tool_call>'
    (call,) = parse_tool_calls(text, TOOLS)
    assert call.name == "add" and call.arguments == {"a": 1, "b": 2}


@pytest.mark.parametrize(
    "bad",
    [
        '<tool_call>\n{"name": "nope", "arguments": {}}\n</tool_call>',
        '<tool_call>\n{"name": "add", "arguments": {"a": 1',
        '<tool_call>\n{"name": "add", "arguments": [1]}\n</tool_call>',
        "<tool_call>\nnot json\n</tool_call>",
    ],
)
def test_parse_rejects_invalid_calls(bad):
    with pytest.raises(ToolCallParseError):
        parse_tool_calls(bad, TOOLS)


def test_tool_choice_normalization():
    assert normalize_tool_choice(None, TOOLS) == "auto"
    assert normalize_tool_choice("required", TOOLS) == "any"
    assert normalize_tool_choice(True, TOOLS) == "any"
    assert normalize_tool_choice("add", TOOLS) == "add"
    assert normalize_tool_choice({"type": "function", "function": {"name": "lookup"}}, TOOLS) == "lookup"
    with pytest.raises(GrammarError):
        normalize_tool_choice("missing", TOOLS)


def test_grammar_builds_for_each_choice():
    for choice in ("auto", "any", "add"):
        assert "tool_call" in str(build_grammar(TOOLS, choice))
    assert "[^<]" in str(build_grammar(TOOLS, "auto"))
    assert "[^<]" not in str(build_grammar(TOOLS, "any"))
    assert "lookup" not in str(build_grammar(TOOLS, "add"))


def test_tool_call_ids_are_deterministic():
    assert tool_call_id("s", 3, 0) == tool_call_id("s", 3, 0)
    assert len({tool_call_id("s", 3, 0), tool_call_id("s", 3, 1), tool_call_id("s", 4, 0),
                tool_call_id("t", 3, 0)}) == 4


def test_messages_render_tools_and_calls():
    msgs = [
        SystemMessage("Be brief."),
        HumanMessage("2+3?"),
        AIMessage("", tool_calls=[{"name": "add", "args": {"a": 2, "b": 3}, "id": "c1"}]),
        ToolMessage("5", tool_call_id="c1"),
    ]
    out = to_chat_messages(msgs, TOOLS)
    assert [m["role"] for m in out] == ["system", "user", "assistant", "tool"]
    assert out[0]["content"].startswith("Be brief.") and '"lookup"' in out[0]["content"]
    assert out[2]["content"] == render_tool_call("add", {"a": 2, "b": 3})
    no_sys = to_chat_messages([HumanMessage("hi")], TOOLS)
    assert no_sys[0]["role"] == "system" and "<tools>" in no_sys[0]["content"]
    assert to_chat_messages([HumanMessage([{"type": "text", "text": "a"}, "b"])]) == [
        {"role": "user", "content": "ab"}
    ]
