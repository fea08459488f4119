"""``StepProgress``: a middleware that tells a person what a slow agent is doing.

A local model on a CPU takes seconds per model call, and a forget replays
several of them. Without a word on screen a demo looks hung. This middleware
prints one line per model call and tool call (with its duration) and, on a
terminal, shows a spinner while the step runs. Steps of a replay (they run in
the scratch thread of a forget) are marked ``replay``.

It only observes: it never changes a request or a response, and an error in
printing never reaches the agent.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from rich.console import Console

from unsee.middleware.context import configurable
from unsee.plugins.forget import is_scratch_thread

log = logging.getLogger("unsee.progress")


def _in_replay() -> bool:
    return is_scratch_thread(str(configurable().get("thread_id") or ""))


def describe_model_result(response: Any) -> str:
    """'decoded 31 tokens' | 're-materialised from the record' | '' from a model response."""
    messages = getattr(response, "result", None) or []
    ai = messages[-1] if messages else None
    meta = (getattr(ai, "response_metadata", None) or {}).get("unsee") or {}
    if meta.get("rematerialised"):
        return "re-materialised by prefill (its prompt never saw the target)"
    parts = []
    if meta.get("decoded_tokens") is not None:
        parts.append(f"decoded {meta['decoded_tokens']} tokens")
    if meta.get("reused_tokens"):
        parts.append(f"{meta['reused_tokens']} reused from the cache")
    calls = [c.get("name") for c in (getattr(ai, "tool_calls", None) or [])]
    if calls:
        parts.append("calls " + ", ".join(map(str, calls)))
    return ", ".join(parts)


class StepProgress(AgentMiddleware):
    """Prints ``  · model: decoded 31 tokens, calls lookup_ticket (4.2 s)`` per step."""

    def __init__(self, console: Console, *, what: str = "model"):
        super().__init__()
        self.console = console
        self.what = what

    @property
    def name(self) -> str:
        return "StepProgress"

    @contextlib.contextmanager
    def _step(self, label: str) -> Iterator[dict]:
        prefix = "replay " if _in_replay() else ""
        info: dict = {"detail": ""}
        t0 = time.monotonic()
        status = (self.console.status(f"{prefix}{label}...", spinner="dots") if self.console.is_terminal
                  else contextlib.nullcontext())
        with status:
            yield info
        try:
            detail = f": {info['detail']}" if info["detail"] else ""
            self.console.print(f"  [dim]· {prefix}{label}{detail} ({time.monotonic() - t0:.1f} s)[/]",
                               highlight=False)
        except Exception:  # an observer never breaks the agent
            log.debug("progress line failed", exc_info=True)

    def wrap_model_call(self, request, handler):
        with self._step(self.what) as info:
            response = handler(request)
            info["detail"] = describe_model_result(response)
        return response

    async def awrap_model_call(self, request, handler):
        with self._step(self.what) as info:
            response = await handler(request)
            info["detail"] = describe_model_result(response)
        return response

    def wrap_tool_call(self, request, handler):
        with self._step(f"tool {request.tool_call.get('name')}"):
            return handler(request)

    async def awrap_tool_call(self, request, handler):
        with self._step(f"tool {request.tool_call.get('name')}"):
            return await handler(request)
