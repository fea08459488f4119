"""Steering a small local model's tool use: a router middleware.

A 135M-parameter model does not reliably decide *whether* to call a tool; it
can write a call's arguments under the tool's JSON schema (constrained
decoding). ``ToolRouter(intend)`` makes the decision from the request instead:
after a user message that ``intend(text)`` maps to a tool, the model must call
that tool; after a tool result, or a request that needs none, it must answer
in text. The demo and ``unsee eval forgetting --model local`` use it.
"""

from __future__ import annotations

from collections.abc import Callable

from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import HumanMessage


class ToolRouter(AgentMiddleware):
    """``intend(user text) -> tool name | None`` decides each model call's ``tool_choice``."""

    def __init__(self, intend: Callable[[str], str | None]):
        super().__init__()
        self.intend = intend

    def _route(self, request):
        last = request.messages[-1] if request.messages else None
        if isinstance(last, HumanMessage) and (name := self.intend(str(last.content))):
            return request.override(tool_choice=name)
        return request.override(tool_choice="none")

    def wrap_model_call(self, request, handler):
        return handler(self._route(request))

    async def awrap_model_call(self, request, handler):
        return await handler(self._route(request))
