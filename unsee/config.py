"""Where unsee keeps its records, and which unsee this is: cheap to import (the CLI starts with it).

The home is the given path, else ``$UNSEE_HOME``, else ``./.unsee``; the store
is the given URL, else ``$UNSEE_STORE``, else SQLite under the home.
"""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_HOME = ".unsee"


def version() -> str:
    """The installed unsee's version ("unknown" when not installed, e.g. run from a checkout)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("unsee")
    except PackageNotFoundError:
        return "unknown"


def resolve_home(home: str | os.PathLike | None = None) -> Path:
    """``home`` if given, else ``$UNSEE_HOME``, else ``./.unsee``."""
    return Path(home or os.environ.get("UNSEE_HOME") or DEFAULT_HOME)


def resolve_store(store: str | None = None) -> str | None:
    """``store`` if given, else ``$UNSEE_STORE``; None (or "sqlite"): SQLite under the home."""
    store = store or os.environ.get("UNSEE_STORE") or None
    return None if store in (None, "sqlite") else store
