"""Backends register by name; ``open_environment(name, **opts)`` opens one.

Built-in backends: ``docker`` (the real one), ``local`` (a workspace
directory, the embedded default when no daemon is reachable) and ``python``
(an in-process object snapshotted by deep copy). ``auto`` picks docker when a
daemon is reachable and its sandbox image exists, else local.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any, Callable

from .base import Environment
from .errors import BackendNotFound, SandboxUnavailable

__all__ = [
    "register_backend",
    "open_environment",
    "available_backends",
    "backend_names",
    "BackendInfo",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BackendInfo:
    name: str
    #: opens an environment; receives open_environment's keyword options
    factory: Callable[..., Environment]
    #: returns None when usable, else a sentence saying why not (with a hint)
    check: Callable[[], str | None] | None = None
    #: what to install/start when the backend is unavailable
    hint: str = ""


_lock = threading.Lock()
_backends: dict[str, BackendInfo] = {}


def register_backend(
    name: str,
    factory: Callable[..., Environment],
    *,
    check: Callable[[], str | None] | None = None,
    hint: str = "",
    replace: bool = False,
) -> None:
    """Register a backend. ``check()`` returns None when usable, else why not."""
    if name == "auto":
        raise ValueError("'auto' is reserved")
    with _lock:
        if name in _backends and not replace:
            raise ValueError(f"sandbox backend {name!r} is already registered")
        _backends[name] = BackendInfo(name, factory, check, hint)


def backend_names() -> list[str]:
    _ensure_builtins()
    with _lock:
        return sorted(_backends)


def available_backends() -> dict[str, str | None]:
    """Every registered backend -> None if usable, else why not."""
    _ensure_builtins()
    with _lock:
        infos = list(_backends.values())
    return {info.name: _check(info) for info in infos}


def _check(info: BackendInfo) -> str | None:
    if info.check is None:
        return None
    try:
        return info.check()
    except Exception as exc:  # a check must never raise
        return f"availability check failed: {exc}"


def open_environment(backend: str = "auto", **opts: Any) -> Environment:
    """Open an environment of the named backend.

    ``auto`` means docker when usable (daemon reachable, image present), else
    local; options meant for one backend are dropped for the other.
    Raises BackendNotFound for unknown names and SandboxUnavailable (with what
    to install/start) when the backend cannot be used here.
    """
    _ensure_builtins()
    if backend == "auto":
        with _lock:
            docker_info = _backends.get("docker")
        why = _check(docker_info) if docker_info else "not registered"
        if why is None:
            try:
                return docker_info.factory(**_opts_for("docker", opts))
            except SandboxUnavailable as exc:  # e.g. daemon up but no sandbox image
                why = str(exc)
        log.info("sandbox: docker unavailable (%s); using the local backend", why)
        backend = "local"
        opts = _opts_for("local", opts)
    with _lock:
        info = _backends.get(backend)
        known = sorted(_backends)
    if info is None:
        raise BackendNotFound(backend, known + ["auto"])
    why = _check(info)
    if why is not None:
        raise SandboxUnavailable(
            f"sandbox backend {backend!r} is unavailable: {why}", backend=backend, hint=info.hint
        )
    return info.factory(**opts)


_LOCAL_ONLY = {"root", "keep"}
_DOCKER_ONLY = {"image", "client", "user", "mem_limit", "pids_limit", "nano_cpus", "flatten_every", "keep_snapshots"}


def _opts_for(backend: str, opts: dict[str, Any]) -> dict[str, Any]:
    drop = _LOCAL_ONLY if backend == "docker" else _DOCKER_ONLY
    return {k: v for k, v in opts.items() if k not in drop}


_builtins_loaded = False


def _ensure_builtins() -> None:
    global _builtins_loaded
    if _builtins_loaded:
        return
    _builtins_loaded = True
    from . import docker_env, local, pyobject  # noqa: F401  (they register themselves)
