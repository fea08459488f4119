"""CPU backend: transformers + torch (fp32) with a ``DynamicCache``.

The embedded default. Loads the converted safetensors folder (see
:mod:`.convert`), keeps one ``DynamicCache`` per runtime and crops it in O(1)
(tensor slicing is a view; no copy).

Decoding one token reads all the weights (~540 MB of fp32), so it is bound by
memory bandwidth, not arithmetic. The fast path (the default; ``fast=False``
or ``$UNSEE_CPU_DECODE=legacy`` selects the previous one, kept for
comparison) changes how the weights are laid out and how often they are
read, never their values (fp32 weights, fp32 arithmetic):

- linear layers read oneDNN-prepacked weights (a product over a few rows, a
  speculative draft, costs about what one row costs) and the LM head a
  transposed copy for single rows (MKL streams it ~2x faster than
  ``F.linear``): :func:`_fast_linear_class`;
- several tokens appended to a cache (a draft, a prompt after a reused
  prefix) use an attention without repeated key/value heads that skips the
  keys a query cannot see: :func:`_appended_attention`;
- the KV cache grows in place instead of concatenating every layer's keys
  and values at every token; a crop still only moves the end:
  :func:`_growing_layer_class`;
- speculative decoding (:meth:`LocalRuntime.decode`, ``draft_max``): drafts
  looked up in the text the cache holds are verified in one forward pass;
  only tokens the model picks itself are kept.

Only the kernels' summation order differs from the previous path (logits
within ~1e-4); greedy tokens were the same in every comparison made (see
docs/model.md).
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

#: Longest speculative draft (tokens) on the fast path. Measured on the 2-core
#: VM (whole model, 700 cached tokens): a forward pass over 3-6 tokens costs 1.1x
#: a one-token pass, 7-10 tokens 1.35-1.4x, 17 tokens 1.8x.
DRAFT_MAX = 16


#: The row count oneDNN's weight layout is chosen for: a layout for 1 row makes
#: 9 rows cost 1.7x one row; one for 9+ rows keeps them at ~1x and one row as fast.
PACK_ROWS = 16


def fast_by_default() -> bool:
    """The fast decode path unless ``$UNSEE_CPU_DECODE`` is ``legacy``."""
    return os.environ.get("UNSEE_CPU_DECODE", "fast").strip().lower() != "legacy"


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

    def __init__(self, folder: Path, threads: int | None, fast: bool = True) -> None:
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
        self.fast = bool(fast)
        if self.fast:
            _swap_linears(self.model)
            _use_appended_attention(self.model)
            _release_freed_memory()
        self.load_seconds = time.perf_counter() - t0
        self.folder = folder
        self.max_context = int(getattr(self.model.config, "max_position_embeddings", 8192))
        self.lock = threading.RLock()
        log.info("loaded %s in %.1f s", folder, self.load_seconds)


def _swap_linears(model: Any) -> None:
    """Swap every ``nn.Linear`` (decoder layers and LM head) for a :class:`_FastLinear`
    over the same weights."""
    from torch import nn

    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, nn.Linear):
                setattr(parent, name, _FastLinear(child, child is head))


def _fast_linear_class() -> type:
    import torch
    from torch import nn

    class FastLinear(nn.Module):
        """``nn.Linear`` over the same fp32 weights, in layouts that read faster.

        - oneDNN's prepacked layout (``torch.ops.mkldnn._reorder_linear_weight``,
          what torch.compile's CPU freezing uses, laid out for :data:`PACK_ROWS`
          rows): a product with a few rows (a speculative draft) costs about as
          much as with one (measured on the 2-core VM, whole model: 9 rows 1.3x
          one row; MKL sgemm on the old layout: 2.4x), and prefill is as fast as
          before (~370 tok/s);
        - for the LM head (49152 x 576, a fifth of the weights) also the
          transposed (input-major) weight: one row through MKL's sgemm on it
          streams the weights at ~2x the speed of ``F.linear`` (5.5 vs 11.5 ms).

        Without oneDNN (a torch build without mkldnn) every product uses the
        transposed weight. Same fp32 values and fp32 arithmetic as ``nn.Linear``;
        only the kernels' summation order differs.
        """

        def __init__(self, linear: nn.Linear, head: bool) -> None:
            super().__init__()
            w = linear.weight.detach()
            self.in_features, self.out_features = linear.in_features, linear.out_features
            self.bias = linear.bias
            self.packed = None
            try:
                if torch.backends.mkldnn.is_available():
                    self.packed = torch.ops.mkldnn._reorder_linear_weight(w, PACK_ROWS)
            except Exception:  # pragma: no cover - depends on the torch build
                log.debug("oneDNN prepacking unavailable; using transposed weights", exc_info=True)
                self.packed = None
            self.weight_t = w.t().contiguous() if head or self.packed is None else None

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            rows = x.numel() // self.in_features
            if self.weight_t is not None and (rows == 1 or self.packed is None):
                y = torch.matmul(x, self.weight_t)
                return y if self.bias is None else y + self.bias
            y = torch.ops.mkldnn._linear_pointwise(
                x.reshape(rows, self.in_features), self.packed, self.bias, "none", [], ""
            )
            return y.reshape(*x.shape[:-1], self.out_features)

    return FastLinear


#: name of :func:`_appended_attention` in transformers' ``AttentionInterface``
ATTENTION = "unsee_cpu_sdpa"
#: queries per attention call when several tokens are appended to a cache
ATTENTION_CHUNK = 64


def _appended_attention(module: Any, query: Any, key: Any, value: Any, attention_mask: Any,
                        dropout: float = 0.0, scaling: float | None = None, **kwargs: Any) -> tuple[Any, None]:
    """SDPA for the fast path, registered as :data:`ATTENTION`.

    With this name transformers builds no mask (it is not in its mask
    interface): the runtime never pads and runs batches of one sequence, so
    the mask is always causal and made here. One query, or a prompt on an
    empty cache, goes to transformers' own ``sdpa_attention_forward`` exactly
    as before. Several tokens appended to a cache (a speculative draft, a
    prompt after a reused prefix) were the slow case there: an explicit mask
    over all keys and every key/value head repeated for its query heads
    (``repeat_kv``). Here the query heads sharing a key/value head are stacked
    as rows (no key/value copy, as transformers does for one query) and the
    queries run in chunks of :data:`ATTENTION_CHUNK` against only the keys they
    can see (about half the work of a long prompt).
    """
    import torch
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    b, heads, q, dim = query.shape
    kv = key.shape[2]
    if attention_mask is not None or b != 1 or q == 1 or q >= kv:
        return sdpa_attention_forward(module, query, key, value, attention_mask,
                                      dropout=dropout, scaling=scaling, **kwargs)
    groups = key.shape[1]
    rep = heads // groups
    past = kv - q
    outs = []
    for s in range(0, q, ATTENTION_CHUNK):
        e = min(q, s + ATTENTION_CHUNK)
        n = e - s
        visible = torch.arange(past + e) <= (past + s + torch.arange(n)).unsqueeze(1)  # (n, past + e)
        mask = visible.repeat(rep, 1).view(1, 1, rep * n, past + e)
        out = torch.nn.functional.scaled_dot_product_attention(
            query[:, :, s:e].reshape(1, groups, rep * n, dim),
            key[:, :, :past + e],
            value[:, :, :past + e],
            attn_mask=mask,
            dropout_p=dropout,
            scale=scaling,
        )
        outs.append(out.view(1, heads, n, dim))
    out = outs[0] if len(outs) == 1 else torch.cat(outs, dim=2)
    return out.transpose(1, 2).contiguous(), None


def _use_appended_attention(model: Any) -> None:
    from transformers import AttentionInterface

    AttentionInterface.register(ATTENTION, _appended_attention)
    model.set_attn_implementation(ATTENTION)


def _release_freed_memory() -> None:
    """Hand the freed fp32 weights back to the OS (glibc keeps ~400 MB of them
    in its heap otherwise); a no-op where there is no glibc."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # pragma: no cover - not glibc
        pass


def _FastLinear(linear: Any, head: bool) -> Any:  # noqa: N802 - a class made on first use (torch imported lazily)
    global _FAST_LINEAR
    if _FAST_LINEAR is None:
        _FAST_LINEAR = _fast_linear_class()
    return _FAST_LINEAR(linear, head)


_FAST_LINEAR: type | None = None
_GROWING: type | None = None


def _growing_layer_class() -> type:
    from transformers.cache_utils import DynamicLayer

    class GrowingLayer(DynamicLayer):
        """A ``DynamicLayer`` whose keys/values live in a preallocated buffer.

        ``update`` writes the new positions in place (the buffer doubles when
        full) and exposes ``buffer[..., :n, :]`` as ``keys``/``values``, where
        ``DynamicLayer`` concatenates the whole cache at every token (O(length)
        per token and layer). ``crop`` is inherited: a view of the first
        positions; the dropped ones are zeroed at once. The attention sees the
        same values as with ``DynamicLayer``.
        """

        _k: Any = None
        _v: Any = None
        #: the most positions a buffer is grown to (the model's context)
        limit: int = 1 << 30

        def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
                self._k = self._v = None
            n = self.get_seq_length()
            m = key_states.shape[-2]
            if self._k is None or self._k.shape[-2] < n + m:
                cap = max(n + m, min(self.limit, max(256, 2 * (n + m))))
                k = key_states.new_empty((*key_states.shape[:-2], cap, key_states.shape[-1]))
                v = value_states.new_empty((*value_states.shape[:-2], cap, value_states.shape[-1]))
                if n:
                    k.narrow(-2, 0, n).copy_(self.keys)
                    v.narrow(-2, 0, n).copy_(self.values)
                self._k, self._v = k, v
            self._k.narrow(-2, n, m).copy_(key_states)
            self._v.narrow(-2, n, m).copy_(value_states)
            self.keys = self._k.narrow(-2, 0, n + m)
            self.values = self._v.narrow(-2, 0, n + m)
            return self.keys, self.values

        def cut(self, keep: int) -> list[Any]:
            """Keep the first ``keep`` positions; the dropped positions' views, to be
            zeroed (a crop is how a forget drops what a secret left in the cache:
            its keys and values must not linger in the buffer until overwritten)."""
            k, v = self._k, self._v
            n = 0 if k is None else self.keys.shape[-2]
            if keep >= n:
                return []
            self.keys, self.values = k.narrow(-2, 0, keep), v.narrow(-2, 0, keep)
            return [k.narrow(-2, keep, n - keep), v.narrow(-2, keep, n - keep)]

        def crop(self, tokens_to_remove: int) -> None:
            if self._k is None or tokens_to_remove >= 0:
                super().crop(tokens_to_remove)
                return
            for dropped in self.cut(self.get_seq_length() + tokens_to_remove):
                dropped.zero_()

        def reset(self) -> None:
            self._k = self._v = None
            super().reset()

    return GrowingLayer


class TorchRuntime(SharedWeightsRuntime):
    """A transformers causal LM on the CPU with one persistent ``DynamicCache``.

    ``fast`` (default: :func:`fast_by_default`) selects the fast decode path
    (see the module docstring); ``fast=False`` is the previous one
    (``nn.Linear``, a concatenating ``DynamicCache``, no speculative
    decoding), kept for comparison (``benchmarks/bench_model.py``). The mode
    belongs to the loaded weights: spawned runtimes share it.
    """

    backend = "cpu"

    def __init__(
        self, folder: Path | str | None = None, *, threads: int | None = None,
        fast: bool | None = None, _shared: _Shared | None = None,
    ) -> None:
        if _shared is None:
            if folder is None:
                raise ValueError("TorchRuntime needs a model folder")
            _shared = _Shared(Path(folder), threads, fast_by_default() if fast is None else fast)
        super().__init__(_shared)
        #: speculative decoding on the fast path (set 0 on a runtime to turn it off)
        self.draft_max = DRAFT_MAX if self.fast else 0

    @property
    def fast(self) -> bool:
        return bool(getattr(self._shared, "fast", False))

    @property
    def model(self) -> Any:
        return self._shared.model

    @property
    def vocab_size(self) -> int:
        return int(getattr(self.model.config, "vocab_size", None) or len(self.tokenizer))

    # -- backend hooks -------------------------------------------------------
    def _new_cache(self) -> Any:
        global _GROWING
        from transformers import DynamicCache

        cache = DynamicCache(config=self.model.config)
        if self.fast:
            if _GROWING is None:
                _GROWING = _growing_layer_class()
            cache.layers = [_GROWING() for _ in cache.layers]
            for layer in cache.layers:
                layer.limit = self.max_context
        return cache

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
        return self._forward_rows(tokens, 0)

    def _forward_rows(self, tokens: list[int], n_rows: int) -> Any:
        """The logits of the last ``n_rows`` positions (0: all), computing no others."""
        import torch

        if self._cache is None:
            self._cache = self._new_cache()
        with self.lock, torch.inference_mode():
            ids = torch.tensor([tokens], dtype=torch.long)
            out = self.model(input_ids=ids, past_key_values=self._cache, use_cache=True,
                             logits_to_keep=n_rows)
            self._cache = out.past_key_values
            return out.logits[0].float().clone()

    def _drop_cache_tail(self, n_tokens: int) -> None:
        # rejected draft tokens: copies of tokens the cache holds, nothing to scrub
        self._crop_cache(n_tokens, scrub=False)

    def _crop_cache(self, n_tokens: int, *, scrub: bool = True) -> None:
        if self._cache is None:
            return
        if n_tokens == 0:
            self._cache = None
            return
        import torch

        # transformers 5: crop(positive n) raises; a negative n drops that many
        # tokens from the end. Slicing is a view: O(1) in context length (the fast
        # path's cache also zeroes the dropped positions: in inference mode, as
        # its buffers are inference tensors).
        with self.lock, torch.inference_mode():
            layers = getattr(self._cache, "layers", ())
            if layers and all(hasattr(layer, "cut") for layer in layers):
                dropped = [view for layer in layers for view in layer.cut(n_tokens)]
                if dropped and scrub:
                    torch._foreach_zero_(dropped)  # one call for all layers
                return
            self._cache.crop(n_tokens - self._cache.get_seq_length())


__all__ = ["TorchRuntime", "default_threads"]
