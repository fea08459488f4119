"""The driver of LangGraph's ``InMemorySaver``: its dicts ``storage``, ``writes`` and ``blobs``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from .base import CheckpointerDriver, Convert, saver_class

__all__ = ["InMemoryDriver"]


class InMemoryDriver(CheckpointerDriver):
    """``storage[thread][ns][checkpoint_id] = (checkpoint, metadata, parent_id)`` (typed pairs),
    ``writes[(thread, ns, checkpoint_id)][(task_id, idx)] = (task_id, channel, value, task_path)``,
    ``blobs[(thread, ns, channel, version)] = value``."""

    kind = "memory"
    engine = "memory"

    @classmethod
    def saver_type(cls) -> type | None:
        return saver_class("langgraph.checkpoint.memory", "InMemorySaver")

    @classmethod
    def open(cls, where: Any = None) -> tuple[Any, Callable[[], None]]:
        return cls.saver_type()(), lambda: None

    @classmethod
    async def aopen(cls, where: Any = None) -> tuple[Any, Callable[[], Awaitable[None]]]:
        async def close() -> None:
            pass

        return cls.saver_type()(), close

    def dicts(self) -> tuple[dict, dict, dict]:
        """(storage, writes, blobs): the saver's own dicts, to read (write through the API)."""
        s = self.saver
        return s.storage, s.writes, s.blobs

    def thread_ids(self, prefix: str = "") -> list[str] | None:
        # (a read of a missing thread leaves an empty entry in the saver's defaultdict: not a thread)
        return sorted(t for t, by_ns in list(self.saver.storage.items())
                      if isinstance(t, str) and t.startswith(prefix) and any(by_ns.values()))

    def has_checkpoint(self, thread: str, checkpoint_id: str, checkpoint_ns: str = "") -> bool | None:
        if not self.keeps("get_tuple"):  # (a subclass reading its own way: load it)
            return None
        threads = self.saver.storage
        return thread in threads and checkpoint_id in threads[thread].get(checkpoint_ns, {})

    def parent_ids(self, thread: str) -> dict[str, str | None] | None:
        if not self.exact():
            return None
        return {cid: parent for cid, (_, _, parent) in self.saver.storage.get(thread, {}).get("", {}).items()}

    def rows_readable(self) -> bool:
        return self.keeps("list")

    def reencrypts(self) -> bool:
        return True

    def reencrypt(self, thread: str, convert: Convert, marker: str) -> int:
        storage, writes, blobs = self.dicts()
        updates: list[Callable[[], None]] = []

        def conv(value: Any):
            return convert(*value) if isinstance(value, tuple) and len(value) == 2 else None

        for cps in (storage.get(thread) or {}).values():
            for cid, (ckpt, meta, parent) in list(cps.items()):
                c, m = conv(ckpt), conv(meta)
                if c or m:
                    updates.append(lambda cps=cps, cid=cid, v=(c or ckpt, m or meta, parent): cps.__setitem__(cid, v))
        for key, ws in list(writes.items()):
            if key[0] == thread:
                for ik, (task_id, channel, value, task_path) in list(ws.items()):
                    if new := conv(value):
                        updates.append(lambda ws=ws, ik=ik, v=(task_id, channel, new, task_path): ws.__setitem__(ik, v))
        for key, value in list(blobs.items()):
            if key[0] == thread and (new := conv(value)):
                updates.append(lambda key=key, v=new: blobs.__setitem__(key, v))
        for apply in updates:  # (every new value computed first: a failing convert changes nothing)
            apply()
        return len(updates)

    async def areencrypt(self, thread: str, convert: Convert, marker: str) -> int:
        return self.reencrypt(thread, convert, marker)
