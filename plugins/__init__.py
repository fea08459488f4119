"""unsee plugins: forget, model, ifc, detect, eval, tools (see docs/architecture.md)."""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Callable
from typing import Any

#: package face -> its lazy table (what ``lazy_exports`` was given)
_TABLES: dict[str, dict[str, str]] = {}


class _Face(types.ModuleType):
    """A package face with a lazy table. Importing a submodule binds it on its package
    (``package.<submodule>``); where the face exports a name spelled like one of its modules
    (``unsee.plugins.ifc.extract``, the function of ``.extract``), that binding would hide the
    export, so the face keeps the export (the module stays in ``sys.modules``)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if (isinstance(value, types.ModuleType) and value.__name__ == f"{self.__name__}.{name}"
                and name in _TABLES.get(self.__name__, ())):
            return
        super().__setattr__(name, value)


def lazy_exports(package: str, exports: dict[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for a plugin's package face: ``name`` -> the relative module
    that defines it, imported on first use (so importing the face stays cheap)."""
    _TABLES[package] = exports
    face = sys.modules.get(package)
    if face is not None and type(face) is types.ModuleType:
        face.__class__ = _Face

    def __getattr__(name: str) -> Any:
        if name in exports:
            return getattr(importlib.import_module(exports[name], package), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
