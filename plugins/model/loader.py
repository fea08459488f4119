"""Backend selection: ``load_runtime(spec)``.

``spec`` is ``"cpu"`` (transformers on the CPU, the embedded default),
``"exllamav2"`` (ExLlamaV2 on CUDA), ``"auto"`` (exllamav2 when it is usable,
else cpu) or the path of a converted model folder (loaded with ``backend``,
default cpu). The named backends load the SmolLM2 folder converted once per
user into the model cache (``$UNSEE_MODEL_CACHE`` or ``~/.unsee/models``, see
:mod:`.convert`). A backend that cannot run here raises
:class:`~.errors.BackendUnavailableError` naming what to install.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from .convert import Progress, ensure_converted
from .errors import BackendUnavailableError, ModelNotFoundError, UnknownBackendError
from .runtime import LocalRuntime

log = logging.getLogger(__name__)

BACKENDS = ("cpu", "exllamav2")
SPECS = ("cpu", "exllamav2", "auto")


def _construct(backend: str, folder: Path, **kwargs: Any) -> LocalRuntime:
    if backend == "cpu":
        from .cpu_backend import TorchRuntime  # torch is imported (and its absence reported) on load

        return TorchRuntime(folder, **kwargs)
    if backend == "exllamav2":
        from .exllama_backend import ExLlamaRuntime

        return ExLlamaRuntime(folder, **kwargs)
    raise UnknownBackendError(backend, BACKENDS)


def load_runtime(
    spec: str | Path = "cpu",
    home: Path | str | None = None,
    *,
    backend: str = "cpu",
    cache_dir: Path | str | None = None,
    progress: Progress | None = None,
    **kwargs: Any,
) -> LocalRuntime:
    """Load a local runtime.

    ``home`` (an Unsee home) is accepted for compatibility and no longer used:
    the converted weights live in the per-user model cache, ``cache_dir`` when
    given, else ``$UNSEE_MODEL_CACHE``, else ``~/.unsee/models``. ``progress``
    is told when the one-time conversion starts and ends. ``kwargs`` go to the
    backend constructor (``threads=`` for cpu, ``max_seq_len=`` for exllamav2).
    """
    del home  # the weights are per user, not per project

    def folder() -> Path:
        return ensure_converted(cache_dir, progress=progress)

    if isinstance(spec, str) and spec in SPECS:
        if spec == "auto":
            try:
                _check_available("exllamav2")
                return _construct("exllamav2", folder(), **kwargs)
            except BackendUnavailableError as exc:
                log.info("exllamav2 unavailable (%s); using the cpu backend", exc.reason)
                _check_available("cpu")
                return _construct("cpu", folder(), **kwargs)
        _check_available(spec)
        return _construct(spec, folder(), **kwargs)
    path = Path(spec).expanduser()
    if path.is_dir():
        if backend not in BACKENDS:
            raise UnknownBackendError(backend, BACKENDS)
        _check_available(backend)
        return _construct(backend, path, **kwargs)
    if isinstance(spec, Path) or "/" in str(spec) or str(spec).startswith("."):
        raise ModelNotFoundError(f"model folder {path} does not exist")
    raise UnknownBackendError(str(spec), SPECS)


def _check_available(backend: str) -> None:
    """Fail fast (before any conversion) when a backend cannot run here."""
    import importlib.util

    if backend == "exllamav2":
        from .exllama_backend import INSTALL_HINT

        if importlib.util.find_spec("exllamav2") is None:
            raise BackendUnavailableError("exllamav2", INSTALL_HINT, "exllamav2 is not installed")
        try:
            import torch
        except ImportError as exc:
            raise BackendUnavailableError("exllamav2", INSTALL_HINT, str(exc)) from exc
        if not torch.cuda.is_available():
            raise BackendUnavailableError("exllamav2", INSTALL_HINT, "CUDA is not available")
    elif backend == "cpu":
        from .cpu_backend import INSTALL_HINT

        for mod in ("torch", "transformers"):
            if importlib.util.find_spec(mod) is None:
                raise BackendUnavailableError("cpu", INSTALL_HINT, f"{mod} is not installed")


__all__ = ["BACKENDS", "load_runtime"]
