"""The end of an agent run, from LangChain's callbacks instead of an ``after_agent`` node.

An ``after_agent`` hook is a LangGraph node: a superstep of its own in every
run, paid whether the hook does anything or not (``bench_peers``' reference
row). The graph's run already tells its end to every callback handler:
LangGraph calls ``on_chain_end`` (or ``on_chain_error``) of the graph's run
once the graph is done — after its last checkpoint is written, which is later
and so safer for the run lease than any node.

:class:`RunEndWatcher` is one process-wide handler, added to every callback
manager LangChain configures (``register_configure_hook``: how LangChain's own
run collector is installed). It ignores every event but a chain's end or
error, and for those it does two dictionary look-ups:

1. a hook that runs inside a node of the graph (``before_agent``, a model or
   tool call) asks :meth:`watch` with the node's run id (the parent run of the
   callback manager the node hands down) and a function to call at the end;
2. when that node's run ends, its end event names its parent: the graph's run
   (LangGraph makes every node's run a child of the graph's), which is then
   watched;
3. when the graph's run ends or fails, the functions are called (once each),
   with the error or None.

So nothing is kept per event, only per watched run. The functions are
observers: what they raise is logged, never raised into LangChain.
"""

from __future__ import annotations

import contextvars
import logging
import threading
from collections.abc import Callable
from typing import Any
from uuid import UUID

log = logging.getLogger("unsee.run_end")

#: what a watcher calls at the graph run's end: the error it failed with, or None
OnEnd = Callable[[BaseException | None], None]
#: watched node runs whose end has not been seen after this many: the oldest are dropped
MAX_PENDING = 4096


def node_run_id() -> UUID | None:
    """The run id of the LangGraph node the caller runs in (the parent run of the callback
    manager the node's config carries); None outside a graph or without callbacks."""
    try:
        from langgraph.config import get_config

        manager = get_config().get("callbacks")
    except (RuntimeError, ImportError):
        return None
    return getattr(manager, "parent_run_id", None)


class RunEndWatcher:
    """Calls the functions registered for a graph run when that run ends (see the module)."""

    # BaseCallbackHandler's flags: LangChain skips a handler whose ignore_<kind> is True for
    # that kind of event, so only chain events reach this one; run inline (also under
    # an async manager: no executor hop).
    ignore_llm = ignore_chat_model = ignore_retriever = ignore_agent = ignore_retry = True
    ignore_custom_event = True
    ignore_chain = False
    raise_error = False
    run_inline = True

    def __init__(self) -> None:
        #: node run id -> functions, until the node's run ends (and names the graph's run)
        self._nodes: dict[UUID, list[OnEnd]] = {}
        #: graph run id -> functions, until the graph's run ends
        self._graphs: dict[UUID, list[OnEnd]] = {}
        self._lock = threading.Lock()

    def watch(self, node_run: UUID, on_end: OnEnd) -> None:
        """Call ``on_end`` once the graph run that ``node_run`` (a node's run) belongs to ends."""
        with self._lock:
            if len(self._nodes) >= MAX_PENDING:  # ends never seen (a node run outside a graph)
                for key in list(self._nodes)[: MAX_PENDING // 2]:
                    del self._nodes[key]
            self._nodes.setdefault(node_run, []).append(on_end)

    def watching(self) -> int:
        """Runs watched now (nodes not ended yet, and graphs): for tests and diagnostics."""
        return len(self._nodes) + len(self._graphs)

    # -- the callback handler's interface (duck-typed: LangChain calls these by name) ---
    def _ended(self, run_id: UUID, parent_run_id: UUID | None, error: BaseException | None) -> None:
        if run_id in self._nodes:
            with self._lock:
                fns = self._nodes.pop(run_id, None)
                if fns and parent_run_id is not None:
                    self._graphs.setdefault(parent_run_id, []).extend(fns)
                    return
            if fns:  # a node run without a parent: it was the whole run
                _call(fns, error)
            return
        if run_id in self._graphs:
            with self._lock:
                fns = self._graphs.pop(run_id, None)
            if fns:
                _call(fns, error)

    def on_chain_end(self, outputs: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kw: Any) -> None:
        self._ended(run_id, parent_run_id, None)

    def on_chain_error(self, error: BaseException, *, run_id: UUID, parent_run_id: UUID | None = None,
                       **kw: Any) -> None:
        self._ended(run_id, parent_run_id, error)


def _call(fns: list[OnEnd], error: BaseException | None) -> None:
    for fn in fns:
        try:
            fn(error)
        except Exception:  # observer: a run's end must not fail LangChain's callback
            log.exception("the end of a run could not be recorded")


_watcher: RunEndWatcher | None = None
_install_lock = threading.Lock()


def run_end_watcher() -> RunEndWatcher:
    """The process's watcher, installed into LangChain's callback configuration on first use."""
    global _watcher
    if _watcher is None:
        with _install_lock:
            if _watcher is None:
                from langchain_core.callbacks import BaseCallbackHandler
                from langchain_core.tracers.context import register_configure_hook

                handler_cls = type("UnseeRunEndHandler", (RunEndWatcher, BaseCallbackHandler), {})
                watcher = handler_cls()
                # A context variable whose default is the handler: every callback manager
                # configured from now on, in every context, gets it (inheritable: node runs too).
                var: contextvars.ContextVar = contextvars.ContextVar("unsee_run_end", default=watcher)
                register_configure_hook(var, True)
                _watcher = watcher
    return _watcher
