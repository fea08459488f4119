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


def logical_session() -> str:
    """The session a model cache, sampler seed, sandbox or call ledger belongs to.

    Equal to the thread id, except during a replay, which runs in a scratch
    thread on behalf of the session it rebuilds (``configurable.unsee_session``).
    """
    conf = configurable()
    return str(conf.get("unsee_session") or conf.get("thread_id") or DEFAULT_SESSION)
