"""What a scripted policy reads off the messages it is given: the last user turn, and the
results of the tool calls that just returned (the trailing run of ``ToolMessage``\\ s)."""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage


def last_human(messages: Sequence[BaseMessage]) -> str:
    """The text of the last user message ("" when there is none)."""
    return next((str(m.content) for m in reversed(messages) if isinstance(m, HumanMessage)), "")


def trailing_results(messages: Sequence[BaseMessage]) -> list[str]:
    """The contents of the trailing tool messages, in the order they came."""
    out = []
    for m in reversed(messages):
        if not isinstance(m, ToolMessage):
            break
        out.append(str(m.content))
    return list(reversed(out))
