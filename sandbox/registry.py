"""Backends by name; ``open_environment(name, **opts)`` opens one.

The built-in backends are an explicit table (:data:`BUILTIN_BACKENDS`):
``docker`` (the real one), ``local`` (a workspace directory, the embedded
default when no daemon is reachable) and ``python`` (an in-process object
snapshotted by deep copy). Each entry names its class and availability check
as ``"module:attribute"`` strings, imported on first use, so backends never
import this module and importing ``unsee.sandbox`` imports no backend.
Third-party backends call :func:`register_backend`.

``auto`` picks docker when a daemon is reachable and its sandbox image exists,
else local; each receives only the options it declares.

Options: every backend declares what it accepts (``Environment.OPTIONS``, else
its constructor's keyword parameters); anything else raises
:class:`~unsee.sandbox.errors.InvalidOption` (a ``TypeError``).
"""

from __future__ import annotations

import importlib
import logging
import threading
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Callable, Mapping

from .base import Environment, check_options, options_of
from .docker_api import INSTALL_HINT
from .errors import BackendNotFound, SandboxUnavailable

__all__ = [
    "register_backend",
    "open_environment",
    "available_backends",
    "backend_names",
    "backend_options",
    "BackendInfo",
    "BuiltinBackend",
    "BUILTIN_BACKENDS",
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
    #: the options the factory accepts (None: anything; the factory checks)
    options: frozenset[str] | None = None


@dataclass(frozen=True)
class BuiltinBackend:
    #: ``"module:Class"``, the module relative to this package
    target: str
    #: ``"module:function"`` returning None when usable, else why not
    check: str | None = None
    hint: str = ""


BUILTIN_BACKENDS: Mapping[str, BuiltinBackend] = MappingProxyType({
    "docker": BuiltinBackend(
        "docker_env:DockerEnvironment", check="docker_api:daemon_unavailable_reason", hint=INSTALL_HINT
    ),
    "local": BuiltinBackend("local:LocalEnvironment"),
    "python": BuiltinBackend("pyobject:PythonObjectEnvironment"),
})

#: the backends ``auto`` chooses between: the first usable one, else the last
AUTO_CHOICES = ("docker", "local")

_lock = threading.RLock()
_backends: dict[str, BackendInfo] = {}  # registered, or built-ins already imported


def register_backend(
    name: str,
    factory: Callable[..., Environment],
    *,
    check: Callable[[], str | None] | None = None,
    hint: str = "",
    options: frozenset[str] | set[str] | None = None,
    replace: bool = False,
) -> None:
    """Register a backend. ``check()`` returns None when usable, else why not.

    ``options`` defaults to what the factory declares (``OPTIONS`` of an
    Environment subclass, else its keyword parameters). ``replace=True``
    replaces an existing backend, built-ins included.
    """
    if name == "auto":
        raise ValueError("'auto' is reserved")
    declared = frozenset(options) if options is not None else options_of(factory)
    with _lock:
        if (name in _backends or name in BUILTIN_BACKENDS) and not replace:
            raise ValueError(f"sandbox backend {name!r} is already registered")
        _backends[name] = BackendInfo(name, factory, check, hint, declared)


def backend_names() -> list[str]:
    with _lock:
        return sorted(set(_backends) | set(BUILTIN_BACKENDS))


def available_backends() -> dict[str, str | None]:
    """Every registered backend -> None if usable, else why not."""
    return {name: _check(_info(name)) for name in backend_names()}


def backend_options(backend: str) -> frozenset[str] | None:
    """The options ``open_environment(backend, ...)`` accepts (None: any).

    For ``auto``: those of either backend it may pick.
    """
    if backend == "auto":
        sets = [_info(name).options for name in AUTO_CHOICES]
        return None if any(s is None for s in sets) else frozenset().union(*sets)
    return _info(backend).options


def open_environment(backend: str = "auto", **opts: Any) -> Environment:
    """Open an environment of the named backend.

    ``auto`` means docker when usable (daemon reachable, image present), else
    local; each gets only the options it declares. Raises BackendNotFound for
    unknown names, InvalidOption for an option the backend does not declare
    (for ``auto``: neither backend), and SandboxUnavailable (with what to
    install/start) when the backend cannot be used here.
    """
    if backend == "auto":
        return _open_auto(opts)
    info = _info(backend)
    check_options(backend, info.options, opts)
    why = _check(info)
    if why is not None:
        raise SandboxUnavailable(
            f"sandbox backend {backend!r} is unavailable: {why}", backend=backend, hint=info.hint
        )
    return info.factory(**opts)


def _open_auto(opts: dict[str, Any]) -> Environment:
    check_options("auto", backend_options("auto"), opts)
    *preferred, fallback = [_info(name) for name in AUTO_CHOICES]
    for info in preferred:
        why = _check(info)
        if why is None:
            try:
                return info.factory(**_only(info, opts))
            except SandboxUnavailable as exc:  # e.g. daemon up but no sandbox image
                why = str(exc)
        log.info("sandbox: %s unavailable (%s); using the %s backend", info.name, why, fallback.name)
    return open_environment(fallback.name, **_only(fallback, opts))


def _only(info: BackendInfo, opts: dict[str, Any]) -> dict[str, Any]:
    if info.options is None:
        return dict(opts)
    return {k: v for k, v in opts.items() if k in info.options}


def _info(name: str) -> BackendInfo:
    with _lock:
        info = _backends.get(name)
        if info is None:
            builtin = BUILTIN_BACKENDS.get(name)
            if builtin is None:
                raise BackendNotFound(name, backend_names() + ["auto"])
            info = _backends[name] = _load(name, builtin)
        return info


def _load(name: str, builtin: BuiltinBackend) -> BackendInfo:
    factory = _resolve(builtin.target)
    check = _resolve(builtin.check) if builtin.check else None
    return BackendInfo(name, factory, check, builtin.hint, options_of(factory))


def _resolve(ref: str) -> Any:
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(f"{__package__}.{module}"), attr)


def _check(info: BackendInfo) -> str | None:
    if info.check is None:
        return None
    try:
        return info.check()
    except Exception as exc:  # a check must never raise
        return f"availability check failed: {exc}"
