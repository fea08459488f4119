"""Keywords renamed in the facade: the new name, its deprecated alias, and a contradiction
between them (pure; the facade's methods call it before they change anything)."""

from __future__ import annotations

import warnings
from typing import TypeVar

from unsee.middleware.errors import InvalidArgument

T = TypeVar("T")

__all__ = ["renamed_keyword"]


def renamed_keyword(name: str, value: T | None, alias: str, alias_value: T | None, default: T, *,
                    stacklevel: int = 3) -> T:
    """The value of keyword ``name``, called ``alias`` before.

    ``value`` when given; else ``alias_value`` with a :class:`DeprecationWarning` (pointed at the
    caller of the facade method that called this, ``stacklevel``); else ``default``. Both given:
    the same value is accepted (with the warning), different values raise
    :class:`~unsee.middleware.errors.InvalidArgument`, before anything is done with either.
    """
    if alias_value is None:
        return default if value is None else value
    if value is not None and value != alias_value:
        raise InvalidArgument(f"{name}={value!r} and {alias}={alias_value!r} contradict each other: "
                              f"{alias}= is the old name of {name}=; give {name}= only")
    warnings.warn(f"{alias}= is deprecated here: use {name}={alias_value!r}", DeprecationWarning,
                  stacklevel=stacklevel)
    return alias_value
