"""GPU backend: ExLlamaV2 (``exllamav2==0.3.2``) on CUDA.

Loads the same converted fp16 safetensors folder as the CPU backend (the
conversion writes the top-level ``rope_theta`` exllamav2 reads; without it
exllamav2 silently uses 10000 instead of SmolLM2's 100000). The cache is an
``ExLlamaV2Cache``; cropping sets ``cache.current_seq_len`` (O(1), nothing is
copied or zeroed: positions past the length are overwritten by later writes).

``exllamav2`` compiles its CUDA extension on first import and fails without
CUDA, so it is imported only inside :class:`ExLlamaRuntime`'s constructor:
CPU machines never touch CUDA code. Its prefill is made causal
(:func:`causal_attention`: exllamav2 0.3.2's SDPA path is not). Tokenization and chat templating use the
Hugging Face tokenizer of the folder, so prompts are token-identical to the
CPU backend's; sampling and grammar masks are the shared torch code.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path
from typing import Any

from .errors import BackendUnavailableError, ModelNotFoundError
from .runtime import SharedWeightsRuntime

log = logging.getLogger(__name__)

INSTALL_HINT = "exllamav2==0.3.2 (pip install 'unsee[gpu]') on a machine with an NVIDIA GPU and CUDA"


def causal_attention(config: Any, attn: Any = None) -> str:
    """Make a prefill of several tokens causal; returns the attention path exllamav2 will take.

    Without flash-attn or xformers, exllamav2 0.3.2 attends through torch SDPA with a
    block-diagonal mask that is None when no sequence boundaries are set (``attn.py``
    ``_attn_torch``; ``attn_params.py`` ``get_block_diag_mask``): every token of a prefill then
    sees the tokens after it, deterministically, so only a one-shot-versus-token-by-token test
    shows it. ``no_sdpa`` sends it to the matmul path, which builds a causal mask offset by the
    cache's length (a prefill after a crop). It is read at every forward from this config.
    ``attn``: exllamav2's ``attn`` module (its ``has_flash_attn``/``has_xformers``), when loaded.
    """
    config.no_sdpa = True
    if getattr(attn, "has_flash_attn", False):
        return "flash-attn"
    if getattr(attn, "has_xformers", False):
        return "xformers"
    return "matmul"


def gpu_name(torch: Any, index: int = 0) -> str:
    """The GPU's name and compute capability (``NVIDIA H200 sm_90``): the CUDA
    kernels exllamav2 and cuBLAS run, and so the order of their sums, depend on them."""
    try:
        major, minor = torch.cuda.get_device_capability(index)
        return f"{torch.cuda.get_device_name(index)} sm_{major}{minor}"
    except Exception:  # no CUDA here (the fingerprint is still made, from what is known)
        return "unknown"


class _Shared:
    def __init__(self, folder: Path, max_seq_len: int | None) -> None:
        try:
            import torch
        except ImportError as exc:
            raise BackendUnavailableError("exllamav2", INSTALL_HINT, str(exc)) from exc
        if not torch.cuda.is_available():
            raise BackendUnavailableError("exllamav2", INSTALL_HINT, "CUDA is not available")
        try:
            from exllamav2 import ExLlamaV2, ExLlamaV2Config
            from exllamav2 import attn as exllama_attn
        except Exception as exc:  # ImportError, or the extension build failing
            raise BackendUnavailableError("exllamav2", INSTALL_HINT, str(exc)) from exc
        from transformers import AutoTokenizer

        cfg_path = folder / "config.json"
        if not cfg_path.is_file():
            raise ModelNotFoundError(f"{folder} is not a model folder (no config.json)")
        if "rope_theta" not in json.loads(cfg_path.read_text()):
            raise ModelNotFoundError(
                f"{cfg_path} lacks a top-level rope_theta; reconvert with unsee "
                "(exllamav2 would silently use 10000)"
            )
        t0 = time.perf_counter()
        config = ExLlamaV2Config(str(folder))
        if max_seq_len:
            config.max_seq_len = int(max_seq_len)
        self.attention = causal_attention(config, exllama_attn)  # before the model reads its config
        self.config = config
        self.model = ExLlamaV2(config)
        self.model.load()
        self.tokenizer = AutoTokenizer.from_pretrained(str(folder))
        self.folder = folder
        #: what the numerics fingerprint names of the GPU and its toolkit (:meth:`ExLlamaRuntime.numerics_info`)
        self.device = gpu_name(torch)
        self.cuda = str(getattr(torch.version, "cuda", None) or "none")
        self.numerics: dict[str, str] | None = None
        self.max_context = int(config.max_seq_len)
        self.lock = threading.RLock()
        self.load_seconds = time.perf_counter() - t0
        log.info("exllamav2 loaded %s in %.1f s", folder, self.load_seconds)


class ExLlamaRuntime(SharedWeightsRuntime):
    """An ExLlamaV2 model on CUDA with one persistent ``ExLlamaV2Cache``."""

    backend = "exllamav2"

    def __init__(
        self, folder: Path | str | None = None, *, max_seq_len: int | None = None,
        _shared: _Shared | None = None,
    ) -> None:
        if _shared is None:
            if folder is None:
                raise ValueError("ExLlamaRuntime needs a model folder")
            _shared = _Shared(Path(folder), max_seq_len)
        super().__init__(_shared)

    @property
    def vocab_size(self) -> int:
        return int(getattr(self._shared.config, "vocab_size", None) or len(self.tokenizer))

    def numerics_info(self) -> dict[str, str]:
        """What this runtime's logits depend on (see :mod:`.numerics`): the backend,
        its attention path (:func:`causal_attention`), fp16, the longest chunk a
        prefill is split into (``max_input_len``), exllamav2, torch and CUDA
        versions, the GPU (name and compute capability), the weights, and
        cuBLAS's reduced-precision setting where it is not the default. Made
        without running the model (read from what the load recorded); made once
        per loaded model."""
        from . import numerics

        shared = self._shared
        made = getattr(shared, "numerics", None)
        if made is not None:
            return dict(made)
        info = {"backend": self.backend, "attention": str(getattr(shared, "attention", "unknown")),
                "dtype": "fp16"}
        chunk = getattr(getattr(shared, "config", None), "max_input_len", None)
        if chunk:
            info["chunk"] = str(int(chunk))
        info.update(numerics.versions("exllamav2", "torch"))
        info["cuda"] = str(getattr(shared, "cuda", "unknown"))
        info["device"] = str(getattr(shared, "device", "unknown"))
        info["weights"] = numerics.weights_digest(getattr(shared, "folder", None))
        try:
            import torch

            if not torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction:
                info["fp16_reduction"] = "full"
        except Exception:  # pragma: no cover - torch without the setting
            pass
        shared.numerics = info
        return dict(info)

    def _ensure_cache(self) -> Any:
        if self._cache is None:
            from exllamav2 import ExLlamaV2Cache

            self._cache = ExLlamaV2Cache(
                self._shared.model, batch_size=1, max_seq_len=self.max_context
            )
        return self._cache

    def _forward(self, tokens: list[int], want_logits: bool) -> Any:
        import torch

        cache = self._ensure_cache()
        with self.lock, torch.inference_mode():
            ids = torch.tensor([tokens], dtype=torch.long)
            logits = self._shared.model.forward(ids, cache, last_id_only=True)
            return logits[0, -1].float()

    def _forward_all(self, tokens: list[int]) -> Any:
        # One pass; exllamav2 splits it into chunks of config.max_input_len itself.
        import torch

        cache = self._ensure_cache()
        with self.lock, torch.inference_mode():
            ids = torch.tensor([tokens], dtype=torch.long)
            return self._shared.model.forward(ids, cache, last_id_only=False)[0].float()

    def _crop_cache(self, n_tokens: int) -> None:
        if self._cache is not None:
            self._cache.current_seq_len = n_tokens


__all__ = ["ExLlamaRuntime"]
