"""Which session and thread the current agent run belongs to (LangGraph config)."""

from __future__ import annotations

from .run_inputs import run_inputs

DEFAULT_SESSION = "default"


def configurable() -> dict:
    """``configurable`` of the LangGraph run we are in ({} outside one)."""
    try:
        from langgraph.config import get_config

        return get_config().get("configurable", {}) or {}
    except (RuntimeError, ImportError):
        return {}


def current_session() -> tuple[str, str | None]:
    """(thread id, LangGraph parent checkpoint id) of the run we are in."""
    conf = configurable()
    sid = conf.get("thread_id") or DEFAULT_SESSION
    cmap = conf.get("checkpoint_map") or {}
    return str(sid), cmap.get("") or conf.get("checkpoint_id")


def enclosing_graph() -> str | None:
    """The checkpoint namespace of the graph the current run is nested in, None for a run of
    the graph that owns the thread.

    A node of the thread's own graph runs in a one-segment namespace (``model:<task>``); a
    graph run inside another one on the same thread (a subgraph, a supervisor's worker, a
    swarm agent, a subagent a tool invokes) adds its parent's segments before it
    (``worker_a:<task>|model:<task>``). Its records belong to the same session, but its
    state is a part of the outer graph's, which owns the thread's checkpointer."""
    ns = str(configurable().get("checkpoint_ns") or "")
    return ns.rsplit("|", 1)[0] if "|" in ns else None


def outer_run_id(max_steps: int = 10_000) -> str | None:
    """An id of the run of the thread's own graph now under way: one id for every run nested in
    that one run, another for the next run. None outside a nested run or where it cannot be told.

    The root graph run under way on the thread (``run_inputs``: from LangChain's callbacks, in
    order) names it. Where that run began before unsee watched the process's runs, the nested run
    reads the outer graph's current checkpoint (``checkpoint_map[""]``) and walks its parents to
    the run's input: a few indexed reads, once per nested run (LangGraph writes checkpoints in
    the background: one not written yet leaves the answer unknown, None)."""
    conf = configurable()
    thread = conf.get("thread_id")
    if thread is not None:
        root = run_inputs().running(str(thread))
        if root is not None:
            return f"run:{root}"
    saver = conf.get("__pregel_checkpointer")
    cid = (conf.get("checkpoint_map") or {}).get("")
    if saver is None or not cid or not hasattr(saver, "get_tuple"):
        return None
    try:
        for _ in range(max_steps):
            t = saver.get_tuple({"configurable": {"thread_id": thread, "checkpoint_ns": "", "checkpoint_id": cid}})
            if t is None:
                return None
            if (t.metadata or {}).get("source") == "input":
                return cid
            parent = ((t.parent_config or {}).get("configurable") or {}).get("checkpoint_id")
            if not parent:
                return cid
            cid = parent
    except Exception:  # (an observer's question: a saver that cannot answer leaves it unknown)
        return None
    return None


def logical_session() -> str:
    """The session a model cache, sampler seed, sandbox or call ledger belongs to.

    Equal to the thread id, except during a replay, which runs in a scratch
    thread on behalf of the session it rebuilds (``configurable.unsee_session``).
    """
    conf = configurable()
    return str(conf.get("unsee_session") or conf.get("thread_id") or DEFAULT_SESSION)
