"""Checkpointer drivers: the one place that knows LangGraph's saver classes.

Erasure, retention, per-thread encryption and the forget reach a checkpointer's
own storage (raw rows, SQL rewrites of a suffix, thread deletes, in-place
re-encryption, the file to scrub) only through :func:`driver_for` /
:func:`driver_or_generic`. Supporting another saver is one
:class:`CheckpointerDriver` subclass and one :func:`register_driver` call (or one
line in ``registry._BUILTIN``); :func:`open_saver` / :func:`aopen_saver` make a new saver of
a driver's kind for code that builds an agent. See docs/architecture.md, "Checkpointer drivers".
"""

from __future__ import annotations

from .base import CheckpointerDriver, Convert, GenericDriver, saver_class
from .files import async_main_file, main_file
from .memory import InMemoryDriver
from .postgres import AsyncPostgresDriver, PostgresDriver
from .registry import (NoCheckpointerDriver, aopen_saver, driver_for, driver_named, driver_or_generic, open_saver,
                       register_driver, registered_drivers, unregister_driver, unwrapped)
from .sqlite import AsyncSqliteDriver, SqliteDriver

__all__ = ["AsyncPostgresDriver", "AsyncSqliteDriver", "CheckpointerDriver", "Convert", "GenericDriver",
           "InMemoryDriver", "NoCheckpointerDriver", "PostgresDriver", "SqliteDriver", "aopen_saver",
           "async_main_file", "driver_for", "driver_named", "driver_or_generic", "main_file", "open_saver",
           "register_driver", "registered_drivers", "saver_class", "unregister_driver", "unwrapped"]
