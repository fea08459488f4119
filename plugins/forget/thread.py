"""The agent's LangGraph side, as the replay, the commit and the baselines use it.

A thread's run config, the agent's recording store (the memory store a
replay rolls back in an overlay), the live messages of a thread, and removal
of a thread's checkpoints.
"""

from __future__ import annotations

from typing import Any

from unsee.middleware.checkpointers import driver_or_generic
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


def has_checkpoint(saver: Any, thread: str, checkpoint_id: str, checkpoint_ns: str = "") -> bool | None:
    """Whether ``saver`` holds the checkpoint, found without loading it (``get_tuple`` would
    deserialise its whole state: the session's every message on a full-state graph). Answered
    where the saver's checkpointer driver can (LangGraph's in-memory saver: its dicts; its SQLite
    saver: one indexed row; neither when a subclass overrides how it reads); None for any other
    saver (the caller loads the checkpoint)."""
    return driver_or_generic(saver).has_checkpoint(thread, checkpoint_id, checkpoint_ns)


def parent_ids(saver: Any, thread: str) -> dict[str, str | None]:
    """checkpoint id -> parent id of the thread's root-namespace checkpoints, read without
    loading them where the saver's checkpointer driver can (LangGraph's own in-memory saver: its
    dicts; its SQLite saver: one indexed query); any other saver lists the thread through its
    API (each checkpoint decoded)."""
    known = driver_or_generic(saver).parent_ids(thread)
    if known is not None:
        return known
    out = {}
    for t in saver.list({"configurable": {"thread_id": thread, "checkpoint_ns": ""}}):
        conf = t.config["configurable"]
        if not conf.get("checkpoint_ns"):
            out[conf["checkpoint_id"]] = ((t.parent_config or {}).get("configurable") or {}).get("checkpoint_id")
    return out


def delete_thread(agent: Any, thread: str) -> None:
    """Remove the thread's LangGraph checkpoints (when the checkpointer can)."""
    saver = getattr(agent, "checkpointer", None)
    if saver is not None and hasattr(saver, "delete_thread"):
        saver.delete_thread(thread)


def _written_cfg(cfg: dict, written: Any) -> dict:
    """The config that reads back what ``update_state`` just wrote (its checkpoint id)."""
    conf = (written or {}).get("configurable") or {}
    return {**cfg, "configurable": {**cfg["configurable"], **conf}} if conf.get("checkpoint_id") else cfg


def _writer_node(agent: Any) -> str | None:
    """A node of ``agent`` that may write any key of its state (every node but the input's)."""
    return next((n for n in getattr(agent, "nodes", {}) or {} if not str(n).startswith("__")), None)


def write_state(agent: Any, cfg: dict, values: dict) -> Any:
    """``agent.update_state(cfg, values)`` that writes every key of ``values``, private ones too.

    ``update_state`` applies values as the node that last wrote the thread (the graph's input
    when a run had just begun), and the input leaves out the keys the graph keeps private
    (a middleware's counters, e.g. ``thread_model_call_count``): a fork or a commit would lose
    them. Those left out are written again as a node that writes any key; when that schedules
    tasks the first write did not, they are cleared, so the thread waits where it did. Returns
    the config of the last checkpoint written.

    A key with a reducer (``Annotated[list, operator.add]``, a counter, deepagents' ``files``)
    is written as it is (``Overwrite``), not reduced into what the thread holds: the state
    written is ``values``, whatever the thread held before."""
    written = agent.update_state(cfg, _overwriting(agent, values))
    rest = {k: v for k, v in values.items() if k != "messages"}
    if not rest:
        return written
    snap = agent.get_state(_written_cfg(cfg, written))
    missing = {k: v for k, v in rest.items() if snap.values.get(k) != v}
    node = _writer_node(agent)
    if not missing or node is None:
        return written
    waiting = tuple(snap.next or ())
    written = agent.update_state(_written_cfg(cfg, written), _overwriting(agent, missing), as_node=node)
    if not waiting:
        from langgraph.graph import END

        written = agent.update_state(_written_cfg(cfg, written), None, as_node=END)
    return written


def _overwriting(agent: Any, values: dict) -> dict:
    """``values`` with each key whose channel reduces its writes (other than ``messages``, which a
    caller replaces with ``RemoveMessage(REMOVE_ALL_MESSAGES)``) wrapped in ``Overwrite``."""
    from langgraph.channels.binop import BinaryOperatorAggregate
    from langgraph.types import Overwrite

    channels = getattr(agent, "channels", None) or {}
    return {k: Overwrite(v) if k != "messages" and isinstance(channels.get(k), BinaryOperatorAggregate) else v
            for k, v in values.items()}
