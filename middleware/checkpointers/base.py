"""The contract of a checkpointer driver, and the driver of a saver unsee has none for.

A LangGraph checkpointer is used through its public API everywhere
(``list``, ``get_tuple``, ``put``, ``put_writes``, ``delete_thread``). Some jobs
are cheaper, or only possible, on the saver's own storage: listing thread ids
without decoding a checkpoint, reading a checkpoint's parent without loading
its state, judging stored rows by their bytes, rewriting a thread's suffix
with SQL, re-encrypting stored values in place, scrubbing the file or tables
the rows lived in. A :class:`CheckpointerDriver` is the one place that knows a
saver class and reaches into its storage; everything else asks the driver.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any, ClassVar

__all__ = ["CheckpointerDriver", "Convert", "GenericDriver", "saver_class"]

#: ``convert(type, bytes)``: a stored typed value re-encoded, or None to leave it as it is
Convert = Callable[[str, bytes], "tuple[str, bytes] | None"]


@functools.cache
def saver_class(module: str, name: str) -> type | None:
    """``module.name``, or None when its package is not installed (the optional savers); looked
    up once (a saver's driver is asked for on every read that could use it)."""
    import importlib

    try:
        return getattr(importlib.import_module(module), name)
    except ImportError:
        return None


class CheckpointerDriver(ABC):
    """What unsee may do with one checkpointer beyond LangGraph's saver API.

    The contract every driver keeps (``tests/middleware/test_checkpointer_drivers.py``
    checks each registered one against the saver API's view of the same thread):

    - :meth:`handles` says whether a saver is of the driver's class (a subclass
      included); ``kind`` names the driver, ``engine`` the storage layout its rows
      have (``"memory"``, ``"sqlite"``, ``"postgres"``; None: rows unknown).
    - Storage access: :attr:`connection` (the database connection or pool, None for
      none), :attr:`lock` (the lock the saver's own methods hold, or None) and
      :meth:`locked`, :meth:`database_file` (the SQLite file, None for none),
      :meth:`keeps` (whether the saver's class stores rows as the driver's class does:
      it overrides none of the named methods).
    - Reads that answer what the saver API would, without decoding a checkpoint:
      :meth:`thread_ids`, :meth:`has_checkpoint` and :meth:`parent_ids` (each None where
      the storage cannot answer it: the caller goes through the API).
    - Capabilities, each False where the storage is not the plain one the SQL or the
      dict walk assumes: :meth:`sql_rewritable` (a thread's suffix may be rewritten
      with SQL on the saver's tables), :meth:`rows_readable` (its stored rows may be
      judged by their bytes), :meth:`reencrypts` (:meth:`reencrypt` / :meth:`areencrypt`
      rewrite a thread's stored typed values in place).
    - :attr:`async_only`: the storage is reached from the saver's event loop only
      (:meth:`on_loop` runs a coroutine there from another thread).
    - :meth:`delete_thread` deletes a thread's checkpoints, writes and blobs.
    - :meth:`open` / :meth:`aopen` (class methods) make a new saver of the kind, for
      code that builds an agent (the demo, the compatibility kit, the harness).

    A driver never changes what the saver API returns; it is built per use
    (``driver_for(saver)``) and holds no state besides the saver.
    """

    #: the driver's name (a registry key, a receipt's word)
    kind: ClassVar[str]
    #: the layout of its stored rows: "memory", "sqlite", "postgres", or None (unknown)
    engine: ClassVar[str | None] = None
    #: the storage is reached from the saver's own event loop only
    async_only: ClassVar[bool] = False

    def __init__(self, saver: Any):
        self.saver = saver

    # -- new savers --------------------------------------------------------------------------------

    @classmethod
    def open(cls, where: Any = None) -> tuple[Any, Callable[[], None]]:
        """A new saver of this kind on ``where`` (what it takes depends on the kind: nothing, a
        SQLite file or connection, a PostgreSQL URL) and what closes what was opened for it
        (nothing the caller passed in). ``NotImplementedError`` for a kind opened only from a
        coroutine (:meth:`aopen`) or not at all."""
        raise NotImplementedError(f"a {cls.kind} checkpointer is not opened synchronously")

    @classmethod
    async def aopen(cls, where: Any = None) -> tuple[Any, Callable[[], Awaitable[None]]]:
        """:meth:`open` for a saver used from the running loop (an async saver's connection is
        made there); the closer is awaited."""
        raise NotImplementedError(f"a {cls.kind} checkpointer is not opened from a coroutine")

    # -- which savers ------------------------------------------------------------------------------

    @classmethod
    @abstractmethod
    def saver_type(cls) -> type | None:
        """The saver class this driver serves (None: its package is not installed)."""

    @classmethod
    def handles(cls, saver: Any) -> bool:
        """Whether ``saver`` is of :meth:`saver_type` (a subclass included)."""
        t = cls.saver_type()
        return t is not None and isinstance(saver, t)

    def exact(self) -> bool:
        """The saver is of the driver's class itself, not a subclass."""
        return type(self.saver) is self.saver_type()

    def keeps(self, *methods: str) -> bool:
        """The saver's class overrides none of ``methods`` of the driver's class: its rows are
        stored and read as that class stores and reads them."""
        base = self.saver_type()
        return base is not None and all(getattr(type(self.saver), m, None) is getattr(base, m, None)
                                        for m in methods)

    # -- storage access ----------------------------------------------------------------------------

    @property
    def connection(self) -> Any:
        """The saver's database connection or pool (None: no database)."""
        return None

    @property
    def lock(self) -> Any:
        """The thread lock the saver's own methods hold around its connection (None: none, or an
        async saver's asyncio lock, which only its loop holds)."""
        return None

    def locked(self) -> contextlib.AbstractContextManager:
        """:attr:`lock` held (a no-op without one)."""
        return self.lock or contextlib.nullcontext()

    def database_file(self) -> Path | None:
        """The SQLite file the saver's rows are in (None: none, or in memory)."""
        return None

    # -- reads the saver API would answer ----------------------------------------------------------

    def thread_ids(self, prefix: str = "") -> list[str] | None:
        """The saver's thread ids starting with ``prefix``, sorted, read without loading a
        checkpoint; None: not answerable here (list the saver through its API)."""
        return None

    def has_checkpoint(self, thread: str, checkpoint_id: str, checkpoint_ns: str = "") -> bool | None:
        """Whether the checkpoint is stored, found without loading it; None: not answerable here."""
        return None

    def parent_ids(self, thread: str) -> dict[str, str | None] | None:
        """checkpoint id -> parent id of the thread's root-namespace checkpoints, without loading
        them; None: not answerable here."""
        return None

    # -- capabilities ------------------------------------------------------------------------------

    def sql_rewritable(self) -> bool:
        """A thread's suffix may be rewritten with SQL on the saver's own tables."""
        return False

    def rows_readable(self) -> bool:
        """The saver's stored rows may be read raw (by :attr:`engine`'s layout) and judged."""
        return False

    def reencrypts(self) -> bool:
        """:meth:`reencrypt` rewrites this saver's stored values in place."""
        return False

    def reencrypt(self, thread: str, convert: Convert, marker: str) -> int:
        """Re-encode, in place, every stored typed value of ``thread`` that ``convert`` changes
        (``marker``: a substring of the type of every value it may change, a filter the storage
        may apply first); all new values are computed before any is stored. Returns how many
        values changed. Only where :meth:`reencrypts`."""
        raise NotImplementedError(f"{type(self.saver).__name__}'s stored values are not re-encrypted in place")

    async def areencrypt(self, thread: str, convert: Convert, marker: str) -> int:
        """:meth:`reencrypt` from a coroutine."""
        return await asyncio.to_thread(self.reencrypt, thread, convert, marker)

    def on_loop(self, coro: Coroutine) -> Any:
        """Run ``coro`` where the saver's storage is reached (its loop, for an :attr:`async_only`
        one; here a new loop) and wait for its result."""
        return asyncio.run(coro)

    # -- writes ------------------------------------------------------------------------------------

    def delete_thread(self, thread: str) -> None:
        """Delete the thread's checkpoints, writes and blobs (every namespace)."""
        self.saver.delete_thread(thread)


class GenericDriver(CheckpointerDriver):
    """A saver no registered driver knows: the saver API for every read and write (every read
    decodes, nothing is rewritten in SQL or re-encrypted in place). Its storage is still found
    where the saver shows it (a ``conn`` attribute, e.g. LangGraph's shallow PostgreSQL savers or a
    user's saver over ``sqlite3``), so the audit scans the file and the erasure scrubs it."""

    kind = "generic"

    @property
    def connection(self) -> Any:
        return getattr(self.saver, "conn", None)

    @property
    def lock(self) -> Any:
        lock = getattr(self.saver, "lock", None)
        return None if isinstance(lock, asyncio.Lock) else lock  # (an asyncio lock: only its loop holds it)

    def database_file(self) -> Path | None:
        from .files import async_main_file, main_file

        return main_file(self.connection) or async_main_file(self.saver)

    @classmethod
    def saver_type(cls) -> type | None:
        return None

    @classmethod
    def handles(cls, saver: Any) -> bool:
        return True
