"""Where unsee keeps its records, and which unsee this is: cheap to import (the CLI starts with it).

The home is the given path, else ``$UNSEE_HOME``, else ``./.unsee``; the store
is the given URL, else ``$UNSEE_STORE``, else SQLite under the home; the OCI
registry sandbox snapshots are pushed to is the given ``host:port``, else
``$UNSEE_REGISTRY``, else none (snapshots stay on the machine, or in a shared
store).
"""

from __future__ import annotations

import os
import re
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


def resolve_registry(registry: str | None = None) -> str | None:
    """``registry`` if given, else ``$UNSEE_REGISTRY``; None (or "" / "none"): no registry.
    ``InvalidArgument`` unless it is ``host[:port]`` (``http://``/``https://`` may lead);
    nothing is contacted here."""
    registry = registry or os.environ.get("UNSEE_REGISTRY") or None
    if registry is None or registry.strip().lower() == "none":
        return None
    return check_registry_address(registry)


_HOST = re.compile(r"(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
                   r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*)(?::(\d{1,5}))?")


def check_registry_address(address: str) -> str:
    """``address`` when it is ``host[:port]`` (optionally ``http://``/``https://`` first), else
    ``InvalidArgument``. Nothing is contacted: a registry that does not answer fails at the
    first snapshot."""
    from unsee.middleware.errors import InvalidArgument

    if not isinstance(address, str) or not address.strip():
        raise InvalidArgument(f"registry must be host[:port], got {address!r}")
    rest = address.strip()
    for scheme in ("http://", "https://"):
        if rest.lower().startswith(scheme):
            rest = rest[len(scheme):]
            break
    m = _HOST.fullmatch(rest.rstrip("/"))
    if m is None or (m.group(1) is not None and not 0 < int(m.group(1)) < 65536):
        raise InvalidArgument(f"registry must be host[:port] (e.g. 127.0.0.1:5000), got {address!r}")
    return address.strip().rstrip("/")
