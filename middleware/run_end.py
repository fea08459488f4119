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
   watched; a run the node invoked (a recorded model called inside
   ``prompt | model``) ends first, without the node's ``graph:step:`` tag, and
   hands its functions on to its parent until the node's run ends;
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

from .run_inputs import REPLAYED_INPUT, is_root_graph_start, run_inputs

log = logging.getLogger("unsee.run_end")

#: what a watcher calls at the graph run's end: the error it failed with, or None
OnEnd = Callable[[BaseException | None], None]
#: the tag LangGraph gives the run of each node of a graph (``graph:step:<n>``); runs below it
#: carry their own (``seq:step:<n>``) or the caller's
_NODE_TAG = "graph:step:"
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
    ignore_llm = ignore_chat_model = ignore_retriever = ignore_retry = True
    ignore_custom_event = True
    ignore_chain = False
    #: tool events come under the "agent" kind: a tool's start tells that it really ran
    ignore_agent = False
    raise_error = False
    run_inline = True

    def __init__(self) -> None:
        #: node run id -> functions, until the node's run ends (and names the graph's run)
        self._nodes: dict[UUID, list[OnEnd]] = {}
        #: graph run id -> functions, until the graph's run ends
        self._graphs: dict[UUID, list[OnEnd]] = {}
        #: tool call ids a hook waits to see start (-> whether their tool started)
        self._tools: dict[str, bool] = {}
        self._lock = threading.Lock()

    def watch(self, node_run: UUID, on_end: OnEnd) -> None:
        """Call ``on_end`` once the graph run that ``node_run`` (a node's run) belongs to ends."""
        with self._lock:
            if len(self._nodes) >= MAX_PENDING:  # ends never seen (a node run outside a graph)
                for key in list(self._nodes)[: MAX_PENDING // 2]:
                    del self._nodes[key]
            self._nodes.setdefault(node_run, []).append(on_end)

    def expect_tool(self, call_id: str) -> None:
        """Watch for the start of the tool that answers ``call_id`` (see :meth:`tool_started`)."""
        with self._lock:
            if len(self._tools) >= MAX_PENDING:
                for key in list(self._tools)[: MAX_PENDING // 2]:
                    del self._tools[key]
            self._tools[call_id] = False

    def tool_started(self, call_id: str) -> bool:
        """Whether the tool of an expected call started (its own callback said so), and stop
        watching it. False also when nothing told: a middleware answered the call itself."""
        with self._lock:
            return bool(self._tools.pop(call_id, False))

    def on_tool_start(self, serialized: Any, input_str: Any, *, run_id: UUID, tool_call_id: str | None = None,
                      **kw: Any) -> None:
        if tool_call_id is not None and tool_call_id in self._tools:
            self._tools[tool_call_id] = True

    def watching(self) -> int:
        """Runs watched now (nodes not ended yet, and graphs): for tests and diagnostics."""
        return len(self._nodes) + len(self._graphs)

    # -- the callback handler's interface (duck-typed: LangChain calls these by name) ---
    def _ended(self, run_id: UUID, parent_run_id: UUID | None, error: BaseException | None,
               tags: list[str] | None = None) -> None:
        if run_id in self._nodes:
            with self._lock:
                fns = self._nodes.pop(run_id, None)
                if fns and parent_run_id is not None:
                    if tags and not any(t.startswith(_NODE_TAG) for t in tags):
                        # a run inside the node (a chain the node invoked, e.g. ``prompt | model``
                        # around a recorded model): its parent is the node's run, or on the way to it
                        self._nodes.setdefault(parent_run_id, []).extend(fns)
                    else:
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

    def on_chain_start(self, serialized: Any, inputs: Any, *, run_id: UUID, parent_run_id: UUID | None = None,
                       metadata: dict[str, Any] | None = None, **kw: Any) -> None:
        # a root graph run of a thread: its input, as given (``run_inputs``); one test for the rest
        if parent_run_id is not None:
            run_inputs().child_started(parent_run_id)  # (a root's node: its graph ran)
        elif thread := is_root_graph_start(parent_run_id, metadata, kw.get("name")):
            try:
                run_inputs().started(run_id, thread, inputs, (metadata or {}).get(REPLAYED_INPUT))
            except Exception:  # observer
                log.exception("the input of a run could not be kept")

    def on_chain_end(self, outputs: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kw: Any) -> None:
        self._ended(run_id, parent_run_id, None, kw.get("tags"))
        if parent_run_id is None:
            run_inputs().ended(run_id)

    def on_chain_error(self, error: BaseException, *, run_id: UUID, parent_run_id: UUID | None = None,
                       **kw: Any) -> None:
        self._ended(run_id, parent_run_id, error, kw.get("tags"))
        if parent_run_id is None:
            run_inputs().ended(run_id, failed=True)
        elif _is_interrupt(error):  # (a node stopped at an interrupt)
            run_inputs().interrupted(parent_run_id, error)


def _is_interrupt(error: BaseException) -> bool:
    try:
        from langgraph.errors import GraphInterrupt
    except ImportError:
        return False
    return isinstance(error, GraphInterrupt)


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
