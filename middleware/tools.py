"""What the recording core reads off a tool and writes on a tool message.

A tool declares its effect in ``tool.metadata["unsee.effect"]``
(:data:`EFFECT_KEY`); the recording middleware reads it back with
:func:`effect_of` and records it as an opaque string (``read``, ``write``,
``external``: the set and its meaning belong to the sandbox's call ledger,
and the tools that declare it are made by :mod:`unsee.plugins.tools`).

A tool call that was answered without running its tool (blocked by IFC,
deferred during a replay) is marked with :func:`not_executed`; the recorder
writes ``executed: false`` for it (:func:`was_executed`).
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import ToolMessage

__all__ = ["EFFECT_KEY", "NOT_EXECUTED_KEY", "effect_of", "not_executed", "was_executed"]

EFFECT_KEY = "unsee.effect"
#: mark on a ToolMessage that answers a call whose tool never ran (blocked, deferred)
NOT_EXECUTED_KEY = "unsee_not_executed"


def effect_of(tool: Any) -> str | None:
    """The declared effect of a tool (``None`` when undeclared)."""
    meta = getattr(tool, "metadata", None) or {}
    value = meta.get(EFFECT_KEY)
    return value if isinstance(value, str) and value else None


def not_executed(content: str, tool_call_id: str | None, name: str | None, by: str) -> ToolMessage:
    """An error tool message for a call whose tool did not run; ``by`` says who stopped it.

    The recorder writes ``executed: false`` on the tool return, so replay never
    takes the call for a fired side effect (nothing to de-duplicate or orphan).
    """
    return ToolMessage(content=content, tool_call_id=tool_call_id, name=name, status="error",
                       additional_kwargs={NOT_EXECUTED_KEY: by})


def was_executed(message: Any) -> bool:
    """False for a message made by :func:`not_executed`."""
    return not (getattr(message, "additional_kwargs", None) or {}).get(NOT_EXECUTED_KEY)
