"""The agent's LangGraph side, as the replay, the commit and the baselines use it.

A thread's run config, the agent's recording store (the memory store a
replay rolls back in an overlay), the live messages of a thread, and removal
of a thread's checkpoints.
"""

from __future__ import annotations

from typing import Any

from unsee.middleware.hooks import message_artifact
from unsee.middleware.memory import RecordingStore


def artifact_of(session: str, message: Any) -> str:
    """The artifact id a live message maps to ("" for none)."""
    return (message_artifact(session, message) or ("", None))[0]


def thread_cfg(thread: str, **extra: Any) -> dict:
    return {"configurable": {"thread_id": thread, **extra}}


def recording_store(agent: Any) -> RecordingStore | None:
    store = getattr(agent, "store", None)
    return store if isinstance(store, RecordingStore) else None


def messages(agent: Any, thread: str) -> list:
    """The thread's live messages."""
    return list(agent.get_state(thread_cfg(thread)).values.get("messages", []))


def delete_thread(agent: Any, thread: str) -> None:
    """Remove the thread's LangGraph checkpoints (when the checkpointer can)."""
    saver = getattr(agent, "checkpointer", None)
    if saver is not None and hasattr(saver, "delete_thread"):
        saver.delete_thread(thread)
