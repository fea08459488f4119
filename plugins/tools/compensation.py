"""How to undo one call of a tool: its compensator, declared with the tool.

A compensator undoes what one call of an external tool did in the world (``issue_refund`` ->
``reverse_refund``, ``send_email`` -> a recall or a correction). A reconciliation runs it for a
call the original world fired and the counterfactual did not make (an *orphaned* side effect),
exactly once (the call ledger's ``compensation`` rows).

It is given the original call's arguments and result **as the forget's report shows them**:
without the forgotten target (removed from the arguments, replaced by its keyed hash mark
``[erased hmac-sha256:...]`` in the result). A compensator never sees the target; it identifies
what to undo by what the call returned (a payment id, a message id) or by its other arguments.

Two forms:

- a callable ``fn(args: dict, result) -> Any`` (``async def`` too);
- a LangChain tool, invoked with the original arguments its schema accepts, plus ``result``
  when its schema has a field of that name.

The declaration lives in ``tool.metadata["unsee.compensate"]`` (:data:`COMPENSATE_KEY`) as a
:class:`Compensator`, which is a ``str`` (its name) so that tracers that serialise a tool's
metadata write its name and nothing else.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any, Callable

from langchain_core.tools import BaseTool

from unsee.middleware.tools import COMPENSATE_KEY, IDEMPOTENT_KEY

__all__ = ["Compensator", "compensator", "compensator_of", "tool_arguments"]


class Compensator(str):
    """A compensator: its name (the ``str`` value) and what runs it.

    ``fn``: the callable or tool; ``idempotent``: running it twice does nothing more than once
    (a reconciliation that died while it ran may then run it again instead of reporting it in
    doubt)."""

    fn: Any
    idempotent: bool

    def __new__(cls, name: str, fn: Any, idempotent: bool = False) -> "Compensator":
        self = super().__new__(cls, name)
        self.fn = fn
        self.idempotent = bool(idempotent)
        return self

    def __reduce__(self) -> Any:  # (copies keep what runs it)
        return (Compensator, (str(self), self.fn, self.idempotent))

    def __repr__(self) -> str:
        return f"Compensator({str(self)!r}{', idempotent' if self.idempotent else ''})"

    @property
    def is_async_only(self) -> bool:
        """True when it can only be awaited (a coroutine function, a tool without a sync form)."""
        fn = self.fn
        if isinstance(fn, BaseTool):
            return getattr(fn, "func", True) is None and getattr(fn, "coroutine", None) is not None
        return inspect.iscoroutinefunction(fn)

    def call(self, args: dict[str, Any], result: Any) -> Any:
        """Run it (synchronously; a coroutine function runs on a loop of its own)."""
        fn = self.fn
        if isinstance(fn, BaseTool):
            return fn.invoke(tool_arguments(fn, args, result))
        value = fn(args, result)
        if inspect.isawaitable(value):
            return asyncio.run(_awaited(value))
        return value

    async def acall(self, args: dict[str, Any], result: Any) -> Any:
        """Run it from an event loop (a sync callable runs in a worker thread)."""
        fn = self.fn
        if isinstance(fn, BaseTool):
            return await fn.ainvoke(tool_arguments(fn, args, result))
        if inspect.iscoroutinefunction(fn):
            return await fn(args, result)
        value = await asyncio.to_thread(fn, args, result)
        return await value if inspect.isawaitable(value) else value


async def _awaited(value: Any) -> Any:
    return await value


def tool_arguments(tool: BaseTool, args: dict[str, Any], result: Any) -> dict[str, Any]:
    """What a compensating tool is invoked with: the original arguments its schema accepts, and
    ``result`` when it has a field of that name (a tool without a schema gets them all)."""
    fields = _fields(tool)
    if fields is None:
        return {**args, "result": result}
    out = {k: v for k, v in args.items() if k in fields}
    if "result" in fields:
        out["result"] = result
    return out


def _fields(tool: BaseTool) -> set[str] | None:
    schema = tool.args_schema
    if isinstance(schema, dict):
        props = schema.get("properties")
        return set(props) if isinstance(props, dict) else None
    model_fields = getattr(schema, "model_fields", None)
    return set(model_fields) if isinstance(model_fields, dict) else None


def compensator(value: Any, *, idempotent: bool | None = None) -> Compensator:
    """``value`` as a :class:`Compensator`: one already (``idempotent`` overrides its flag when
    given), a LangChain tool (its name; idempotent when it declares so), or a callable (its
    ``__name__``). ``TypeError`` for anything else."""
    from unsee.middleware.tools import idempotent as declares_idempotent

    if isinstance(value, Compensator):
        return value if idempotent is None else Compensator(str(value), value.fn, idempotent)
    if isinstance(value, BaseTool):
        flag = declares_idempotent(value) if idempotent is None else idempotent
        return Compensator(value.name, value, flag)
    if callable(value):
        name = getattr(value, "__name__", None) or type(value).__name__
        return Compensator(str(name), value, bool(idempotent))
    raise TypeError(f"compensate= takes a callable (args, result) or a LangChain tool, not {type(value).__name__}")


def compensator_of(tool: Any) -> Compensator | None:
    """The compensator a tool declares (None: it declares none)."""
    meta = getattr(tool, "metadata", None) or {}
    value = meta.get(COMPENSATE_KEY) if isinstance(meta, dict) else None
    return value if isinstance(value, Compensator) else None


def declaration(effect: str, compensate: Any, idempotent: bool) -> dict[str, Any]:
    """The metadata a tool made with ``compensate=`` and ``idempotent=`` carries. Only an
    ``external`` effect is compensated (a forget restores the sandbox and the agent's state
    itself): ``ValueError`` otherwise."""
    meta: dict[str, Any] = {}
    if compensate is not None and effect != "external":
        raise ValueError(f"compensate= is for effect='external' tools (a forget restores what a {effect!r} "
                         "tool changed)")
    if compensate is not None:
        meta[COMPENSATE_KEY] = compensator(compensate)
    if idempotent:
        meta[IDEMPOTENT_KEY] = True
    return meta


#: a compensator as ``compensate=`` takes it
CompensateArg = Callable[[dict[str, Any], Any], Any] | BaseTool | Compensator | None
