"""The counterfactual observation: the target removed, one way everywhere.

``sanitize`` works on text, ``sanitize_value`` on a JSON-able value (a store
item, tool arguments, structured message content: every string in it, keys
included), ``sanitize_message`` on a LangChain message (content and tool call
arguments; the id and everything else kept, so ``add_messages`` replaces it).
The replay (o_tau without z), the editing baselines (B3, B6) and the store
overlay all use these.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def sanitize(text: str, target: str, replacement: str = "") -> str:
    """``text`` with every occurrence of ``target`` removed (or replaced by ``replacement``)."""
    return text.replace(target, replacement)


def sanitize_value(value: Any, target: str, replacement: str = "",
                   keep: Callable[[Any], bool] | None = None) -> Any:
    """A copy of a JSON-able value with ``target`` removed from every string (keys included).

    Lists and tuples come back as lists (as a JSON round trip gives them);
    other scalars are returned as they are. ``keep``: the parts left as they are (a name, such
    as a reference to a recorded artifact, that a short target can be a part of).
    """
    if keep is not None and keep(value):
        return value
    if isinstance(value, str):
        return sanitize(value, target, replacement)
    if isinstance(value, dict):
        return {(sanitize(k, target, replacement) if isinstance(k, str) else k):
                sanitize_value(v, target, replacement, keep) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [sanitize_value(v, target, replacement, keep) for v in value]
    return value


def sanitize_message(message: Any, target: str) -> Any:
    """A copy of a LangChain message without ``target`` in its content or tool call arguments."""
    update: dict[str, Any] = {"content": sanitize_value(message.content, target)}
    tool_calls = getattr(message, "tool_calls", None)
    if tool_calls:
        update["tool_calls"] = [{**tc, "args": sanitize_value(tc["args"], target)} for tc in tool_calls]
    return message.model_copy(update=update)
