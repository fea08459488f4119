"""unsee on any LangGraph graph: a recorded chat model and a recorded ``ToolNode``.

``create_agent`` runs unsee through its middleware hooks. A graph written by
hand (a model node, a ``ToolNode``, ``tools_condition``, state keys of its
own) or made by ``langgraph.prebuilt.create_react_agent`` has no hooks; it
has a chat model and a tool node. This module gives both the same recording
and interception as the middleware, without changing the graph:

- :class:`RecordedChatModel` wraps a ``BaseChatModel``. Each call goes
  through :meth:`UnseeMiddleware.wrap_model_call` (prompt manifest, model
  turn, tool calls, the interceptors a replay or IFC install); the first call
  of a graph run begins the run's turn first (what ``before_agent`` does in
  ``create_agent``: the run's new inputs are recorded, the run's end is
  watched). ``bind_tools`` returns a recorded model again, so the model node
  keeps recording after binding.
- :func:`recorded_tool_node` is a ``ToolNode`` whose ``wrap_tool_call`` /
  ``awrap_tool_call`` are the middleware's: each tool call is recorded, and
  answered from the record, deferred or run during a replay.

A graph is recognised as recording through unsee (``discovery``) by either
part; a forget replays it only when every tool node of it records
(``plugins.forget.preflight.records_through_unsee``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import ConfigDict, Field

from .context import configurable, current_session, enclosing_graph
from .discovery import RECORDING_MIDDLEWARE_ATTR
from .errors import InvalidArgument
from .messages import ai_message_of

if TYPE_CHECKING:
    from langgraph.prebuilt import ToolNode

__all__ = ["RecordedChatModel", "recorded_tool_node"]

#: the recording middleware (``hooks.UnseeMiddleware``; not imported: it finds graphs through
#: ``discovery``, which knows this module's parts by ``RECORDING_MIDDLEWARE_ATTR``)
UnseeMiddleware = Any


# -- the run's turn ----------------------------------------------------------------------------
def _records_here() -> bool:
    """Whether this call is one to record: it runs in a node of a LangGraph run (every task
    config has a namespace), and not inside a model call unsee records already (the model of a
    ``create_agent`` that runs ``u.middleware()``: recorded once, by the middleware)."""
    from .recorder import current_scope

    return "checkpoint_ns" in configurable() and current_scope.get() is None


def _goes_on(st: Any) -> bool:
    """Whether the session's current graph run goes on from a checkpoint instead of taking new
    input: it was given ``None`` or a ``Command`` (``Command(resume=...)`` after an interrupt),
    or a call of it came before this one (a resumed run starting in its tool node). Such a run
    begins no turn, as ``create_agent`` skips ``before_agent`` for it: its calls are recorded
    as a resumed run's."""
    if st.watched:  # (a call of this run was recorded already without beginning a turn)
        return True
    from langgraph.types import Command

    from .run_inputs import run_inputs

    given = run_inputs().latest(st.session_id)
    return given is not None and (given.value is None or isinstance(given.value, Command))


def _node_state(prompt: Sequence[BaseMessage]) -> dict[str, Any]:
    """The graph state the running node started from, as far as LangGraph lets a node read it
    (the task's read function, the one conditional edges use); ``{"messages": prompt}`` where it
    does not."""
    read = configurable().get("__pregel_read")
    channels = getattr(read, "args", ())
    try:
        keys = [k for k in (channels[1] if len(channels) > 1 else ())
                if isinstance(k, str) and not k.startswith("__") and ":" not in k]
        state = read(keys) if keys else None
    except Exception:  # (an internal API: never fail a run for it)
        state = None
    if isinstance(state, dict) and isinstance(state.get("messages"), list):
        return dict(state)
    return {"messages": list(prompt)}


def _runtime() -> Any:
    try:
        from langgraph.runtime import get_runtime

        return get_runtime()
    except Exception:
        return None


def _split_system(messages: Sequence[BaseMessage]) -> tuple[SystemMessage | None, list[BaseMessage]]:
    """The leading system message (the prompt a node or ``create_react_agent(prompt=...)`` puts
    first) and the rest, as ``ModelRequest`` holds them."""
    msgs = list(messages)
    if msgs and isinstance(msgs[0], SystemMessage):
        return msgs[0], msgs[1:]
    return None, msgs


class RecordedChatModel(BaseChatModel):
    """A chat model whose calls unsee records and intercepts (module docstring).

    Made by ``Unsee.recorded_model(model)``. ``inner`` is what answers (the model, or
    what its ``bind_tools`` returned); ``base`` the model itself (its provider,
    tokenizer, ``bind_tools``); ``tools`` the tools bound (their declared effects are
    recorded with each call)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    inner: Any = Field(exclude=True)
    base: Any = Field(exclude=True)
    middleware: Any = Field(exclude=True)
    tools: list = Field(default_factory=list, exclude=True)

    @property
    def unsee_middleware(self) -> Any:
        """The middleware this model records through (``discovery.RECORDING_MIDDLEWARE_ATTR``)."""
        return self.middleware

    @classmethod
    def wrap(cls, model: Any, middleware: UnseeMiddleware) -> RecordedChatModel:
        if isinstance(model, RecordedChatModel):
            if model.middleware is not middleware:
                raise InvalidArgument("this model already records through another Unsee")
            return model
        if not isinstance(model, BaseChatModel):
            raise InvalidArgument(f"recorded_model() takes a LangChain chat model (a BaseChatModel), got "
                                  f"{type(model).__name__}; wrap the model before bind_tools()")
        # (no cache of its own: a call answered from LangChain's cache would not be recorded;
        # the model inside keeps whatever cache it has, and its answers are recorded)
        return cls(inner=model, base=model, middleware=middleware, cache=False)

    @property
    def _llm_type(self) -> str:
        return f"unsee-recorded:{getattr(self.base, '_llm_type', type(self.base).__name__)}"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return dict(getattr(self.base, "_identifying_params", {}) or {})

    def _get_ls_params(self, stop=None, **kwargs: Any):
        return self.base._get_ls_params(stop=stop, **kwargs)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> RecordedChatModel:
        """The model with ``tools`` bound, still recorded (the model's own ``bind_tools`` makes
        the binding; it binds the model itself, so binding again replaces the tools)."""
        return self.model_copy(update={"inner": self.base.bind_tools(tools, **kwargs), "tools": list(tools)})

    # -- a call ---------------------------------------------------------------------------------
    def _request(self, messages: list[BaseMessage], kwargs: dict[str, Any]) -> Any:
        from langchain.agents.middleware import ModelRequest

        system, rest = _split_system(messages)
        return ModelRequest(model=self.base, messages=rest, system_message=system, tools=list(self.tools),
                            state=_node_state(rest), runtime=_runtime(), model_settings=dict(kwargs))

    def _begins_turn(self) -> bool:
        """Whether this call begins the run's turn (``UnseeMiddleware._begin_turn``, what
        ``before_agent`` does): the first model call of a graph run that takes new input (no run
        of the session is open), or a call of a run nested in a recording one."""
        sid, _ = current_session()
        st = self.middleware.recorder.state(sid, self.base)
        if st.root is not None:
            # A graph run nested in a run of the thread that records now (one a recorded tool
            # invokes): the turn's beginning records its new messages as that run's nested input
            # (known messages are skipped, so later calls of it add nothing).
            return enclosing_graph() is not None
        return not _goes_on(st)

    @staticmethod
    def _result(response: Any) -> ChatResult:
        ai = ai_message_of(response)
        if ai is None:
            raise TypeError(f"the model call returned no AI message ({type(response).__name__})")
        return ChatResult(generations=[ChatGeneration(message=ai)])

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        # (the inner model runs with the node's config: its callbacks trace and stream the real
        # model's run; LangGraph's message stream keeps one message per id)
        if not _records_here():
            return self._result(self.inner.invoke(messages, stop=stop, **kwargs))
        from langchain.agents.middleware import ModelResponse

        request = self._request(messages, kwargs)
        if self._begins_turn():
            self.middleware._begin_turn(request.state, request.runtime)

        def call(req: Any) -> Any:
            return ModelResponse(result=[_ai(self.inner.invoke(_prompt(req), stop=stop, **kwargs))])

        return self._result(self.middleware.wrap_model_call(request, call))

    async def _agenerate(self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None,
                         **kwargs: Any) -> ChatResult:
        if not _records_here():
            return self._result(await self.inner.ainvoke(messages, stop=stop, **kwargs))
        from langchain.agents.middleware import ModelResponse

        request = self._request(messages, kwargs)
        if self._begins_turn():
            # in a worker thread, as ``abefore_agent``: waiting for the session's lease must not
            # hold the loop
            await asyncio.to_thread(self.middleware._begin_turn, request.state, request.runtime)

        async def call(req: Any) -> Any:
            return ModelResponse(result=[_ai(await self.inner.ainvoke(_prompt(req), stop=stop, **kwargs))])

        return self._result(await self.middleware.awrap_model_call(request, call))


def _prompt(request: Any) -> list[BaseMessage]:
    """What the model is shown for ``request`` (an interceptor may have changed its messages)."""
    return ([request.system_message] if request.system_message is not None else []) + list(request.messages)


def _ai(message: Any) -> AIMessage:
    if not isinstance(message, AIMessage):
        raise TypeError(f"the wrapped model answered {type(message).__name__}, not an AIMessage")
    return message


# -- tools ---------------------------------------------------------------------------------------
def recorded_tool_node(middleware: UnseeMiddleware, tools: Sequence[Any], **kwargs: Any) -> ToolNode:
    """A ``langgraph.prebuilt.ToolNode`` running ``tools`` through unsee's tool wrappers (module
    docstring). ``kwargs`` go to ``ToolNode`` (``name``, ``handle_tool_errors``,
    ``messages_key``...); a ``wrap_tool_call`` / ``awrap_tool_call`` of the caller's runs inside
    unsee's (unsee records what it returns, as for a middleware listed after unsee's)."""
    from langgraph.prebuilt import ToolNode

    inner_sync = kwargs.pop("wrap_tool_call", None)
    inner_async = kwargs.pop("awrap_tool_call", None)
    return ToolNode(tools, wrap_tool_call=_tool_wrapper(middleware, inner_sync),
                    awrap_tool_call=_atool_wrapper(middleware, inner_sync, inner_async), **kwargs)


def _tool_wrapper(middleware: UnseeMiddleware, inner: Callable | None) -> Callable:
    if inner is None:
        def wrapper(request: Any, execute: Callable) -> Any:
            return middleware.wrap_tool_call(request, execute)
    else:
        def wrapper(request: Any, execute: Callable) -> Any:
            return middleware.wrap_tool_call(request, lambda req: inner(req, execute))
    setattr(wrapper, RECORDING_MIDDLEWARE_ATTR, middleware)
    return wrapper


def _atool_wrapper(middleware: UnseeMiddleware, inner_sync: Callable | None, inner_async: Callable | None
                   ) -> Callable:
    async def wrapper(request: Any, execute: Callable) -> Any:
        if inner_async is not None:
            async def handler(req: Any) -> Any:
                return await inner_async(req, execute)
        elif inner_sync is not None:
            async def handler(req: Any) -> Any:
                # (the caller's sync wrapper calls a sync execute: run it in a thread, bridged back)
                loop = asyncio.get_running_loop()
                return await asyncio.to_thread(
                    inner_sync, req, lambda r: asyncio.run_coroutine_threadsafe(execute(r), loop).result())
        else:
            handler = execute
        return await middleware.awrap_tool_call(request, handler)

    setattr(wrapper, RECORDING_MIDDLEWARE_ATTR, middleware)
    return wrapper
