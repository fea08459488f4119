"""Which driver serves a saver: the registry, newest registration first."""

from __future__ import annotations

import threading
from typing import Any

from unsee.middleware.errors import UnseeError

from .base import CheckpointerDriver, GenericDriver
from .memory import InMemoryDriver
from .postgres import AsyncPostgresDriver, PostgresDriver
from .sqlite import AsyncSqliteDriver, SqliteDriver

__all__ = ["NoCheckpointerDriver", "driver_for", "driver_or_generic", "register_driver", "registered_drivers",
           "unregister_driver", "unwrapped"]


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
