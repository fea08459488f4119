"""Which session and thread the current agent run belongs to (LangGraph config)."""

from __future__ import annotations

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


def logical_session() -> str:
    """The session a model cache, sampler seed, sandbox or call ledger belongs to.

    Equal to the thread id, except during a replay, which runs in a scratch
    thread on behalf of the session it rebuilds (``configurable.unsee_session``).
    """
    conf = configurable()
    return str(conf.get("unsee_session") or conf.get("thread_id") or DEFAULT_SESSION)
