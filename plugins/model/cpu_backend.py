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
  only tokens the model picks itself are kept;
- every CPU while no other process needs one
  (:class:`ThreadGovernor`), one product per layer for q/k/v and one for
  gate/up (:func:`_fuse_projections`), and an own forward without
  transformers' plumbing (:func:`_fast_forward`), then a leaner one
  (:func:`_lean_forward`: fewer torch calls, additive masks cached per pass)
  and the weights on 2 MB pages (:func:`_use_huge_pages`): none of these
  changes a bit of the logits (``tests/model/test_cpu_threads.py``).

*What the logits depend on.* A pass's bits are a function of the cache, the
tokens, the pass's shape (how many tokens it runs: a speculative draft's rows
differ from one-token passes' in the last bits) and of :meth:`TorchRuntime.numerics`
(backend, kernel mode, torch/transformers, weights, the CPU's dispatch level
and model) -- not of torch's thread count, and so not of the machine's load,
which the governor follows. That took two changes (``KERNELS``
``thread-invariant-1``; ``UNSEE_CPU_INVARIANT=0`` gives the previous calls):

- attention (:func:`_attend`): the CPU flash kernel's result for a head
  depended on which thread computed it whenever a head had fewer than 4
  query rows (every one-token pass): each thread's scratch buffer sits at
  another alignment and MKL's small products sum in another order there.
  Every SDPA call now has at least 4 rows per head (a one-token pass stacks
  the 3 query heads of a key/value head and pads a zero row);
- elementwise ``exp``/``cos``/``sin`` (SiLU, the rotary embedding): ATen
  splits a large op between threads at ``numel / threads``; where that is
  not a multiple of 32 elements (5, 7, 15, 16 threads...) the elements there
  take the scalar path, which rounds differently. They now run in blocks that
  split at whole rows (:func:`_row_blocks`).

The linear products (oneDNN, MKL for the LM head) split rows and columns
between threads, never a sum: the same bits with 1 to 64 threads (measured).
Against the previous path (``fast=False``) only the kernels' summation order
differs (logits within ~1e-4); greedy tokens were the same in every
comparison made (see docs/model.md).
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


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - non-Linux
        return os.cpu_count() or 1


def default_threads() -> int:
    """Threads for CPU inference when the count is fixed: ``$UNSEE_TORCH_THREADS``,
    else one less than the CPUs this process may run on (at least 1).

    The fast path (the default) fixes the count only when ``$UNSEE_TORCH_THREADS``
    or ``threads=`` asks for it; otherwise :class:`ThreadGovernor` chooses before
    every forward pass between all CPUs and this count. The legacy path always
    uses this count.

    Leaving a core free matters when another process is busy: on the 2-core VM,
    with any other busy process (a second model, dockerd, the test runner),
    torch with 2 threads fell to ~80 tok/s prefill and ~2 tok/s decode, while
    1 thread kept ~235 and ~13 (quiet machine, 2 threads: ~400 and ~14).
    """
    fixed = requested_threads()
    return fixed if fixed else max(1, _cpus() - 1)


def requested_threads() -> int | None:
    """``$UNSEE_TORCH_THREADS`` when it is a positive integer, else None."""
    env = os.environ.get("UNSEE_TORCH_THREADS", "").strip()
    return int(env) if env.isdigit() and int(env) > 0 else None


#: seconds of history behind a thread-count decision (/proc/stat counts in 10 ms ticks)
GOVERNOR_WINDOW = 0.2
#: CPU (in cores) other processes may use while the fast path runs on every core
OTHERS_LIMIT = 0.25


def _system_busy_seconds() -> float | None:
    """CPU seconds all CPUs spent busy since boot (``/proc/stat``), None where unreadable."""
    try:
        with open("/proc/stat", "rb") as f:
            fields = f.readline().split()[1:9]
        ticks = [int(x) for x in fields]
        return (sum(ticks) - ticks[3] - ticks[4]) / _CLOCK_TICKS
    except (OSError, ValueError, IndexError):  # pragma: no cover - not Linux
        return None


try:
    _CLOCK_TICKS = float(os.sysconf("SC_CLK_TCK"))
except (AttributeError, ValueError, OSError):  # pragma: no cover - not POSIX
    _CLOCK_TICKS = 100.0


class ThreadGovernor:
    """Torch's thread count for the next forward pass: ``high`` (every CPU) while
    other processes leave the CPUs free, ``low`` (one fewer) while they do not.

    Every forward pass runs OpenMP parallel regions that end at a barrier; a
    thread that loses its core to another process holds up the others. On the
    2-core VM a decode pass with 2 threads took ~60 ms on an idle machine, ~85 ms
    with 1 thread, and 200-800 ms with 2 threads next to one busy process. So
    before each pass (at most every :data:`GOVERNOR_WINDOW` seconds) the
    governor reads how much CPU the rest of the machine used since its last
    look (``/proc/stat`` busy time less this process's CPU time) and picks
    ``high`` below :data:`OTHERS_LIMIT` cores, ``low`` above.

    A pass gives the same bits with either count only with the fast path's
    thread-invariant kernels (the default, :data:`KERNELS`; see the module
    docstring): with torch's own SDPA for one query, 1 and 2 threads gave
    different low bits on the 2-core VM, so a run recorded on an idle machine
    and replayed next to a busy process could decode another token at a
    near-tie. ``tests/model/test_cpu_threads.py`` checks 1 to 4 threads bit
    for bit, and passes run while another process keeps a core busy. With
    ``invariant=False`` (and on the legacy path, whose count is fixed) the
    bits depend on the count, and :meth:`TorchRuntime.numerics` names it.
    """

    def __init__(self, high: int, low: int) -> None:
        self.high, self.low = max(1, high), max(1, min(low, high))
        self.threads = self.high
        self._at: tuple[float, float, float] | None = None
        #: passes run with each count (for benchmarks and tests)
        self.passes = {self.high: 0, self.low: 0}
        self.others = 0.0

    def choose(self) -> int:
        if self.high == self.low:
            return self.high
        now = time.perf_counter()
        if self._at is None or now - self._at[0] >= GOVERNOR_WINDOW:
            busy = _system_busy_seconds()
            if busy is None:
                self.high = self.low = self.threads = self.low
                return self.low
            own = time.process_time()
            if self._at is not None:
                t, b, o = self._at
                self.others = max(0.0, (busy - b) - (own - o)) / max(now - t, 1e-9)
                self.threads = self.high if self.others < OTHERS_LIMIT else self.low
            self._at = (now, busy, own)
        return self.threads

    def apply(self) -> None:
        """Set torch's (process-wide) thread count for the pass about to run."""
        import torch

        n = self.choose()
        self.passes[n] = self.passes.get(n, 0) + 1
        if torch.get_num_threads() != n:
            torch.set_num_threads(n)


def huge_pages_wanted() -> bool:
    """Move the fast path's weights onto 2 MB pages unless ``$UNSEE_CPU_HUGEPAGES`` is ``0``."""
    return os.environ.get("UNSEE_CPU_HUGEPAGES", "1").strip() != "0" and os.path.exists("/proc/self/maps")


def _anonymous_mappings() -> dict[int, tuple[int, int]]:
    """start -> (end, resident bytes) of this process's writable anonymous
    mappings (the heap included), from ``/proc/self/smaps``."""
    out: dict[int, tuple[int, int]] = {}
    try:
        with open("/proc/self/smaps") as f:
            current = None
            for line in f:
                parts = line.split()
                if not parts:
                    continue
                if "-" in parts[0] and len(parts) >= 5 and not parts[0].endswith(":"):
                    current = None
                    if parts[1][:2] == "rw" and (len(parts) == 5 or parts[5] == "[heap]"):
                        lo, hi = (int(x, 16) for x in parts[0].split("-"))
                        out[lo] = (hi, 0)
                        current = lo
                elif current is not None and parts[0] == "Rss:":
                    out[current] = (out[current][0], int(parts[1]) * 1024)
    except (OSError, ValueError):  # pragma: no cover - not Linux
        return {}
    return out


def _anon_huge_bytes() -> int:
    """Bytes of this process's anonymous memory on huge pages (``AnonHugePages``)."""
    try:
        with open("/proc/self/smaps_rollup") as f:
            for line in f:
                if line.startswith("AnonHugePages:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):  # pragma: no cover - not Linux
        pass
    return 0


#: madvise(2) advice values (Linux): allow huge pages; collapse a range into them now (Linux >= 6.1)
_MADV_HUGEPAGE, _MADV_COLLAPSE = 14, 25
_HUGE = 1 << 21


def _use_huge_pages(before: dict[int, tuple[int, int]]) -> tuple[float, int]:
    """Back the memory the model's weights were put in (the anonymous mappings
    made, grown or filled since ``before``) with 2 MB pages: ``madvise(MADV_HUGEPAGE)``
    then ``MADV_COLLAPSE`` over each such mapping's 2 MB-aligned interior.

    A decode pass streams ~540 MB of weights; on 4 KB pages that is ~130,000
    TLB misses per pass, each a nested page walk in a VM. On the 2-core VM
    (idle, 2 threads), ~840 MB on 2 MB pages made decode passes 2-4 % faster
    (1 token 36.7 -> 35.4 ms, 6 tokens 45.2 -> 43.5 ms, 17 tokens 62.5 -> 61.5
    ms) for ~2 s once at load.
    Only where the pages lie changes: the same values, the same kernels (the
    same bits). Where the kernel refuses (THP ``never``, no MADV_COLLAPSE,
    not Linux) nothing changes. Returns (seconds, MB now on huge pages)."""
    t0 = time.perf_counter()
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        madvise = libc.madvise
        madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    except (OSError, AttributeError):  # pragma: no cover - not glibc
        return 0.0, 0
    huge0 = _anon_huge_bytes()
    for lo, (hi, rss) in _anonymous_mappings().items():
        was = before.get(lo)
        if was is not None and was[0] == hi and rss - was[1] < _HUGE:
            continue  # there before the model, and it did not fill it: not its weights
        a, b = (lo + _HUGE - 1) & ~(_HUGE - 1), hi & ~(_HUGE - 1)
        if b - a < _HUGE:
            continue
        if madvise(a, b - a, _MADV_HUGEPAGE) != 0:
            break  # THP off: no use trying the others
        madvise(a, b - a, _MADV_COLLAPSE)  # EINVAL where a part cannot be collapsed: the rest is
    done = max(0, _anon_huge_bytes() - huge0)
    seconds = time.perf_counter() - t0
    log.info("weights on 2 MB pages: %d MB in %.1f s", done >> 20, seconds)
    return seconds, done >> 20


class _Shared:
    """Weights and tokenizer shared by a runtime and the ones it spawns."""

    def __init__(self, folder: Path, threads: int | None, fast: bool = True, invariant: bool = True) -> None:
        try:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError as exc:
            raise BackendUnavailableError("cpu", INSTALL_HINT, str(exc)) from exc
        if not (folder / "config.json").is_file():
            raise ModelNotFoundError(f"{folder} is not a model folder (no config.json)")
        fixed = threads or requested_threads()
        if fixed or not fast:
            self.governor = ThreadGovernor(fixed or default_threads(), fixed or default_threads())
        else:  # every CPU while no other process needs one (see ThreadGovernor)
            self.governor = ThreadGovernor(_cpus(), default_threads())
        torch.set_num_threads(self.governor.threads)
        t0 = time.perf_counter()
        mapped_before = _anonymous_mappings() if fast and huge_pages_wanted() else {}
        from .convert import quiet_transformers

        with quiet_transformers():
            self.tokenizer = AutoTokenizer.from_pretrained(str(folder))
            self.model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32)
        self.model.eval()
        self.fast = bool(fast)
        #: the fast path's kernels give the same bits for every thread count (see :func:`_attend`)
        self.invariant = self.fast and bool(invariant)
        #: :meth:`TorchRuntime.numerics` without the per-runtime parts, made once
        self.numerics: dict[str, str] | None = None
        #: seconds spent moving the weights onto huge pages (:func:`_use_huge_pages`), MB moved
        self.huge_pages = (0.0, 0)
        if self.fast:
            _fuse_projections(self.model)
            _swap_linears(self.model)
            _use_appended_attention(self.model)
            _release_freed_memory()
            if huge_pages_wanted():
                self.huge_pages = _use_huge_pages(mapped_before)
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
                setattr(parent, name, _FastLinear(child.weight.detach(), child.bias, child is head))


#: the products fused into one per layer: (module, fused attribute, parts)
FUSED = (("self_attn", "qkv_proj", ("q_proj", "k_proj", "v_proj")),
         ("mlp", "gate_up_proj", ("gate_proj", "up_proj")))


def _fuse_projections(model: Any) -> None:
    """One product per layer for the query/key/value projections and one for the
    MLP's gate and up projections (their weights stacked by rows, then prepacked):
    a decode pass makes 151 weight-streaming calls instead of 211. Each output
    column is the same dot product as before (the same bits: the kernels split
    the columns, not the sums; ``tests/model/test_cpu_threads.py``). The old
    attributes become :class:`_Part` views of the fused product, so transformers'
    own forward (another attention implementation) still works."""
    import torch
    from torch import nn

    for layer in getattr(getattr(model, "model", None), "layers", ()):
        for owner_name, fused_name, parts in FUSED:
            owner = getattr(layer, owner_name, None)
            linears = [getattr(owner, name, None) for name in parts]
            if owner is None or not all(isinstance(x, nn.Linear) and x.bias is None for x in linears):
                continue
            weight = torch.cat([x.weight.detach() for x in linears], dim=0)
            fused = _FastLinear(weight, None, False)
            del weight
            setattr(owner, fused_name, fused)
            lo = 0
            for name, linear in zip(parts, linears):
                setattr(owner, name, _Part(fused, lo, lo + linear.out_features))
                lo += linear.out_features


def _Part(whole: Any, lo: int, hi: int) -> Any:  # noqa: N802 - a class made on first use
    global _PART
    if _PART is None:
        from torch import nn

        class Part(nn.Module):
            """Columns ``lo:hi`` of a fused product (for transformers' own forward;
            the fast forward computes the fused product once)."""

            def __init__(self, whole: Any, lo: int, hi: int) -> None:
                super().__init__()
                self.lo, self.hi = lo, hi
                self.out_features = hi - lo
                object.__setattr__(self, "whole", whole)  # not a submodule: listed once

            def forward(self, x: Any) -> Any:
                return self.whole(x)[..., self.lo:self.hi]

        _PART = Part
    return _PART(whole, lo, hi)


_PART: type | None = None


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

        def __init__(self, w: torch.Tensor, bias: Any, head: bool) -> None:
            super().__init__()
            self.out_features, self.in_features = w.shape
            self.bias = bias
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


#: :func:`_lean_forward` where the model has its shape (else :func:`_fast_forward`)
LEAN = os.environ.get("UNSEE_CPU_LEAN", "1") != "0"

#: name of :func:`_appended_attention` in transformers' ``AttentionInterface``
ATTENTION = "unsee_cpu_sdpa"
#: queries per attention call when several tokens are appended to a cache
ATTENTION_CHUNK = 64

#: The fast path's kernel mode when its bits do not depend on the thread count
#: (:func:`invariant_by_default`); part of :meth:`TorchRuntime.numerics`. Raise the
#: number whenever a change to the fast path changes a bit of its logits.
KERNELS = "thread-invariant-1"

#: Fewest query rows an SDPA call gets per (batch, head): see :func:`_attend`.
MIN_ATTENTION_ROWS = 4
#: ATen's ``at::internal::GRAIN_SIZE``: an elementwise op over more elements is
#: split between threads (:func:`_row_blocks`).
GRAIN = 32768


def invariant_by_default() -> bool:
    """Thread-count-invariant kernels on the fast path unless ``$UNSEE_CPU_INVARIANT``
    is ``0`` (which gives the previous, thread-dependent SDPA and activation calls,
    kept for ``benchmarks/bench_model.py``)."""
    return os.environ.get("UNSEE_CPU_INVARIANT", "1").strip() != "0"


#: the kernel mode of the forward pass running on this thread (set by ``_forward_rows``)
_PASS = threading.local()


def _invariant() -> bool:
    return getattr(_PASS, "invariant", True)


def _attend(query: Any, key: Any, value: Any, scaling: float | None) -> Any:
    """Causal attention of ``n`` queries appended after ``past`` cached positions
    (``query`` (1, heads, n, dim); ``key``/``value`` (1, groups, past + n, dim));
    the output as (1, n, heads, dim), contiguous. Its bits do not depend on
    torch's thread count.

    Why: the CPU flash kernel gives each thread a scratch buffer of
    ``rows x (keys of a block + 2 + dim)`` floats, one after the other, and hands
    the (batch, head) items out between the threads; with fewer than 4 query rows
    per head, MKL's product over a scratch row that is not 16-byte aligned sums
    in another order. Thread 0's buffer is always aligned, the others' are
    wherever the size puts them: a head computed by another thread came out
    different in the last bits (a one-token pass: 1 query row per head; on this
    VM, 1 vs 2 threads differed for most cache lengths). With 4 or more rows
    per head no thread count changed a bit (``tests/model/test_cpu_threads.py``
    sweeps rows, cache lengths and thread counts). So:

    - one query: the query heads that share a key/value head are stacked as
      rows (as :func:`_appended_attention` does), padded with zero rows to
      :data:`MIN_ATTENTION_ROWS`; the padding rows' outputs are dropped;
    - a prompt on an empty cache of at least :data:`MIN_ATTENTION_ROWS` tokens:
      transformers' own call (causal flash attention, the same bits as before);
    - otherwise (tokens after cached ones, a 2- or 3-token prompt): stacked
      rows in chunks with additive masks (:func:`_chunk_masks`, never a chunk
      of one query), padded where a chunk still has too few rows.
    """
    import torch
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    _, heads, n, dim = query.shape
    groups = key.shape[1]
    rep = heads // groups
    past = key.shape[2] - n
    if n == 1:
        q = query.reshape(1, groups, rep, dim)
        if rep < MIN_ATTENTION_ROWS:
            q = torch.cat((q, q.new_zeros(1, groups, MIN_ATTENTION_ROWS - rep, dim)), dim=2)
        out = sdpa(q, key, value, scale=scaling)
        return out[:, :, :rep].reshape(1, 1, heads, dim)
    if past == 0 and n >= MIN_ATTENTION_ROWS:
        out = sdpa(query, key, value, is_causal=True, scale=scaling, enable_gqa=rep > 1)
        return out.transpose(1, 2).contiguous()
    outs = []
    for s, e, mask in _chunk_masks(past, n, rep):
        rows = rep * (e - s)
        q = query[:, :, s:e].reshape(1, groups, rows, dim)
        if rows < MIN_ATTENTION_ROWS:
            pad = MIN_ATTENTION_ROWS - rows
            q = torch.cat((q, q.new_zeros(1, groups, pad, dim)), dim=2)
            mask = torch.cat((mask, mask.new_zeros(1, 1, pad, mask.shape[-1])), dim=2)
        out = sdpa(q, key[:, :, :past + e], value[:, :, :past + e], attn_mask=mask, scale=scaling)
        outs.append(out[:, :, :rows].reshape(1, heads, e - s, dim))
    out = outs[0] if len(outs) == 1 else torch.cat(outs, dim=2)
    return out.transpose(1, 2).contiguous()


def _appended_attention(module: Any, query: Any, key: Any, value: Any, attention_mask: Any,
                        dropout: float = 0.0, scaling: float | None = None, **kwargs: Any) -> tuple[Any, None]:
    """SDPA for the fast path, registered as :data:`ATTENTION`.

    With this name transformers builds no mask (it is not in its mask
    interface): the runtime never pads and runs batches of one sequence, so
    the mask is always causal and made here. With the thread-invariant kernels
    (the default) every call goes to :func:`_attend`, except a prompt of
    :data:`MIN_ATTENTION_ROWS` or more tokens on an empty cache, which goes to
    transformers' own ``sdpa_attention_forward`` exactly as before. Several
    tokens appended to a cache (a speculative draft, a prompt after a reused
    prefix) were the slow case there: an explicit mask over all keys and every
    key/value head repeated for its query heads (``repeat_kv``). Here the query
    heads sharing a key/value head are stacked as rows (no key/value copy, as
    transformers does for one query) and the queries run in chunks of
    :data:`ATTENTION_CHUNK` against only the keys they can see (about half the
    work of a long prompt).
    """
    import torch
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    b, heads, q, dim = query.shape
    kv = key.shape[2]
    if attention_mask is not None or b != 1 or dropout:
        return sdpa_attention_forward(module, query, key, value, attention_mask,
                                      dropout=dropout, scaling=scaling, **kwargs)
    if _invariant():
        if q >= kv and q >= MIN_ATTENTION_ROWS:
            return sdpa_attention_forward(module, query, key, value, None, dropout=0.0, scaling=scaling, **kwargs)
        return _attend(query, key, value, scaling), None
    if q == 1 or q >= kv:  # the previous, thread-dependent calls (UNSEE_CPU_INVARIANT=0)
        return sdpa_attention_forward(module, query, key, value, attention_mask,
                                      dropout=dropout, scaling=scaling, **kwargs)
    groups = key.shape[1]
    rep = heads // groups
    past = kv - q
    outs = []
    for s, e, mask in _chunk_masks(past, q, rep, merge=False):
        n = e - s
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


#: the masks of the last (past, queries, heads per key/value head): every layer of a pass uses the same
_MASKS: tuple[tuple[int, int, int, bool], list[tuple[int, int, Any]]] | None = None


def _chunk_masks(past: int, q: int, rep: int, merge: bool = True) -> list[tuple[int, int, Any]]:
    """(start, end, mask) of each chunk of :data:`ATTENTION_CHUNK` queries appended
    after ``past`` cached positions; built once per forward pass, not once per layer.
    A last chunk of one query joins the one before it (one query is too few rows
    for a thread-invariant SDPA: :func:`_attend`; ``merge=False``: the previous,
    thread-dependent chunks).
    The masks are additive (0 where a query sees the key, -inf where not): SDPA
    turns a bool mask into exactly that on every call (~7 % of a long prefill)."""
    global _MASKS
    import torch

    key = (past, q, rep, merge)
    cached = _MASKS
    if cached is not None and cached[0] == key:
        return cached[1]
    starts = list(range(0, q, ATTENTION_CHUNK))
    if merge and len(starts) > 1 and q - starts[-1] < 2:
        starts.pop()
    chunks = []
    for i, s in enumerate(starts):
        e = starts[i + 1] if i + 1 < len(starts) else q
        n = e - s
        hidden = torch.arange(past + e) > (past + s + torch.arange(n)).unsqueeze(1)  # (n, past + e)
        # additive, as SDPA makes a bool mask on every call (where(mask, 0, -inf)): the same values
        mask = torch.zeros(rep * n, past + e).masked_fill_(hidden.repeat(rep, 1), float("-inf"))
        chunks.append((s, e, mask.view(1, 1, rep * n, past + e)))
    _MASKS = (key, chunks)
    return chunks


def _row_blocks(rows: int, width: int, threads: int) -> list[tuple[int, int]]:
    """Row ranges to run an elementwise op over a (rows, width) tensor in, so that
    ATen splits each call between threads only at whole rows.

    ATen runs an op over more than :data:`GRAIN` elements on ``t = min(threads,
    ceil(numel / GRAIN))`` threads, each taking ``ceil(numel / t)`` consecutive
    elements. Its vectorised kernels do the elements in groups of 32 from the
    start of a thread's range and a shorter tail one by one, and for ``exp``,
    ``cos`` and ``sin`` (SiLU, the rotary embedding) a group and the scalar
    tail can round differently: where a range starts mid-row at a point that is
    not a multiple of 32 (numel / t for a ``t`` not dividing it evenly: 5, 7,
    15, 16 threads), some elements change bits with the thread count. Ranges
    whose row count is a multiple of ``t`` (and whose size makes ATen take
    exactly ``t`` threads) split at whole rows; a rest that fits in
    :data:`GRAIN` runs on one thread. Each row is then computed as with one
    thread: the same bits for every thread count."""
    out: list[tuple[int, int]] = []
    s = 0
    per = max(1, GRAIN // max(1, width))
    while s < rows:
        r = rows - s
        if threads <= 1 or r * width <= GRAIN:
            out.append((s, rows))
            break
        for t in range(min(threads, -(-r * width // GRAIN)), 1, -1):
            # ATen takes exactly t threads for (t - 1) * GRAIN < numel <= t * GRAIN (any larger numel
            # when t is every thread); within that, the largest row count divisible by t
            cap = r if t == threads else min(r, t * GRAIN // width)
            n = (cap // t) * t
            if n and n * width > (t - 1) * GRAIN:
                out.append((s, s + n))
                s += n
                break
        else:
            out.append((s, s + min(r, per)))
            s += min(r, per)
    return out


def _silu_mul(act: Any, silu: bool, gu: Any, g: int) -> Any:
    """``act(gu[..., :g]) * gu[..., g:]`` (the MLP's gated activation) on (1, n, 2g);
    with the thread-invariant kernels and an ``act`` that is SiLU (``silu``) the
    activation runs in :func:`_row_blocks` (the same bits for every thread
    count; the product is exact in any split)."""
    import torch

    n = gu.shape[1]
    if not silu or not _invariant() or n * g <= GRAIN:
        return act(gu[..., :g]).mul_(gu[..., g:])
    out = torch.empty(gu.shape[0], n, g, dtype=gu.dtype)
    for s, e in _row_blocks(n, g, torch.get_num_threads()):
        torch.ops.aten.silu.out(gu[:, s:e, :g], out=out[:, s:e])
    return out.mul_(gu[..., g:])


def _is_silu(module: Any) -> bool:
    """Whether an activation module computes ``F.silu`` (transformers' ``SiLUActivation``, torch's ``SiLU``)."""
    return type(module).__name__ in ("SiLUActivation", "SiLU")


def _rotary(rotary_emb: Any, x: Any, past: int, n: int) -> tuple[Any, Any]:
    """``rotary_emb(x, position_ids)`` for positions ``past .. past + n - 1``; with
    the thread-invariant kernels in blocks of at most :data:`GRAIN` values, each
    run on one thread (``cos``/``sin`` round alike for every thread count; the
    rest of the computation is one product per value)."""
    import torch

    positions = (torch.arange(n) + past).unsqueeze(0)
    inv_freq = getattr(rotary_emb, "inv_freq", None)
    dim = 2 * int(inv_freq.shape[-1]) if inv_freq is not None else 0
    if (not _invariant() or not dim or n * dim <= GRAIN
            or getattr(rotary_emb, "rope_type", "default") != "default"):
        return rotary_emb(x, position_ids=positions)
    step = max(1, GRAIN // dim)
    parts = [rotary_emb(x, position_ids=positions[:, s:s + step]) for s in range(0, n, step)]
    return torch.cat([c for c, _ in parts], dim=1), torch.cat([s for _, s in parts], dim=1)


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


def _FastLinear(weight: Any, bias: Any, head: bool) -> Any:  # noqa: N802 - a class made on first use (torch imported lazily)
    global _FAST_LINEAR
    if _FAST_LINEAR is None:
        _FAST_LINEAR = _fast_linear_class()
    return _FAST_LINEAR(weight, bias, head)


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


def _fast_forward(model: Any, ids: Any, cache: Any, n_rows: int) -> Any:
    """transformers' ``LlamaForCausalLM`` forward (transformers 5.23), the same
    operations in the same order on the same tensors (the same bits), without its
    plumbing (output capture, mask building, keyword routing, per-module hooks)
    and with the fused products of :func:`_fuse_projections`. The logits of the
    last ``n_rows`` positions (0: all). Used on the fast path while the model's
    attention is :data:`ATTENTION` (no mask to build)."""
    import torch
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    inner = model.model
    n = ids.shape[1]
    x = inner.embed_tokens(ids)
    cos, sin = _rotary(inner.rotary_emb, x, cache.get_seq_length(), n)
    for i, layer in enumerate(inner.layers[: model.config.num_hidden_layers]):
        attn, mlp = layer.self_attn, layer.mlp
        residual = x
        h = layer.input_layernorm(x)
        shape = (1, n, -1, attn.head_dim)
        qkv = attn.qkv_proj(h) if hasattr(attn, "qkv_proj") else None
        if qkv is not None:
            a, b = attn.q_proj.hi, attn.k_proj.hi
            q, k, v = qkv[..., :a], qkv[..., a:b], qkv[..., b:]
        else:
            q, k, v = attn.q_proj(h), attn.k_proj(h), attn.v_proj(h)
        q, k = apply_rotary_pos_emb(q.view(shape).transpose(1, 2), k.view(shape).transpose(1, 2), cos, sin)
        k, v = cache.update(k, v.view(shape).transpose(1, 2), attn.layer_idx)
        out, _ = _appended_attention(attn, q, k, v, None, dropout=0.0, scaling=attn.scaling)
        x = residual + attn.o_proj(out.reshape(1, n, -1).contiguous())
        residual = x
        h = layer.post_attention_layernorm(x)
        if hasattr(mlp, "gate_up_proj"):
            gu = mlp.gate_up_proj(h)
            g = mlp.gate_proj.hi
            x = residual + mlp.down_proj(_silu_mul(mlp.act_fn, _is_silu(mlp.act_fn), gu, g))
        else:
            x = residual + mlp.down_proj(mlp.act_fn(mlp.gate_proj(h)) * mlp.up_proj(h))
    x = inner.norm(x)
    return model.lm_head(x if n_rows == 0 else x[:, -n_rows:, :])


class _LeanLayer:
    """What :func:`_lean_forward` needs of one decoder layer, looked up once."""

    __slots__ = ("norm1", "eps1", "qkv", "q_end", "k_end", "o", "norm2", "eps2", "gate_up", "g", "down",
                 "act", "silu", "idx", "scaling", "groups")

    def __init__(self, layer: Any) -> None:
        attn, mlp = layer.self_attn, layer.mlp
        self.norm1, self.eps1 = layer.input_layernorm.weight, layer.input_layernorm.variance_epsilon
        self.norm2, self.eps2 = layer.post_attention_layernorm.weight, layer.post_attention_layernorm.variance_epsilon
        self.qkv, self.q_end, self.k_end = attn.qkv_proj, attn.q_proj.hi, attn.k_proj.hi
        self.o, self.gate_up, self.g, self.down = attn.o_proj, mlp.gate_up_proj, mlp.gate_proj.hi, mlp.down_proj
        self.act = mlp.act_fn.forward
        self.silu = _is_silu(mlp.act_fn)
        self.idx, self.scaling = attn.layer_idx, attn.scaling
        self.groups = getattr(attn, "num_key_value_groups", 1)


def _lean_plan(model: Any) -> list[_LeanLayer] | None:
    """The layers for :func:`_lean_forward`, or None where the model is not the
    Llama shape it reproduces (then :func:`_fast_forward` runs)."""
    plan = getattr(model, "_unsee_lean", False)
    if plan is not False:
        return plan
    from torch import nn
    from transformers.models.llama.modeling_llama import LlamaRMSNorm

    plan = []
    fast_linear = _fast_linear_class() if _FAST_LINEAR is None else _FAST_LINEAR
    inner = getattr(model, "model", None)
    try:
        for layer in inner.layers[: model.config.num_hidden_layers]:
            attn, mlp = layer.self_attn, layer.mlp
            ok = (type(layer.input_layernorm) is LlamaRMSNorm and type(layer.post_attention_layernorm) is LlamaRMSNorm
                  and all(isinstance(m, fast_linear) for m in (attn.qkv_proj, attn.o_proj, mlp.gate_up_proj,
                                                                mlp.down_proj))
                  and isinstance(mlp.act_fn, nn.Module)
                  and getattr(attn, "is_causal", True) and not getattr(attn, "sliding_window", None))
            if not ok:
                plan = None
                break
            plan.append(_LeanLayer(layer))
        if plan is not None and type(inner.norm) is not LlamaRMSNorm:
            plan = None
    except AttributeError:
        plan = None
    model._unsee_lean = plan
    return plan


def _rms_norm(x: Any, weight: Any, eps: float) -> Any:
    """``LlamaRMSNorm`` on fp32 (``weight * (x * rsqrt(mean(x^2) + eps))``), its
    operations on the same values, the intermediate ones in place (a product is
    the same bits in either order)."""
    v = x.pow(2).sum(-1, keepdim=True).div_(x.shape[-1])  # what ``mean`` runs on the CPU, without its wrapper
    v.add_(eps).rsqrt_()
    h = x * v
    return h.mul_(weight)


def _lean_forward(model: Any, plan: list[_LeanLayer], ids: Any, cache: Any, n_rows: int) -> Any:
    """:func:`_fast_forward` with fewer torch calls: each layer's operations on
    the same values in the same order (the same bits), without module calls,
    with the query and key rotated in one go, intermediate results updated in
    place, and the attention called as :func:`_appended_attention` calls it
    (:func:`_attend`: SDPA whose bits do not depend on the thread count; a
    prompt of 4 or more tokens on an empty cache as transformers'
    ``sdpa_attention_forward`` calls it). The rotary embedding and the MLP's
    activation run in blocks that ATen splits between threads at whole rows
    (:func:`_rotary`, :func:`_silu_mul`).

    Rotary: transformers computes ``q * cos + cat(-q2, q1) * sin`` per head; here
    ``qk * cos + cat(qk2, qk1) * cat(-sin1, sin2)`` over the query and key heads
    together (``(-a) * b`` and ``a * (-b)`` round alike: the same bits)."""
    import torch
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    inner = model.model
    n = ids.shape[1]
    past = cache.get_seq_length()
    x = inner.embed_tokens(ids)
    cos, sin = _rotary(inner.rotary_emb, x, past, n)
    half = cos.shape[-1] // 2
    cos = cos.unsqueeze(2)  # (1, n, 1, head_dim): over the heads of (1, n, heads, head_dim)
    sin = torch.cat((-sin[..., :half], sin[..., half:]), dim=-1).unsqueeze(2)
    layers = cache.layers
    invariant = _invariant()
    masks = _chunk_masks(past, n, plan[0].groups, merge=False) if 1 < n and past > 0 and not invariant else None
    for lay in plan:
        h = _rms_norm(x, lay.norm1, lay.eps1)
        qkv = lay.qkv.forward(h)
        dim = cos.shape[-1]
        qk = qkv[..., : lay.k_end].view(1, n, -1, dim)
        rot = torch.cat((qk[..., half:], qk[..., :half]), dim=-1).mul_(sin)
        qk = (qk * cos).add_(rot)
        heads = lay.q_end // dim
        q = qk[:, :, :heads].transpose(1, 2)
        k = qk[:, :, heads:].transpose(1, 2)
        v = qkv[..., lay.k_end:].view(1, n, -1, dim).transpose(1, 2)
        k, v = layers[lay.idx].update(k, v)
        if invariant:
            out = _attend(q, k, v, lay.scaling)
        elif masks is None:  # one query, or a prompt on an empty cache: transformers' call
            out = sdpa(q, k, v, attn_mask=None, dropout_p=0.0, scale=lay.scaling, is_causal=n > 1,
                       enable_gqa=lay.groups > 1)
            out = out.reshape(1, -1, n, dim).transpose(1, 2).contiguous()
        else:
            out, _ = _appended_attention(None, q, k, v, None, dropout=0.0, scaling=lay.scaling)
        x = lay.o.forward(out.reshape(1, n, -1)).add_(x)
        h = _rms_norm(x, lay.norm2, lay.eps2)
        gu = lay.gate_up.forward(h)
        x = lay.down.forward(_silu_mul(lay.act, lay.silu, gu, lay.g)).add_(x)
    x = _rms_norm(x, inner.norm.weight, inner.norm.variance_epsilon)
    return model.lm_head.forward(x if n_rows == 0 else x[:, -n_rows:, :])


class TorchRuntime(SharedWeightsRuntime):
    """A transformers causal LM on the CPU with one persistent ``DynamicCache``.

    ``fast`` (default: :func:`fast_by_default`) selects the fast decode path
    (see the module docstring); ``fast=False`` is the previous one
    (``nn.Linear``, a concatenating ``DynamicCache``, no speculative
    decoding), kept for comparison (``benchmarks/bench_model.py``).
    ``invariant`` (default: :func:`invariant_by_default`) gives the fast path
    kernels whose bits do not depend on torch's thread count (and so not on
    the machine's load, which the governor follows); ``invariant=False`` is
    the previous, thread-dependent attention and activation calls, kept for
    comparison. The modes belong to the loaded weights: spawned runtimes
    share them. :meth:`numerics` says what the logits depend on.
    """

    backend = "cpu"

    def __init__(
        self, folder: Path | str | None = None, *, threads: int | None = None,
        fast: bool | None = None, invariant: bool | None = None, _shared: _Shared | None = None,
    ) -> None:
        if _shared is None:
            if folder is None:
                raise ValueError("TorchRuntime needs a model folder")
            _shared = _Shared(Path(folder), threads, fast_by_default() if fast is None else fast,
                              invariant_by_default() if invariant is None else invariant)
        super().__init__(_shared)
        #: speculative decoding on the fast path (set 0 on a runtime to turn it off)
        self.draft_max = DRAFT_MAX if self.fast else 0

    @property
    def fast(self) -> bool:
        return bool(getattr(self._shared, "fast", False))

    @property
    def invariant(self) -> bool:
        """Whether a pass gives the same bits with every thread count (the fast path's default)."""
        return bool(getattr(self._shared, "invariant", False))

    @property
    def model(self) -> Any:
        return self._shared.model

    def numerics_info(self) -> dict[str, str]:
        """What this runtime's logits depend on (see :mod:`.numerics`): the backend
        and its path, the kernel mode (with the thread count only where the bits
        depend on it: the legacy path, ``invariant=False``), torch and
        transformers, the weights, the CPU's dispatch level and model, and
        settings that change the CPU libraries' arithmetic (:meth:`numerics`
        adds the draft length). Made once per loaded model; stable across
        processes on the same machine and packages."""
        from . import numerics

        shared = self._shared
        with self.lock:
            if getattr(shared, "numerics", None) is None:
                import torch

                gov = shared.governor
                if not shared.fast:
                    kernels, threads = "transformers", str(gov.high)
                elif shared.invariant:
                    kernels, threads = KERNELS, ""
                else:
                    kernels = "thread-dependent"
                    threads = str(gov.high) if gov.high == gov.low else f"{gov.high} or {gov.low} by load"
                info = {"backend": self.backend, "path": "fast" if shared.fast else "legacy", "kernels": kernels}
                if threads:
                    info["threads"] = threads
                info.update(numerics.versions("torch", "transformers"))
                info["weights"] = numerics.weights_digest(shared.folder)
                info["isa"] = numerics.cpu_capability(torch)
                info["cpu"] = numerics.cpu_model()
                info.update(numerics.cpu_math_settings(torch))
                shared.numerics = info
            return dict(shared.numerics)

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
        return self._forward_rows(tokens, 1)[-1]

    def _forward_all(self, tokens: list[int]) -> Any:
        return self._forward_rows(tokens, 0)

    def _forward_rows(self, tokens: list[int], n_rows: int) -> Any:
        """The logits of the last ``n_rows`` positions (0: all), computing no others."""
        import torch

        if self._cache is None:
            self._cache = self._new_cache()
        with self.lock, torch.inference_mode():
            self._shared.governor.apply()
            ids = torch.tensor([tokens], dtype=torch.long)
            model = self.model
            was, _PASS.invariant = _invariant(), self.invariant
            try:
                if self.fast and model.config._attn_implementation == ATTENTION:
                    plan = _lean_plan(model) if LEAN else None
                    if plan is not None:  # a new tensor, kept by nothing else: no copy needed
                        return _lean_forward(model, plan, ids, self._cache, n_rows)[0]
                    else:
                        logits = _fast_forward(model, ids, self._cache, n_rows)
                else:
                    out = model(input_ids=ids, past_key_values=self._cache, use_cache=True,
                                logits_to_keep=n_rows)
                    self._cache = out.past_key_values
                    logits = out.logits
            finally:
                _PASS.invariant = was
            return logits[0].float().clone()

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


__all__ = ["KERNELS", "TorchRuntime", "default_threads", "invariant_by_default"]
