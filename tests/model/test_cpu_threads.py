"""The CPU fast path's thread governor, fused products and own forward.

The governor changes torch's thread count between forward passes (with the
machine's load); the fused products and the fast forward replace transformers'
calls. None of it may change a single bit of the logits (the forget's B7 == B5
and crop-equals-fresh guarantees rest on the same tokens): a pass gives the
same bits with 1, 2, 3 or 4 threads, next to a busy process or not (the
thread-invariant kernels: ``cpu_backend._attend``, ``_row_blocks``)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from unsee.plugins.model import cpu_backend
from unsee.plugins.model.cpu_backend import ThreadGovernor


# -- the governor (no model) ---------------------------------------------------

class _Clock:
    def __init__(self):
        self.wall = self.busy = self.own = 0.0


@pytest.fixture()
def clock(monkeypatch):
    c = _Clock()
    monkeypatch.setattr(cpu_backend, "_system_busy_seconds", lambda: c.busy)
    monkeypatch.setattr(cpu_backend.time, "perf_counter", lambda: c.wall)
    monkeypatch.setattr(cpu_backend.time, "process_time", lambda: c.own)
    return c


def _tick(c, seconds, ours, others):
    c.wall += seconds
    c.own += ours * seconds
    c.busy += (ours + others) * seconds


def test_governor_uses_every_cpu_while_nobody_else_does(clock):
    gov = ThreadGovernor(2, 1)
    assert gov.choose() == 2
    _tick(clock, 0.3, ours=2.0, others=0.05)
    assert gov.choose() == 2
    _tick(clock, 0.3, ours=1.2, others=0.8)  # another process took a core
    assert gov.choose() == 1 and gov.others == pytest.approx(0.8)
    _tick(clock, 0.3, ours=1.0, others=1.0)
    assert gov.choose() == 1
    _tick(clock, 0.05, ours=1.0, others=0.0)  # too short a window to decide again
    assert gov.choose() == 1
    _tick(clock, 0.3, ours=1.0, others=0.0)  # it finished
    assert gov.choose() == 2


def test_governor_with_a_fixed_count_or_no_proc_stat(clock, monkeypatch):
    assert ThreadGovernor(3, 3).choose() == 3
    monkeypatch.setattr(cpu_backend, "_system_busy_seconds", lambda: None)
    gov = ThreadGovernor(2, 1)
    assert gov.choose() == 1 and gov.choose() == 1


def test_fixed_thread_counts(monkeypatch):
    monkeypatch.setenv("UNSEE_TORCH_THREADS", "3")
    assert cpu_backend.requested_threads() == 3 and cpu_backend.default_threads() == 3
    monkeypatch.setenv("UNSEE_TORCH_THREADS", "zero")
    assert cpu_backend.requested_threads() is None
    assert cpu_backend.default_threads() == max(1, cpu_backend._cpus() - 1)


# -- on the model ----------------------------------------------------------------

def _fast(rt):
    if not rt.fast:
        pytest.skip("UNSEE_CPU_DECODE=legacy: the fast path is off")


def _invariant(rt):
    _fast(rt)
    if not rt.invariant:
        pytest.skip("UNSEE_CPU_INVARIANT=0: the thread-dependent kernels")


def _ids(rt, n):
    return rt.tokenize("Dana asked the support agent about ticket T-1001 and her refund. " * 40)[:n]


def _run(rt, ids):
    """Logits of a prefill on an empty cache, a prompt after a cached prefix, a
    draft-sized pass and single tokens (every shape a forget runs), then on a
    new cache: a one-token prompt, 2 and 3 tokens after it, and a prompt whose
    last chunk of queries would be a single one (65 = 64 + 1)."""
    out = [rt.prefill_logits(ids[:200]), rt._forward_rows(ids[200:260], 0)]
    out.append(rt._forward_rows(ids[260:266], 6))
    for t in ids[266:269]:
        out.append(rt._forward([t], want_logits=True).reshape(1, -1))
    short = rt.spawn()
    out += [short.prefill_logits(ids[:1]), short._forward_rows(ids[1:3], 0), short._forward_rows(ids[3:6], 0),
            short._forward_rows(ids[6:71], 0)]
    return out


def _with_governor(runtime, governor, fn):
    shared = runtime._shared
    saved = shared.governor
    shared.governor = governor
    try:
        return fn()
    finally:
        shared.governor = saved


@pytest.mark.model
def test_thread_count_does_not_change_a_bit(cpu_runtime):
    """1 thread or 2 (what the governor switches between on the 2-core VM), 3 or 4:
    the same logits, bit for bit, for every shape a forget runs."""
    import torch

    _invariant(cpu_runtime)
    got = {}
    for n in (1, 2, 3, 4):
        def run():
            rt = cpu_runtime.spawn()
            out = _run(rt, _ids(rt, 300))
            assert torch.get_num_threads() == n
            return out
        got[n] = _with_governor(cpu_runtime, ThreadGovernor(n, n), run)
    for n in (2, 3, 4):
        for i, (a, b) in enumerate(zip(got[1], got[n])):
            assert torch.equal(a, b), f"{n} threads: output {i} differs from 1 thread's"


@pytest.mark.model
def test_a_busy_neighbour_does_not_change_a_bit(cpu_runtime):
    """Passes run while another process keeps a core busy (the governor then
    drops to fewer threads; with every thread forced, they wait on each other)
    give the bits of passes run without it."""
    import torch

    _invariant(cpu_runtime)
    if cpu_backend._cpus() < 2:
        pytest.skip("one CPU: the governor has no thread count to choose")
    high, low = cpu_backend._cpus(), cpu_backend.default_threads()

    def run(governor):
        def go():
            rt = cpu_runtime.spawn()
            return _run(rt, _ids(rt, 300)), dict(governor.passes)
        return _with_governor(cpu_runtime, governor, go)

    idle, idle_passes = run(ThreadGovernor(high, low))
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.5)  # a window of the governor's history with the spinner in it
        gov = ThreadGovernor(high, low)
        gov.choose()
        time.sleep(cpu_backend.GOVERNOR_WINDOW + 0.1)
        busy, busy_passes = run(gov)
        forced, _ = run(ThreadGovernor(high, high))
    finally:
        spinner.kill()
        spinner.wait()
    assert busy_passes.get(low, 0) > 0, busy_passes  # the governor saw the spinner and dropped a thread
    for i, (a, b, c) in enumerate(zip(idle, busy, forced)):
        assert torch.equal(a, b) and torch.equal(a, c), (i, idle_passes, busy_passes)


def test_attention_rows_and_thread_counts():
    """The fast path's attention (``_attend``) on random tensors of SmolLM2's shape
    (9 query heads over 3 key/value heads of 64): one query, short prompts on an
    empty cache, tokens after cached ones (chunks of 64 queries, a last chunk of
    one), for cache lengths where torch's one-query SDPA changed bits with the
    thread count here: the same bits with 1 to 4 threads and 7."""
    torch = pytest.importorskip("torch")

    torch.manual_seed(0)
    saved = torch.get_num_threads()
    try:
        for n in (1, 2, 3, 4, 6, 17, 65):
            for past in (0, 8, 31, 100, 267, 513, 1500):
                if past == 0 and n in (17, 65):
                    continue
                q = torch.randn(1, 9, n, 64)
                k, v = torch.randn(1, 3, past + n, 64), torch.randn(1, 3, past + n, 64)
                got = []
                for threads in (1, 2, 3, 4, 7):
                    torch.set_num_threads(threads)
                    with torch.inference_mode():
                        got.append(cpu_backend._attend(q, k, v, 0.125))
                assert got[0].shape == (1, n, 9, 64)
                for threads, out in zip((2, 3, 4, 7), got[1:]):
                    assert torch.equal(got[0], out), (n, past, threads)
    finally:
        torch.set_num_threads(saved)


def test_attention_is_causal_attention():
    """``_attend`` computes causal attention (against the math on float64)."""
    torch = pytest.importorskip("torch")

    torch.manual_seed(1)
    for n, past in ((1, 0), (1, 40), (2, 0), (3, 0), (5, 0), (6, 30), (65, 10)):
        q = torch.randn(1, 9, n, 64)
        k, v = torch.randn(1, 3, past + n, 64), torch.randn(1, 3, past + n, 64)
        with torch.inference_mode():
            got = cpu_backend._attend(q, k, v, 0.125)
        kk, vv = k.double().repeat_interleave(3, dim=1), v.double().repeat_interleave(3, dim=1)
        scores = (q.double() @ kk.transpose(-1, -2)) * 0.125
        visible = torch.arange(past + n) <= (past + torch.arange(n)).unsqueeze(1)
        want = torch.softmax(scores.masked_fill(~visible, float("-inf")), -1) @ vv
        assert torch.allclose(got.double(), want.transpose(1, 2), atol=1e-5), (n, past)


@pytest.mark.parametrize("width", [64, 1536, 3072, 5000])
def test_row_blocks_split_at_whole_rows(width):
    """Every block either runs on one thread (at most ``GRAIN`` values) or makes
    ATen take ``t`` threads for a row count divisible by ``t``: its threads' ranges
    start at whole rows."""
    grain = cpu_backend.GRAIN
    for threads in (1, 2, 3, 4, 5, 7, 15, 16, 64):
        for rows in (1, 2, 21, 22, 23, 100, 301, 512, 777, 2049, 8192):
            blocks = cpu_backend._row_blocks(rows, width, threads)
            assert blocks[0][0] == 0 and blocks[-1][1] == rows
            assert all(a[1] == b[0] for a, b in zip(blocks, blocks[1:]))
            for s, e in blocks:
                numel = (e - s) * width
                if numel <= grain or threads == 1:
                    continue
                t = min(threads, -(-numel // grain))
                assert (e - s) % t == 0, (rows, threads, s, e)
            assert len(blocks) <= 8, blocks  # a few calls, not one per row


def test_gated_activation_and_rotary_with_any_thread_count():
    """SiLU (strided, as the fused gate/up product gives it) and the rotary
    embedding's cos/sin: the bits of one thread with 2, 3, 5, 7 and 16 threads,
    where ATen's own split rounds some values differently (torch's ``silu``
    rounds its scalar tail unlike its vector body)."""
    torch = pytest.importorskip("torch")
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    torch.manual_seed(2)
    act = torch.nn.SiLU()
    rotary = LlamaRotaryEmbedding(LlamaConfig(hidden_size=576, num_attention_heads=9, head_dim=64,
                                              rope_theta=100000.0, max_position_embeddings=8192))
    saved = torch.get_num_threads()
    try:
        for n in (23, 301, 600, 1100):
            gu = torch.randn(1, n, 3072) * 4
            x = torch.zeros(1, n, 576)
            got = []
            for threads in (1, 2, 3, 5, 7, 16):
                torch.set_num_threads(threads)
                with torch.inference_mode():
                    got.append((cpu_backend._silu_mul(act, True, gu, 1536), *cpu_backend._rotary(rotary, x, 40, n)))
            torch.set_num_threads(1)
            with torch.inference_mode():  # and the plain calls' bits on one thread
                plain = (act(gu[..., :1536]) * gu[..., 1536:], *rotary(x, (torch.arange(n) + 40).unsqueeze(0)))
            for threads, out in zip((1, 2, 3, 5, 7, 16), got):
                for a, b in zip(plain, out):
                    assert torch.equal(a, b), (n, threads)
    finally:
        torch.set_num_threads(saved)


@pytest.mark.model
def test_fast_forward_is_transformers_forward(cpu_runtime):
    """The fast path's own forward gives transformers' forward's bits (the same
    weights, attention and cache; transformers reads the fused products through
    the q/k/v and gate/up parts)."""
    import torch

    _fast(cpu_runtime)
    model = cpu_runtime.model
    rt = cpu_runtime.spawn()
    ids = _ids(rt, 300)
    ours = _run(rt, ids)
    theirs = []
    with torch.inference_mode():
        for passes in (((ids[:200], 0), (ids[200:260], 0), (ids[260:266], 6), *[([t], 1) for t in ids[266:269]]),
                       ((ids[:1], 0), (ids[1:3], 0), (ids[3:6], 0), (ids[6:71], 0))):
            cache = rt._new_cache()
            for chunk, keep in passes:
                out = model(input_ids=torch.tensor([chunk]), past_key_values=cache, use_cache=True,
                            logits_to_keep=keep)
                theirs.append(out.logits[0].float())
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert torch.equal(a, b)


@pytest.mark.model
def test_fused_products_are_the_separate_products(cpu_runtime):
    """Stacking the q/k/v (gate/up) weights into one prepacked product gives each
    column's bits of the separate products, for every row count a forget runs and
    both thread counts."""
    import torch
    from safetensors.torch import load_file

    _fast(cpu_runtime)
    weights = load_file(str(cpu_runtime.folder / "model.safetensors"))
    saved = torch.get_num_threads()
    try:
        for names in (("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj")):
            part = "self_attn" if names[0] == "q_proj" else "mlp"
            ws = [weights[f"model.layers.3.{part}.{n}.weight"].float() for n in names]
            fused = cpu_backend._FastLinear(torch.cat(ws), None, False)
            alone = [cpu_backend._FastLinear(w, None, False) for w in ws]
            for threads in (1, 2):
                torch.set_num_threads(threads)
                for rows in (1, 6, 17, 200):
                    x = torch.randn(1, rows, ws[0].shape[1])
                    with torch.inference_mode():
                        assert torch.equal(fused(x), torch.cat([f(x) for f in alone], dim=-1))
    finally:
        torch.set_num_threads(saved)


# -- bit-identical shortcuts (issue 32, second round) -----------------------------

def test_additive_masks_give_the_bool_masks_bits():
    """The attention masks are cached additive (0 / -inf): SDPA turns a bool mask
    into exactly that on every call, so the output is the same bits."""
    torch = pytest.importorskip("torch")
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    torch.manual_seed(0)
    past, n, rep, groups, dim = 37, 6, 3, 3, 64
    q = torch.randn(1, groups, rep * n, dim)
    k, v = torch.randn(1, groups, past + n, dim), torch.randn(1, groups, past + n, dim)
    cpu_backend._MASKS = None
    ((s, e, mask),) = cpu_backend._chunk_masks(past, n, rep)
    assert (s, e) == (0, n) and mask.dtype == torch.float32
    visible = torch.arange(past + n) <= (past + torch.arange(n)).unsqueeze(1)
    as_bool = visible.repeat(rep, 1).view(1, 1, rep * n, past + n)
    assert torch.equal(mask == 0, as_bool)
    assert bool((mask[~as_bool] == -float("inf")).all())
    assert torch.equal(sdpa(q, k, v, attn_mask=mask, scale=0.125), sdpa(q, k, v, attn_mask=as_bool, scale=0.125))


def test_huge_pages_keep_the_values():
    """Moving memory onto 2 MB pages (where the kernel allows it) keeps every value."""
    torch = pytest.importorskip("torch")
    before = cpu_backend._anonymous_mappings()
    x = torch.randn(1 << 23)  # 32 MB: a mapping of its own
    saved = x.clone()
    seconds, mb = cpu_backend._use_huge_pages(before)
    assert seconds >= 0 and mb >= 0
    assert torch.equal(x, saved)


def test_huge_pages_can_be_turned_off(monkeypatch):
    monkeypatch.setenv("UNSEE_CPU_HUGEPAGES", "0")
    assert not cpu_backend.huge_pages_wanted()


@pytest.mark.model
def test_lean_forward_is_the_fast_forward(cpu_runtime, monkeypatch):
    """The lean forward (direct calls, q and k rotated together, in-place
    intermediates) gives the generic fast forward's bits for every shape a
    forget runs, with 1 and 2 threads."""
    import torch

    _fast(cpu_runtime)
    assert cpu_backend._lean_plan(cpu_runtime.model) is not None
    shared = cpu_runtime._shared
    saved = shared.governor
    try:
        for n in (1, 2, 3):
            shared.governor = ThreadGovernor(n, n)
            got = {}
            for lean in (True, False):
                monkeypatch.setattr(cpu_backend, "LEAN", lean)
                rt = cpu_runtime.spawn()
                got[lean] = _run(rt, _ids(rt, 300))
            for a, b in zip(got[True], got[False]):
                assert torch.equal(a, b)
    finally:
        shared.governor = saved
