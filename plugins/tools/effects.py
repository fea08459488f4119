"""Declare a tool's effect and route its execution through the call ledger.

Every tool an unsee agent uses declares what it does to the world:

``read``      observes only (re-executed or served from the record on replay)
``write``     changes the sandbox (restorable; re-executed against the
              restored shadow on replay)
``external``  reaches outside (mail, payments, HTTP): goes through the
              ledger's outbox, so it fires at most once (a forget's replay
              de-duplicates or defers it before it reaches the tool)
``state``     updates the agent's own graph state (returns a ``Command``):
              run again by a replay; a declaration only (``declare_effect``
              without a ledger), since the ledger routes no state update

A tool that declares nothing is given an effect from what it is (MCP
annotations, a ``Command`` return, a middleware that adds it), else treated as
external: :func:`unsee.middleware.tools.effect_basis`.

The declaration lives in ``tool.metadata["unsee.effect"]`` (the recording
middleware reads exactly that key; :func:`~unsee.middleware.tools.effect_of`
reads it back).

    from unsee.plugins.tools import unsee_tool, sandbox_command_tool

    @unsee_tool(effect="external", ledger=ledger)
    def send_email(to: str, body: str) -> str:
        '''Send an e-mail.'''
        ...

    grep = sandbox_command_tool("grep", "Search files", "grep -rn {pattern} .",
                                env=env, effect="read")

Ledger routing: with a ``ledger`` every call goes through
:meth:`unsee.sandbox.ledger.Ledger.run` under the session id of the current
LangGraph run (``configurable.thread_id``; ``"default"`` outside a graph).
What the tool returns per outcome: the value when fired/executed; the
recorded (JSON-decoded) value when deduplicated; an in-doubt or failed record
raises :class:`~unsee.sandbox.errors.CallInDoubt` /
:class:`~unsee.sandbox.errors.CallFailed` (fail closed: the agent must not
assume a side effect did or did not happen).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import inspect
import shlex
import string
from typing import Any, Callable, Literal, Union

from langchain_core.tools import BaseTool, StructuredTool
from langchain_core.tools.base import create_schema_from_function
from pydantic import BaseModel, create_model

from unsee.middleware.context import logical_session
from unsee.middleware.tools import EFFECT_KEY, STATE
from unsee.sandbox import EFFECTS, Effect, Environment, ExecResult, Ledger

from .compensation import CompensateArg, declaration

__all__ = ["declare_effect", "unsee_tool", "sandbox_command_tool", "current_session_id", "ledger_bypassed"]

#: set while a reconciliation runs a tool under a ledger row of its own (keyed by the forget
#: event): the tool's own routing must not take a second row, whose id would be derived from
#: the arguments and could answer from a call of the original world instead of running
_bypass: contextvars.ContextVar[bool] = contextvars.ContextVar("unsee_ledger_bypassed", default=False)


@contextlib.contextmanager
def ledger_bypassed():
    """Inside it, tools made here call their function directly: the caller holds the call's ledger
    row (a reconciliation's ``Ledger.run_once``)."""
    token = _bypass.set(True)
    try:
        yield
    finally:
        _bypass.reset(token)

#: parameter names the wrapper injects (excluded from the model-facing schema)
_INJECTED = ("env",)

EnvSource = Union[Environment, Callable[[], Environment]]


def _check_effect(effect: str, state: bool = False) -> None:
    """``state``: the effect may also be ``state`` (a declaration only: the ledger routes none)."""
    if effect not in EFFECTS and not (state and effect == STATE):
        allowed = (*EFFECTS, STATE) if state else EFFECTS
        raise ValueError(f"effect must be one of {allowed}, not {effect!r}")


def _resolve_env(env: EnvSource) -> Environment:
    """``env`` itself, or the environment a zero-argument callable returns now."""
    return env() if callable(env) and not isinstance(env, Environment) else env  # type: ignore[return-value]


def current_session_id() -> str:
    """The session of the run we are in (a replay's logical session), else ``"default"``."""
    return logical_session()


def _route(
    ledger: Ledger | None, tool_name: str, effect: str, args: dict[str, Any], call: Callable[[], Any],
    session: str | None,
) -> Any:
    if ledger is None or _bypass.get():
        return call()
    outcome = ledger.run(session or current_session_id(), tool_name, args, call, effect=effect)  # type: ignore[arg-type]
    return outcome.unwrap()


def declare_effect(
    tool: BaseTool, effect: Effect | Literal["state"], *, ledger: Ledger | None = None, session: str | None = None,
    compensate: CompensateArg = None, idempotent: bool = False,
) -> BaseTool:
    """Declare the effect of an existing LangChain tool.

    ``compensate``: how to undo one of its calls (a callable ``(args, result)`` or a tool;
    :mod:`.compensation`), run by a reconciliation for a call the original world fired and a
    forget's counterfactual did not make; ``idempotent``: calling it again with the same
    arguments does nothing more (an MCP tool's ``idempotentHint`` says the same).

    Without a ledger the tool itself is updated (its metadata gains
    ``unsee.effect``) and returned. With a ledger a new tool with the same
    name, description, argument schema (a pydantic model or a JSON schema, as
    MCP tools have) and metadata (an MCP tool's annotations included) is
    returned whose calls go through the ledger (external effects: the outbox).
    The copy runs the way the tool does: a tool with no synchronous form (every
    MCP tool) gets a copy with none either, to be called with ``ainvoke``.
    """
    _check_effect(effect, state=ledger is None)
    declared = {EFFECT_KEY: effect, **declaration(effect, compensate, idempotent)}
    if ledger is None:
        tool.metadata = {**(tool.metadata or {}), **declared}
        return tool
    inner = tool

    def run(**kwargs: Any) -> Any:
        return _route(ledger, inner.name, effect, kwargs, lambda: inner.invoke(kwargs), session)

    async def arun(**kwargs: Any) -> Any:
        loop = asyncio.get_running_loop()

        def call() -> Any:
            return asyncio.run_coroutine_threadsafe(inner.ainvoke(kwargs), loop).result()

        return await asyncio.to_thread(_route, ledger, inner.name, effect, kwargs, call, session)

    schema = inner.args_schema
    keeps_schema = isinstance(schema, (type, dict))  # (a JSON schema: the arguments go through as given)
    sync = not (isinstance(inner, StructuredTool) and inner.func is None)
    return StructuredTool.from_function(
        func=run if sync else None,
        coroutine=arun,
        name=inner.name,
        description=inner.description,
        args_schema=schema if keeps_schema else None,
        infer_schema=not keeps_schema,
        return_direct=inner.return_direct,
        metadata={**(inner.metadata or {}), **declared},
        tags=list(inner.tags or []),
    )


def unsee_tool(
    func: Callable[..., Any] | None = None,
    *,
    effect: Effect,
    ledger: Ledger | None = None,
    env: EnvSource | None = None,
    name: str | None = None,
    description: str | None = None,
    session: str | None = None,
    return_direct: bool = False,
    compensate: CompensateArg = None,
    idempotent: bool = False,
) -> Any:
    """Turn a function into a LangChain tool that declares ``effect``.

    ``compensate`` and ``idempotent``: as :func:`declare_effect` takes them.

    Usable as ``@unsee_tool(effect="read")`` or ``unsee_tool(fn, effect=...)``.
    When ``env`` is given (an Environment or a zero-argument callable that
    returns one, e.g. to point replay at a shadow), a parameter named ``env``
    receives it and is hidden from the model. ``session`` overrides the
    LangGraph thread id. Coroutine functions are supported.
    """
    _check_effect(effect)
    metadata = {EFFECT_KEY: effect, **declaration(effect, compensate, idempotent)}

    def wrap(fn: Callable[[], Any]) -> BaseTool:
        tool_name = name or fn.__name__
        params = inspect.signature(fn).parameters
        wants_env = "env" in params
        if wants_env and env is None:
            raise TypeError(f"{tool_name}: the function takes `env` but no env= was given")
        schema = create_schema_from_function(tool_name, fn, filter_args=list(_INJECTED))
        desc = description or inspect.getdoc(fn) or tool_name

        def bind(kwargs: dict[str, Any]) -> dict[str, Any]:
            if wants_env:
                return {**kwargs, "env": _resolve_env(env)}  # type: ignore[arg-type]
            return kwargs

        if inspect.iscoroutinefunction(fn):

            async def acall(**kwargs: Any) -> Any:
                loop = asyncio.get_running_loop()

                def call() -> Any:
                    return asyncio.run_coroutine_threadsafe(fn(**bind(kwargs)), loop).result()

                if ledger is None:
                    return await fn(**bind(kwargs))
                return await asyncio.to_thread(_route, ledger, tool_name, effect, kwargs, call, session)

            functools.update_wrapper(acall, fn)
            return StructuredTool.from_function(
                coroutine=acall, name=tool_name, description=desc, args_schema=schema,
                infer_schema=False, return_direct=return_direct, metadata=dict(metadata),
            )

        def call_sync(**kwargs: Any) -> Any:
            return _route(ledger, tool_name, effect, kwargs, lambda: fn(**bind(kwargs)), session)

        functools.update_wrapper(call_sync, fn)
        return StructuredTool.from_function(
            func=call_sync, name=tool_name, description=desc, args_schema=schema,
            infer_schema=False, return_direct=return_direct, metadata=dict(metadata),
        )

    return wrap(func) if func is not None else wrap


def sandbox_command_tool(
    name: str,
    description: str,
    template: str,
    env: EnvSource,
    effect: Effect = "write",
    *,
    ledger: Ledger | None = None,
    timeout: float | None = 60.0,
    session: str | None = None,
) -> BaseTool:
    """A tool that runs a shell command in a sandbox environment.

    ``template`` is a ``str.format`` string; each ``{field}`` becomes a string
    argument of the tool and is shell-quoted when substituted
    (``"grep -rn {pattern} {path}"``). The tool returns stdout, followed by
    stderr and ``[exit N]`` when the command fails.
    """
    _check_effect(effect)
    fields = [f for _, f, _, _ in string.Formatter().parse(template) if f]
    for f in fields:
        if not f.isidentifier():
            raise ValueError(f"template field {f!r} must be a plain name")
    unique = list(dict.fromkeys(fields))
    schema: type[BaseModel] = create_model(  # type: ignore[call-overload]
        f"{name}_args", **{f: (str, ...) for f in unique}
    )
    schema.__doc__ = description

    def execute(kwargs: dict[str, Any]) -> str:
        cmd = template.format(**{k: shlex.quote(str(v)) for k, v in kwargs.items()})
        return _render(_resolve_env(env).exec(cmd, timeout=timeout))

    def run(**kwargs: Any) -> str:
        return _route(ledger, name, effect, kwargs, lambda: execute(kwargs), session)

    return StructuredTool.from_function(
        func=run, name=name, description=description, args_schema=schema, infer_schema=False,
        metadata={EFFECT_KEY: effect, "unsee.command_template": template},
    )


def _render(res: ExecResult) -> str:
    out = res.stdout.decode("utf-8", "replace")
    if res.exit_code == 0:
        return out
    err = res.stderr.decode("utf-8", "replace")
    return f"{out}{err}[exit {res.exit_code}]"
