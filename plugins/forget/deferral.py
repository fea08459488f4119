"""A deferred call answered where its tool would run, not ahead of the agent's other middleware.

unsee's middleware may sit outside others that act on tool calls: a classifier that blocks a
risky call (``AutoModeMiddleware``), a limit, a retry. In the counterfactual run they see the
call before its tool would run, and may answer it themselves. So a replay that defers an
external call does not answer it at unsee's layer: it passes the call on down the chain with
its tool replaced by :class:`DeferredTool`, a stand-in that answers "not executed" only if the
call reaches it (and only then counts as deferred). What the inner middleware answers instead
(a block) is what the counterfactual observes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool
from pydantic import ConfigDict


class DeferredTool(BaseTool):
    """Stands in for ``original`` during a replay: answers with ``answer`` and calls
    ``reached()`` when a call gets this far (module docstring)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    answer: ToolMessage
    reached: Callable[[], None]

    @classmethod
    def of(cls, original: BaseTool, answer: ToolMessage, reached: Callable[[], None]) -> "DeferredTool":
        return cls(name=original.name, description=original.description or original.name,
                   args_schema=original.args_schema, answer=answer, reached=reached,
                   metadata=dict(original.metadata or {}))

    def _run(self, *args: Any, **kwargs: Any) -> ToolMessage:
        self.reached()
        return self.answer

    async def _arun(self, *args: Any, **kwargs: Any) -> ToolMessage:
        self.reached()
        return self.answer


def deferred_request(request: Any, answer: ToolMessage, reached: Callable[[], None]) -> Any | None:
    """``request`` with its tool replaced by a :class:`DeferredTool`; None when it has no tool
    (a name the agent does not know: nothing inside would run it)."""
    tool = getattr(request, "tool", None)
    if not isinstance(tool, BaseTool):
        return None
    return request.override(tool=DeferredTool.of(tool, answer, reached))
