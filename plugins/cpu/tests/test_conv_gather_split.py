"""The im2col conv's column copies and bias add split over the intra-op threads (``gather``):
the bits of the unsplit path, close to torch, and chosen by timing at load only at > 1 thread."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from threadpoolctl import threadpool_limits

import srcore
from srcore_cpu.kernels import conv as C
from srcore_cpu.kernels import conv_im2col as I
from srcore_cpu.kernels import parallel as P

TORCH = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}

# (x shape, weight shape, stride, padding, dilation, groups, bias): resnet's 7x7/2 stem (column
# phases, 3 channels), 3x3 padded (several 2 MiB chunks), one input channel (split by taps), grouped,
# dilated, batch 2, no bias, odd sizes, 1-D and 3-D
CASES = [
    ((1, 3, 64, 64), (16, 3, 7, 7), 2, 3, 1, 1, True),
    ((1, 32, 60, 60), (24, 32, 3, 3), 1, 1, 1, 1, True),
    ((1, 1, 40, 33), (8, 1, 5, 5), 1, 2, 1, 1, True),
    ((2, 8, 21, 19), (12, 4, 3, 3), 2, 1, 2, 2, True),
    ((1, 5, 17, 23), (7, 5, 3, 2), (1, 2), (1, 0), 1, 1, False),
    ((1, 6, 50), (4, 6, 5), 1, 2, 1, 1, True),
    ((1, 3, 9, 10, 11), (4, 3, 3, 3, 3), 1, 1, 1, 1, True),
]



@pytest.fixture(autouse=True)
def _blas_on_one_thread():
    # the bits compared here are one-thread BLAS bits (the split holds numpy's BLAS at one thread); pytest
    # without xdist leaves OpenBLAS threaded, which sums some products in another order
    with threadpool_limits(1, user_api="blas"):
        yield

def _args(case, seed=0):
    xs, ws, stride, padding, dilation, groups, bias = case
    nd = len(xs) - 2
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(xs, dtype=np.float32)
    w = rng.standard_normal(ws, dtype=np.float32)
    b = rng.standard_normal(ws[0], dtype=np.float32) if bias else None
    return nd, x, w, b, C._tup(stride, nd), C._tup(padding, nd), C._tup(dilation, nd), groups


@pytest.mark.one_pass
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("gather", [2, 3])
def test_split_gather_has_the_bits_of_one_thread_and_matches_torch(case, gather):
    nd, x, w, b, stride, padding, dilation, groups = _args(case)
    pads = C._pads(padding, w.shape[2:], stride, dilation, nd)
    one = I.conv_forward(x, w, b, stride, pads, dilation, groups)
    split = I.conv_forward(x, w, b, stride, pads, dilation, groups, gather=gather)
    np.testing.assert_array_equal(split, one)
    t = torch.from_numpy
    ref = TORCH[nd](t(x), t(w), None if b is None else t(b), stride, padding, dilation, groups).numpy()
    np.testing.assert_allclose(split, ref, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(ref).max())))


@pytest.mark.one_pass
def test_split_gather_into_a_non_contiguous_out():
    nd, x, w, b, stride, padding, dilation, groups = _args(CASES[1])
    pads = C._pads(padding, w.shape[2:], stride, dilation, nd)
    one = I.conv_forward(x, w, b, stride, pads, dilation, groups)
    big = np.zeros((1, 2 * one.shape[1]) + one.shape[2:], np.float32)
    out = big[:, ::2]
    I.conv_forward(x, w, b, stride, pads, dilation, groups, out=out, gather=2)
    np.testing.assert_array_equal(out, one)
    assert not big[:, 1::2].any()


def _make(case, monkeypatch, intra, choice, seen):
    nd, x, w, b, stride, padding, dilation, groups = _args(case, seed=1)
    monkeypatch.setattr(P, "intra_op_threads", lambda: intra)

    def fastest(cands, args, **kw):
        seen.append(sorted(cands))
        for name in (choice, "im2col"):   # (a 3x3 conv's Winograd timing: im2col, to reach the gather)
            if name in cands:
                return name
        return next(iter(cands))
    monkeypatch.setenv("SRCORE_CPU_SIMD_CONV", "0")   # (the SIMD conv's own timing: test_conv_simd.py)
    monkeypatch.setattr(C._tactic, "fastest", fastest)
    fn = C.make_conv(nd, w, b, stride, padding, dilation, groups, input_shape=x.shape)
    return fn, x


@pytest.mark.one_pass
@pytest.mark.parametrize("choice", ["split", "one"])
def test_make_conv_times_the_split_at_two_threads_and_keeps_the_bits(monkeypatch, choice):
    case = CASES[1]
    seen = []
    fn, x = _make(case, monkeypatch, 2, choice, seen)
    assert ["one", "split"] in seen
    calls = []
    real = I.conv_forward
    monkeypatch.setattr(C, "conv_forward", lambda *a, **k: calls.append(k.get("gather")) or real(*a, **k))
    got = fn(x)
    assert calls == [2 if choice == "split" else 1]
    nd, x1, w, b, stride, padding, dilation, groups = _args(case, seed=1)
    pads = C._pads(padding, w.shape[2:], stride, dilation, nd)
    np.testing.assert_array_equal(got, real(x1, w, b, stride, pads, dilation, groups))


@pytest.mark.one_pass
def test_one_thread_times_nothing_and_small_or_gemm_convs_are_not_timed(monkeypatch):
    seen = []
    _make(CASES[1], monkeypatch, 1, "split", seen)
    assert ["one", "split"] not in seen           # 1 intra-op thread: no timing, no split
    for case in [((1, 64, 28, 28), (64, 64, 1, 1), 1, 0, 1, 1, True),   # a GEMM on the input
                 ((1, 4, 8, 8), (4, 4, 3, 3), 1, 1, 1, 1, True)]:      # a column matrix too small
        _make(case, monkeypatch, 2, "split", seen)
    assert ["one", "split"] not in seen


def test_a_conv_model_at_two_threads_split_everywhere_matches_one_thread_bits(monkeypatch):
    # the matcher hands the static input shape to make_conv: every im2col conv times (here: takes)
    # the split, and the module's outputs are the 1-thread module's bits
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 7, 2, 3), torch.nn.ReLU(), torch.nn.Conv2d(16, 24, 3, 2, 1),
                            torch.nn.Conv2d(24, 8, 5, 1, 2, groups=2)).eval()
    args = (torch.randn(1, 3, 96, 96),)
    ts = srcore.from_torchscript(torch.jit.script(m), args)
    feed = args[0].numpy()

    def fastest(cands, args, **kw):   # the same choices in both modules, but for the split
        return next((n for n in ("split", "im2col", "gemm", "other") if n in cands), next(iter(cands)))
    monkeypatch.setenv("SRCORE_CPU_SIMD_CONV", "0")   # (the SIMD conv's own timing: test_conv_simd.py)
    monkeypatch.setattr(C._tactic, "fastest", fastest)
    monkeypatch.setattr(P, "intra_op_threads", lambda: 1)
    want = srcore.StaticModule(ts)(feed)
    want = want[0] if isinstance(want, (list, tuple)) else want
    np.testing.assert_allclose(want, m(*args).detach().numpy(), rtol=1e-4, atol=1e-4)
    monkeypatch.setattr(P, "intra_op_threads", lambda: 2)
    gathers = []
    real = I.conv_forward
    monkeypatch.setattr(C, "conv_forward", lambda *a, **k: gathers.append(k.get("gather")) or real(*a, **k))
    got = srcore.StaticModule(ts)(feed)
    got = got[0] if isinstance(got, (list, tuple)) else got
    assert gathers.count(2) >= 2, gathers      # the stem and the stride-2 conv run split
    np.testing.assert_array_equal(got, want)


@pytest.mark.one_pass
@pytest.mark.parametrize("pays", [True, False])
@pytest.mark.parametrize("add", [True, False])
def test_fused_relu_epilogue_splits_where_timing_says_with_the_same_bits(monkeypatch, pays, add):
    from srcore.ir.types import TensorType
    from srcore.testing import node_info
    from srcore_cpu.kernels import fused_conv as FU
    from srcore_cpu.kernels import row_split as RS

    shape = (2, 16, 32, 32)           # 2^15 elements: row_split.MIN_SPLIT
    t = TensorType("float32", shape)
    rng = np.random.default_rng(3)
    w = rng.standard_normal((16, 8, 3, 3), dtype=np.float32)
    b = rng.standard_normal(16, dtype=np.float32)
    x = rng.standard_normal((2, 8, 32, 32), dtype=np.float32)
    other = rng.standard_normal(shape, dtype=np.float32)
    hp = dict(stride=[1, 1], padding=[1, 1], dilation=[1, 1], groups=1, outputs=(t,))

    def build():
        if add:
            fn = FU.conv2d_add_relu_matcher(node_info("srcore::conv2d_add_relu", input=TensorType("float32", x.shape),
                                                      weight=w, bias=b, other=t, **hp)).fn
            return fn(x, other)
        fn = FU.conv2d_relu_matcher(node_info("srcore::conv2d_relu", input=TensorType("float32", x.shape),
                                              weight=w, bias=b, **hp)).fn
        return fn(x)
    monkeypatch.setenv("SRCORE_CPU_SIMD_CONV", "0")   # (the SIMD conv's own timing: test_conv_simd.py)
    monkeypatch.setattr(C._tactic, "fastest", lambda cands, args, **kw: "one" if "one" in cands else
                        "im2col" if "im2col" in cands else next(iter(cands)))
    monkeypatch.setattr(P, "intra_op_threads", lambda: 1)
    want = build()
    ref = F.conv2d(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b), padding=1)
    ref = torch.relu(ref + torch.from_numpy(other) if add else ref).numpy()
    np.testing.assert_allclose(want, ref, rtol=1e-4, atol=1e-4)
    timed, rows = [], []
    monkeypatch.setattr(P, "intra_op_threads", lambda: 2)
    monkeypatch.setattr(RS, "split_pays", lambda one, split, args, timer=None: timed.append(1) or pays)
    real = RS.run_rows
    monkeypatch.setattr(RS, "run_rows", lambda body, n, threads: rows.append((n, threads)) or real(body, n, threads))
    got = build()
    assert timed == [1]
    assert rows == ([(32, 2)] if pays else [])
    np.testing.assert_array_equal(got, want)
