"""The CPU fast path's thread governor, fused products and own forward.

The governor changes torch's thread count between forward passes; the fused
products and the fast forward replace transformers' calls. None of it may
change a single bit of the logits (the forget's B7 == B5 and crop-equals-fresh
guarantees rest on the same tokens)."""

from __future__ import annotations

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


def _ids(rt, n):
    return rt.tokenize("Dana asked the support agent about ticket T-1001 and her refund. " * 40)[:n]


def _run(rt, ids):
    """Logits of a prefill on an empty cache, a prompt after a cached prefix, a
    draft-sized pass and single tokens (every shape a forget runs)."""
    out = [rt.prefill_logits(ids[:200]), rt._forward_rows(ids[200:260], 0)]
    out.append(rt._forward_rows(ids[260:266], 6))
    for t in ids[266:269]:
        out.append(rt._forward([t], want_logits=True).reshape(1, -1))
    return out


@pytest.mark.model
def test_thread_count_does_not_change_a_bit(cpu_runtime):
    """1 thread or 2 (what the governor switches between on the 2-core VM): the
    same logits, bit for bit."""
    import torch

    _fast(cpu_runtime)
    shared = cpu_runtime._shared
    saved = shared.governor
    got = {}
    try:
        for n in (1, 2):
            shared.governor = ThreadGovernor(n, n)
            rt = cpu_runtime.spawn()
            got[n] = _run(rt, _ids(rt, 300))
            assert torch.get_num_threads() == n
    finally:
        shared.governor = saved
    for a, b in zip(got[1], got[2]):
        assert torch.equal(a, b)


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
    cache = rt._new_cache()
    theirs = []
    with torch.inference_mode():
        for chunk, keep in ((ids[:200], 0), (ids[200:260], 0), (ids[260:266], 6),
                            *[([t], 1) for t in ids[266:269]]):
            out = model(input_ids=torch.tensor([chunk]), past_key_values=cache, use_cache=True,
                        logits_to_keep=keep)
            theirs.append(out.logits[0].float())
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
        for n in (1, 2):
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
