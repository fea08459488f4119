"""LangChain messages → chat-template messages (pure functions).

SmolLM2's ChatML template has no tool support, so tools are described in the
system message and tool calls/results are rendered as text in the same form
the grammar makes the model write them (so a re-templated conversation shares
the longest possible token prefix with the cache).
"""

from __future__ import annotations

import json
from typing import Any, Sequence

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from .grammar import ToolSpec, render_tool_call, tools_system_prompt

DEFAULT_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"


def content_text(content: Any) -> str:
    """Text of a message content (string or list of content blocks)."""
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content or []:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
    return "".join(parts)


def to_chat_messages(
    messages: Sequence[BaseMessage], tools: Sequence[ToolSpec] | None = None
) -> list[dict[str, str]]:
    """Convert LangChain messages for ``tokenizer.apply_chat_template``."""
    out: list[dict[str, str]] = []
    for msg in messages:
        if isinstance(msg, SystemMessage):
            out.append({"role": "system", "content": content_text(msg.content)})
        elif isinstance(msg, HumanMessage):
            out.append({"role": "user", "content": content_text(msg.content)})
        elif isinstance(msg, AIMessage):
            text = content_text(msg.content)
            calls = [render_tool_call(c["name"], c.get("args") or {}) for c in msg.tool_calls]
            # An invalid call (cut off at the hard cap) is rendered as the model wrote it.
            calls += [c["args"] for c in msg.invalid_tool_calls or [] if isinstance(c.get("args"), str)]
            out.append({"role": "assistant", "content": text + "\n".join(calls)})
        elif isinstance(msg, ToolMessage):
            out.append({"role": "tool", "content": content_text(msg.content)})
        elif isinstance(msg, ChatMessage):
            out.append({"role": msg.role, "content": content_text(msg.content)})
        else:
            out.append({"role": "user", "content": content_text(msg.content)})
    return inject_tools(out, tools) if tools else out


def inject_tools(messages: Sequence[dict[str, str]], tools: Sequence[ToolSpec]) -> list[dict[str, str]]:
    """Describe ``tools`` in the system message (added when there is none)."""
    out = [dict(m) for m in messages]
    block = tools_system_prompt(tools)
    if out and out[0]["role"] == "system":
        out[0] = {"role": "system", "content": f"{out[0]['content']}\n\n{block}"}
    else:
        out.insert(0, {"role": "system", "content": f"{DEFAULT_SYSTEM}\n\n{block}"})
    return out


def stable_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


__all__ = ["DEFAULT_SYSTEM", "content_text", "inject_tools", "stable_json", "to_chat_messages"]
