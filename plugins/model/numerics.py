"""Numerics fingerprints: what a runtime's logits depend on, as one short string.

A forget replays model turns and needs them to compute exactly what the
recorded run computed. The logits bits of a forward pass are a function of the
cache and the tokens *and* of the software and hardware that computed them:
the backend and its kernel mode, the library versions, the weights, the
processor's instruction set (torch, MKL and oneDNN pick kernels by it, and a
kernel fixes the order of every sum). A runtime's ``numerics()`` names those
in one string; a replay whose string differs from the recorded one may decode
other tokens at a near-tie, and can say so.

The string is ``key=value`` pairs joined by ``;`` in a fixed order (readable in
a report, equal across processes on the same machine and packages: no process
ids, addresses, times or load). :func:`fingerprint` makes it from a backend's
``numerics_info()`` dict. Standard library only (the runtime imports without
the agent stack).
"""

from __future__ import annotations

import hashlib
import os
import platform
import threading
from pathlib import Path
from typing import Any, Mapping

from unsee.middleware.hashing import sha256_file

#: environment settings that change the CPU libraries' arithmetic or kernel choice
CPU_MATH_ENV = ("MKL_CBWR", "MKL_ENABLE_INSTRUCTIONS", "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA",
                "ONEDNN_DEFAULT_FPMATH_MODE", "DNNL_DEFAULT_FPMATH_MODE")

_LOCK = threading.Lock()
#: (resolved path, size, mtime_ns) -> sha256 of the file, for folders outside the model cache
_DIGESTS: dict[tuple[str, int, int], str] = {}
#: weight-file suffixes that make up a model folder's numbers
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".gguf", ".pt")


def fingerprint(info: Mapping[str, Any]) -> str:
    """``key=value;key=value...`` in ``info``'s order; ``;`` and ``=`` inside a value
    become ``,`` and ``:`` (so the string splits back unambiguously)."""
    def clean(value: Any) -> str:
        return " ".join(str(value).split()).replace(";", ",").replace("=", ":")

    return ";".join(f"{clean(k)}={clean(v)}" for k, v in info.items())


def parse(text: str) -> dict[str, str]:
    """The pairs of a :func:`fingerprint` (for reports that say which part differs)."""
    out: dict[str, str] = {}
    for part in text.split(";"):
        key, sep, value = part.partition("=")
        if sep:
            out[key] = value
    return out


def differences(recorded: str, now: str) -> dict[str, tuple[str | None, str | None]]:
    """key -> (recorded value, current value) for every part of two fingerprints that differs."""
    a, b = parse(recorded), parse(now)
    return {k: (a.get(k), b.get(k)) for k in list(a) + [k for k in b if k not in a] if a.get(k) != b.get(k)}


def versions(*packages: str) -> dict[str, str]:
    """package -> installed version ("none" when absent), from the distributions' metadata
    (the module's ``__version__`` where there is no distribution)."""
    import importlib.metadata
    import sys

    out = {}
    for name in packages:
        version = None
        mod = sys.modules.get(name)
        if mod is not None:
            version = getattr(mod, "__version__", None)
        if version is None:
            try:
                version = importlib.metadata.version(name)
            except importlib.metadata.PackageNotFoundError:
                version = "none"
        out[name] = str(version)
    return out


def file_sha256(path: Path) -> str:
    """sha256 of a file's content. In a converted folder of the model cache it is
    remembered in the cache's hash index (:func:`.convert.file_digest`: hashed once
    per user, not once per process); elsewhere once per process."""
    path = Path(path).resolve()
    from .convert import file_digest, is_converted

    if is_converted(path.parent):
        return file_digest(path, path.parent.parent)
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    with _LOCK:
        hit = _DIGESTS.get(key)
    if hit is None:
        hit = sha256_file(path)
        with _LOCK:
            _DIGESTS[key] = hit
    return hit


def weights_digest(folder: Path | str | None) -> str:
    """16 hex digits of the sha256 over a model folder's ``config.json`` and weight
    files (name and content digest of each); ``"unknown"`` without a folder."""
    if folder is None:
        return "unknown"
    folder = Path(folder)
    files = [folder / "config.json"] if (folder / "config.json").is_file() else []
    files += sorted(p for p in folder.iterdir() if p.is_file() and p.name.endswith(_WEIGHT_SUFFIXES))
    if not files:
        return "unknown"
    h = hashlib.sha256()
    for path in files:
        h.update(f"{path.name}\0{file_sha256(path)}\n".encode())
    return h.hexdigest()[:16]


def cpu_model() -> str:
    """The processor's model name (``/proc/cpuinfo``; else the platform's words)."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.lower().startswith(("model name", "cpu model", "hardware")):
                    return line.split(":", 1)[1].strip()
    except OSError:  # pragma: no cover - not Linux
        pass
    return platform.processor() or platform.machine() or "unknown"


def cpu_capability(torch: Any) -> str:
    """torch's CPU dispatch level (``AVX512``, ``AVX2``, ``DEFAULT``...), which selects
    its vectorised kernels."""
    try:
        return str(torch.backends.cpu.get_cpu_capability())
    except Exception:  # pragma: no cover - older torch
        return "unknown"


def cpu_math_settings(torch: Any) -> dict[str, str]:
    """Settings that change fp32 CPU arithmetic, only where they are not the
    defaults: torch's fp32 matmul precision (``high``/``medium`` let oneDNN use
    bf16/tf32), and the MKL/oneDNN environment variables in :data:`CPU_MATH_ENV`."""
    out = {}
    try:
        precision = torch.get_float32_matmul_precision()
    except Exception:  # pragma: no cover
        precision = "highest"
    if precision != "highest":
        out["fp32_matmul"] = precision
    for name in CPU_MATH_ENV:
        value = os.environ.get(name)
        if value:
            out[name.lower()] = value
    return out


__all__ = ["cpu_capability", "cpu_math_settings", "cpu_model", "differences", "file_sha256", "fingerprint",
           "parse", "versions", "weights_digest"]
