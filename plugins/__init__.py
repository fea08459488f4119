"""unsee plugins: forget, model, ifc, detect, eval, tools (see docs/architecture.md)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_exports(package: str, exports: dict[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for a plugin's package face: ``name`` -> the relative module
    that defines it, imported on first use (so importing the face stays cheap)."""

    def __getattr__(name: str) -> Any:
        if name in exports:
            return getattr(importlib.import_module(exports[name], package), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
