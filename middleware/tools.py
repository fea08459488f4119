"""What the recording core reads off a tool and writes on a tool message.

A tool declares its effect in ``tool.metadata["unsee.effect"]``
(:data:`EFFECT_KEY`); the recording middleware reads it back with
:func:`effect_of` and records it as a string: ``read``, ``write``,
``external`` (the call ledger's effects, declared by the tools
:mod:`unsee.plugins.tools` makes) or ``state``.

A tool that declares nothing gets its effect from what it is
(:func:`effect_basis`):

- an MCP tool (``langchain-mcp-adapters`` puts the server's annotations in
  the tool's metadata): ``readOnlyHint`` -> ``read``; ``destructiveHint`` or
  ``openWorldHint`` -> ``external``;
- a tool whose function is annotated to return a LangGraph ``Command`` (a
  handoff, ``write_todos``), or one a middleware or harness of its agent adds
  (:mod:`.harness`): ``state`` -- it works on the agent's own state, so a
  replay runs it again for its update to happen in the counterfactual run;
- anything else: ``None``, undeclared, which every consumer treats as
  ``external`` (the safe default: never fired twice).

``state`` is the replay's, not the call ledger's: it names a graph-state
update, which a replay re-applies by running the tool, not a side effect the
ledger routes.

A tool call that was answered without running its tool (blocked by IFC,
deferred during a replay) is marked with :func:`not_executed`; the recorder
writes ``executed: false`` for it (:func:`was_executed`).
"""

from __future__ import annotations

import inspect
from typing import Any, get_origin

from langchain_core.messages import ToolMessage
from langgraph.types import Command

from .harness import is_harness_tool

__all__ = ["COMPENSATE_KEY", "EFFECT_KEY", "IDEMPOTENT_KEY", "NOT_EXECUTED_KEY", "STATE", "declared_effect", "effect_basis", "effect_of",
           "idempotent", "not_executed", "returns_command", "was_executed"]

EFFECT_KEY = "unsee.effect"
#: a tool's compensator (how to undo one of its calls; ``unsee.plugins.tools.Compensator``)
COMPENSATE_KEY = "unsee.compensate"
#: a tool that says calling it again with the same arguments does nothing more
IDEMPOTENT_KEY = "unsee.idempotent"
#: the effect of a tool that updates the agent's graph state (module docstring)
STATE = "state"
#: mark on a ToolMessage that answers a call whose tool never ran (blocked, deferred)
NOT_EXECUTED_KEY = "unsee_not_executed"


def declared_effect(tool: Any) -> str | None:
    """The effect the tool declares in its metadata (``None`` when it declares none)."""
    meta = getattr(tool, "metadata", None) or {}
    value = meta.get(EFFECT_KEY)
    return value if isinstance(value, str) and value else None


def _mcp_effect(meta: dict) -> str | None:
    if meta.get("readOnlyHint") is True:
        return "read"
    if meta.get("destructiveHint") is True or meta.get("openWorldHint") is True:
        return "external"
    return None


def returns_command(tool: Any) -> bool:
    """Whether the tool's function is annotated to return a LangGraph ``Command``."""
    for fn in (getattr(tool, "func", None), getattr(tool, "coroutine", None)):
        if fn is None:
            continue
        ann = getattr(inspect.unwrap(fn), "__annotations__", {}).get("return")
        if ann is None:
            continue
        if isinstance(ann, str):
            if ann == "Command" or ann.startswith("Command[") or ann.endswith(".Command"):
                return True
        elif (get_origin(ann) or ann) is Command:
            return True
    return False


def effect_basis(tool: Any) -> tuple[str | None, str]:
    """(effect, where it comes from): ``declared``, ``mcp`` (annotations), ``command`` (returns
    a ``Command``), ``harness`` (a middleware of its agent adds it) or ``assumed`` (undeclared:
    effect ``None``, treated as external)."""
    declared = declared_effect(tool)
    if declared is not None:
        return declared, "declared"
    if tool is None:
        return None, "assumed"
    meta = getattr(tool, "metadata", None) or {}
    mcp = _mcp_effect(meta) if isinstance(meta, dict) else None
    if mcp is not None:
        return mcp, "mcp"
    if returns_command(tool):
        return STATE, "command"
    if is_harness_tool(tool):
        return STATE, "harness"
    return None, "assumed"


def effect_of(tool: Any) -> str | None:
    """The effect of a tool: declared, else inferred (module docstring); ``None`` when neither."""
    return effect_basis(tool)[0]


def idempotent(tool: Any) -> bool:
    """Whether the tool says calling it again with the same arguments does nothing more (declared
    with ``idempotent=True``, or an MCP tool's ``idempotentHint``)."""
    meta = getattr(tool, "metadata", None) or {}
    return isinstance(meta, dict) and (meta.get(IDEMPOTENT_KEY) is True or meta.get("idempotentHint") is True)


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
