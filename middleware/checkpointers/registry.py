"""Which driver serves a saver: the registry, newest registration first."""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from typing import Any

from unsee.middleware.errors import InvalidArgument, UnseeError

from .base import CheckpointerDriver, GenericDriver
from .memory import InMemoryDriver
from .postgres import AsyncPostgresDriver, PostgresDriver
from .sqlite import AsyncSqliteDriver, SqliteDriver

__all__ = ["NoCheckpointerDriver", "aopen_saver", "driver_for", "driver_named", "driver_or_generic", "open_saver",
           "register_driver", "registered_drivers", "unregister_driver", "unwrapped"]


class NoCheckpointerDriver(UnseeError, TypeError):
    """No registered checkpointer driver serves this saver's class (``register_driver`` adds one)."""

    def __init__(self, saver: Any):
        super().__init__(f"no checkpointer driver for {type(saver).__module__}.{type(saver).__qualname__}: "
                         "unsee reaches it through the saver API only (register_driver adds a driver)")
        self.saver_type = type(saver)


#: one line a saver: the drivers LangGraph's own savers get (a registered driver is asked first)
_BUILTIN: tuple[type[CheckpointerDriver], ...] = (InMemoryDriver, SqliteDriver, AsyncSqliteDriver, PostgresDriver,
                                                  AsyncPostgresDriver)
_registered: list[type[CheckpointerDriver]] = []
_lock = threading.Lock()


def register_driver(driver: type[CheckpointerDriver]) -> type[CheckpointerDriver]:
    """Add ``driver`` (a :class:`CheckpointerDriver` subclass) to the registry, asked before every
    driver registered earlier and the built-in ones (a driver for a subclass of a known saver
    wins). Returns it, so it works as a class decorator. Registering it again moves it first."""
    if not (isinstance(driver, type) and issubclass(driver, CheckpointerDriver)) or driver is GenericDriver:
        raise TypeError(f"register_driver takes a CheckpointerDriver subclass, not {driver!r}")
    with _lock:
        if driver in _registered:
            _registered.remove(driver)
        _registered.insert(0, driver)
    return driver


def unregister_driver(driver: type[CheckpointerDriver]) -> None:
    """Remove a driver :func:`register_driver` added (the built-in ones stay)."""
    with _lock:
        if driver in _registered:
            _registered.remove(driver)


def registered_drivers() -> tuple[type[CheckpointerDriver], ...]:
    """Every driver, in the order a saver is matched against them."""
    with _lock:
        return (*_registered, *_BUILTIN)


def driver_named(kind: str) -> type[CheckpointerDriver]:
    """The driver whose ``kind`` is ``kind`` (a registered one first); :class:`InvalidArgument`
    naming the known kinds when none is."""
    drivers = registered_drivers()
    for driver in drivers:
        if driver.kind == kind:
            return driver
    raise InvalidArgument(f"no checkpointer driver of kind {kind!r} (known: {', '.join(d.kind for d in drivers)})")


def open_saver(kind: str, where: Any = None) -> tuple[Any, Callable[[], None]]:
    """A new saver of ``kind`` on ``where`` and its closer (``CheckpointerDriver.open``)."""
    return driver_named(kind).open(where)


async def aopen_saver(kind: str, where: Any = None) -> tuple[Any, Callable[[], Awaitable[None]]]:
    """A new saver of ``kind`` on ``where``, made on the running loop, and its awaitable closer."""
    return await driver_named(kind).aopen(where)


def unwrapped(saver: Any) -> Any:
    """The saver whose storage holds the rows: a wrapper's ``inner`` (unsee's encrypting saver),
    else the saver itself."""
    return getattr(saver, "inner", saver)


def driver_for(saver: Any) -> CheckpointerDriver:
    """The driver of ``saver`` (as given: unwrap a wrapper first with :func:`unwrapped` to reach
    the storage under it); :class:`NoCheckpointerDriver` when none serves its class."""
    for driver in registered_drivers():
        if driver.handles(saver):
            return driver(saver)
    raise NoCheckpointerDriver(saver)


def driver_or_generic(saver: Any) -> CheckpointerDriver:
    """:func:`driver_for`, or the saver-API-only :class:`GenericDriver` when none serves it."""
    try:
        return driver_for(saver)
    except NoCheckpointerDriver:
        return GenericDriver(saver)
