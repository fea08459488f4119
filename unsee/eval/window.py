"""A view-only context window: the model sees the last few user turns, the state keeps them all.

The common way to bound a long session's prompt without a summary
(``request.override(messages=...)`` in ``wrap_model_call``). Placed *before*
``u.middleware()`` in the middleware list, it is outer to unsee's recording,
so each model turn's provenance is the window the model saw: a later turn
whose window no longer holds anything derived from a target is independent
of it, and B7 re-materialises it (the replay's resync, docs/forget.md)
instead of decoding it again. Placed after,
unsee records the whole state as the prompt (sound, but every later turn
then depends on everything before it).
"""

from __future__ import annotations

from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import HumanMessage


class RecentTurns(AgentMiddleware):
    """The model sees the messages from the ``turns``-th last user message on."""

    def __init__(self, turns: int):
        if not isinstance(turns, int) or turns < 1:
            raise ValueError(f"turns must be a positive integer, got {turns!r}")
        super().__init__()
        self.turns = turns

    def _cut(self, request: Any) -> Any:
        msgs = request.messages
        starts = [i for i, m in enumerate(msgs) if isinstance(m, HumanMessage)]
        if len(starts) <= self.turns:
            return request
        return request.override(messages=msgs[starts[-self.turns]:])

    def wrap_model_call(self, request, handler):
        return handler(self._cut(request))

    async def awrap_model_call(self, request, handler):
        return await handler(self._cut(request))
