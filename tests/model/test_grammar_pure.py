"""Tool-call parsing, rendering, tool_choice and message conversion (pure)."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from unsee.plugins.model.chat_model import tool_call_id
from unsee.plugins.model.errors import GrammarError, ToolCallParseError
from unsee.plugins.model.grammar import (
    ToolSpec,
    build_grammar,
    normalize_tool_choice,
    parse_tool_calls,
    render_tool_call,
)
from unsee.plugins.model.prompting import to_chat_messages

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
                tool_call_id("t", 3, 0), tool_call_id("s", 3, 0, "other prompt")}) == 5


def test_messages_render_tools_and_calls():
    msgs = [
        SystemMessage("Be brief."),
        HumanMessage("2+3?"),
        AIMessage("", tool_calls=[{"name": "add", "args": {"a": 2, "b": 3}, "id": "c1"}]),
        ToolMessage("5", tool_call_id="c1"),
    ]
    out = to_chat_messages(msgs, TOOLS)
    assert [m["role"] for m in out] == ["system", "user", "assistant", "tool"]
    assert out[0]["content"].startswith("Be brief.") and "\nlookup(key: string): Look up a key\n" in out[0]["content"]
    assert out[2]["content"] == render_tool_call("add", {"a": 2, "b": 3})
    no_sys = to_chat_messages([HumanMessage("hi")], TOOLS)
    assert no_sys[0]["role"] == "system" and "add(a: integer, b: integer): Add" in no_sys[0]["content"]
    assert to_chat_messages([HumanMessage([{"type": "text", "text": "a"}, "b"])]) == [
        {"role": "user", "content": "ab"}
    ]


def test_cut_off_call_is_an_invalid_tool_call_not_text():
    from unsee.plugins.model.chat_model import LocalChatModel

    text = '<tool_call>\n{"name": "lookup", "arguments": {"key": "acc'
    msg = LocalChatModel._to_message(text, TOOLS, "s", 2, "length")
    assert msg.content == "" and not msg.tool_calls
    (bad,) = msg.invalid_tool_calls
    assert bad["name"] == "lookup" and bad["args"] == text and bad["id"] == tool_call_id("s", 2, 0)
    assert "token limit" in bad["error"]
    # re-templated as the model wrote it (the cache prefix stays reusable)
    out = to_chat_messages([HumanMessage("q"), msg], TOOLS)
    assert out[-1] == {"role": "assistant", "content": text}


def test_auto_processor_knows_when_a_call_started():
    import xgrammar as xgr

    # a byte-level vocabulary: ids 0-255 are bytes, 256 ends the turn
    vocab = [bytes([i]).decode("latin-1") for i in range(256)] + ["</s>"]
    info = xgr.TokenizerInfo(vocab, vocab_size=len(vocab), stop_token_ids=[256])
    from unsee.plugins.model.grammar import GrammarProcessor

    compiler = xgr.GrammarCompiler(info)
    call_start = frozenset([ord("<")])
    auto = GrammarProcessor(compiler.compile_grammar(build_grammar(TOOLS, "auto")), len(vocab),
                            mode="auto", call_start=call_start)
    auto.reset()
    assert not auto.must_finish()
    auto.accept(ord("<"))
    assert auto.must_finish()
    auto.reset()
    auto.accept(ord("H"))
    assert not auto.must_finish()  # a text answer may stop anywhere
    forced = GrammarProcessor(compiler.compile_grammar(build_grammar(TOOLS, "any")), len(vocab),
                              mode="call", call_start=call_start)
    forced.reset()
    assert forced.must_finish()
    for ch in render_tool_call("add", {"a": 1, "b": 2}).encode():
        forced.accept(ch)
    forced.accept(256)
    assert forced.is_terminated() and not forced.must_finish()


def test_jump_forward_uses_the_tokenizers_own_split():
    """Forced text is fed as the tokenizer splits it (never a split the model
    was not trained on, like a lone space before a string's opening quote)."""
    import xgrammar as xgr

    from unsee.plugins.model.grammar import GrammarProcessor

    merged = ' "'
    vocab = [bytes([i]).decode("latin-1") for i in range(256)] + [merged, "</s>"]
    eos = len(vocab) - 1

    class Tok:
        def encode(self, text, add_special_tokens=False):
            out, i = [], 0
            while i < len(text):
                if text.startswith(merged, i):
                    out.append(256)
                    i += 2
                else:
                    out.append(ord(text[i]))
                    i += 1
            return out

        def decode(self, ids):
            return "".join(vocab[i] for i in ids if i != eos)

    info = xgr.TokenizerInfo(vocab, vocab_size=len(vocab), stop_token_ids=[eos])
    compiled = xgr.GrammarCompiler(info).compile_grammar(build_grammar(TOOLS[:1], "lookup"))
    proc = GrammarProcessor(compiled, len(vocab), mode="call", tokenizer=Tok())
    proc.reset()
    fed = []
    while (token := proc.forced_token()) is not None:
        proc.accept(token)
        fed.append(token)
    header = '<tool_call>\n{"name": "lookup", "arguments": {"key": "'
    assert Tok().decode(fed) == header and fed == Tok().encode(header) and 256 in fed
    assert proc.must_finish()


def test_a_loop_inside_a_string_argument_is_closed():
    """Three copies of the same run of free tokens inside a call: the next
    token may only close the string; the call is then completed as usual."""
    import torch
    import xgrammar as xgr

    from unsee.plugins.model.grammar import GrammarProcessor

    vocab = [bytes([i]).decode("latin-1") for i in range(256)] + ["</s>"]
    eos = 256
    info = xgr.TokenizerInfo(vocab, vocab_size=len(vocab), stop_token_ids=[eos])
    compiled = xgr.GrammarCompiler(info).compile_grammar(build_grammar(TOOLS[:1], "lookup"))
    proc = GrammarProcessor(compiled, len(vocab), mode="call", quote_start=frozenset([ord('"')]))
    proc.reset()
    for ch in '<tool_call>\n{"name": "lookup", "arguments": {"key": "':
        proc.accept(ord(ch))  # the header (as if forced; the test feeds it by hand)
    proc._free.clear()
    prefers_ab = torch.full((len(vocab),), -5.0)
    for ch in "ab_ab_ab_":
        logits = prefers_ab.clone()
        logits[ord(ch)] = 5.0
        out = proc([], logits)
        assert int(out.argmax()) == ord(ch)  # no loop yet: the model's choice stands
        proc.accept(ord(ch))
    logits = prefers_ab.clone()
    logits[ord("a")] = 5.0
    out = proc([], logits)
    assert int(out.argmax()) == ord('"') and proc.loops_closed == 1
    assert torch.isinf(out[ord("a")])
