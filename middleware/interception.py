"""Extension points for interceptors (replay, IFC) — the middleware knows only this protocol.

An interceptor is installed for one session (LangGraph thread) and sees each
model call and tool call *inside* the recording: whatever it returns is
recorded as that call's result. Interceptors fail closed: their errors
propagate to the agent run (unlike the recorder's own, which fail open).
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class Interceptor(Protocol):
    def model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any: ...

    def tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any: ...


class InterceptorRegistry:
    """session id -> interceptor; global ones apply to every session."""

    def __init__(self) -> None:
        self._by_session: dict[str, Interceptor] = {}
        self._global: list[Interceptor] = []
        self._lock = threading.Lock()

    def install(self, session_id: str, interceptor: Interceptor) -> None:
        with self._lock:
            self._by_session[session_id] = interceptor

    def remove(self, session_id: str) -> None:
        with self._lock:
            self._by_session.pop(session_id, None)

    def add_global(self, interceptor: Interceptor) -> None:
        with self._lock:
            self._global.append(interceptor)

    def chain(self, session_id: str) -> list[Interceptor]:
        with self._lock:
            own = self._by_session.get(session_id)
            return [*self._global, *([own] if own is not None else [])]


def compose(chain: list[Interceptor], method: str, request: Any, handler: Callable[[Any], Any]) -> Any:
    """Call ``handler`` through each interceptor's ``method`` (first is outermost)."""
    call = handler
    for icpt in reversed(chain):
        fn = getattr(icpt, method)
        call = (lambda f, nxt: (lambda req: f(req, nxt)))(fn, call)
    return call(request)


async def acompose(chain: list[Interceptor], method: str, request: Any,
                   handler: Callable[[Any], Awaitable[Any]]) -> Any:
    """Async twin: an interceptor may define ``a<method>``; else its sync one runs in a thread."""
    import asyncio

    call = handler
    for icpt in reversed(chain):
        afn = getattr(icpt, "a" + method, None)
        if afn is not None:
            call = (lambda f, nxt: (lambda req: f(req, nxt)))(afn, call)
        else:
            fn = getattr(icpt, method)
            loop = asyncio.get_running_loop()

            def wrap(f, nxt):
                async def run(req):
                    # the sync interceptor may call the async handler: bridge it back to the loop
                    def sync_next(r):
                        return asyncio.run_coroutine_threadsafe(nxt(r), loop).result()

                    return await asyncio.to_thread(f, req, sync_next)

                return run

            call = wrap(fn, call)
    return await call(request)
