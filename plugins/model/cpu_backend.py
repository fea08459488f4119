"""CPU backend: transformers + torch (fp32) with a ``DynamicCache``.

The embedded default. Loads the converted safetensors folder (see
:mod:`.convert`), keeps one ``DynamicCache`` per runtime and crops it in O(1)
(tensor slicing is a view; no copy).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

from .errors import BackendUnavailableError, ModelNotFoundError
from .runtime import SharedWeightsRuntime

log = logging.getLogger(__name__)

INSTALL_HINT = "'unsee[local]' (torch==2.13.0 CPU wheel, transformers==5.23.0, gguf, accelerate)"


def default_threads() -> int:
    """Threads for CPU inference: ``$UNSEE_TORCH_THREADS``, else one less than
    the CPUs this process may run on (at least 1).

    Leaving a core free matters: on the 2-core VM, with any other busy process
    (a second model, dockerd, the test runner), torch with 2 threads fell to
    ~80 tok/s prefill and ~2 tok/s decode, while 1 thread kept ~235 and ~13
    (quiet machine, 2 threads: ~400 and ~14).
    """
    env = os.environ.get("UNSEE_TORCH_THREADS")
    if env and env.isdigit() and int(env) > 0:
        return int(env)
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - non-Linux
        n = os.cpu_count() or 1
    return max(1, n - 1)


class _Shared:
    """Weights and tokenizer shared by a runtime and the ones it spawns."""

    def __init__(self, folder: Path, threads: int | None) -> None:
        try:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError as exc:
            raise BackendUnavailableError("cpu", INSTALL_HINT, str(exc)) from exc
        if not (folder / "config.json").is_file():
            raise ModelNotFoundError(f"{folder} is not a model folder (no config.json)")
        torch.set_num_threads(threads or default_threads())
        t0 = time.perf_counter()
        from .convert import quiet_transformers

        with quiet_transformers():
            self.tokenizer = AutoTokenizer.from_pretrained(str(folder))
            self.model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32)
        self.model.eval()
        self.load_seconds = time.perf_counter() - t0
        self.folder = folder
        self.max_context = int(getattr(self.model.config, "max_position_embeddings", 8192))
        self.lock = threading.RLock()
        log.info("loaded %s in %.1f s", folder, self.load_seconds)


class TorchRuntime(SharedWeightsRuntime):
    """A transformers causal LM on the CPU with one persistent ``DynamicCache``."""

    backend = "cpu"

    def __init__(
        self, folder: Path | str | None = None, *, threads: int | None = None,
        _shared: _Shared | None = None,
    ) -> None:
        if _shared is None:
            if folder is None:
                raise ValueError("TorchRuntime needs a model folder")
            _shared = _Shared(Path(folder), threads)
        super().__init__(_shared)

    @property
    def model(self) -> Any:
        return self._shared.model

    @property
    def vocab_size(self) -> int:
        return int(getattr(self.model.config, "vocab_size", None) or len(self.tokenizer))

    # -- backend hooks -------------------------------------------------------
    def _new_cache(self) -> Any:
        from transformers import DynamicCache

        return DynamicCache(config=self.model.config)

    def _forward(self, tokens: list[int], want_logits: bool) -> Any:
        import torch

        if self._cache is None:
            self._cache = self._new_cache()
        with self.lock, torch.inference_mode():
            ids = torch.tensor([tokens], dtype=torch.long)
            out = self.model(
                input_ids=ids, past_key_values=self._cache, use_cache=True, logits_to_keep=1
            )
            self._cache = out.past_key_values
            return out.logits[0, -1].float().clone()

    def _forward_all(self, tokens: list[int]) -> Any:
        import torch

        if self._cache is None:
            self._cache = self._new_cache()
        with self.lock, torch.inference_mode():
            ids = torch.tensor([tokens], dtype=torch.long)
            out = self.model(input_ids=ids, past_key_values=self._cache, use_cache=True)
            self._cache = out.past_key_values
            return out.logits[0].float().clone()

    def _crop_cache(self, n_tokens: int) -> None:
        if self._cache is None:
            return
        if n_tokens == 0:
            self._cache = None
            return
        # transformers 5: crop(positive n) raises; a negative n drops that many
        # tokens from the end. Slicing is a view: O(1) in context length.
        self._cache.crop(n_tokens - self._cache.get_seq_length())


__all__ = ["TorchRuntime", "default_threads"]
