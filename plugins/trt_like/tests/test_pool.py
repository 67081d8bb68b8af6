"""trt_like pooling (max, avg, adaptive avg) against torch."""
from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from srcore.errors import SrcoreError
from srcore_trt_like.errors import TacticSpecError
from srcore_trt_like.conv.pool import AdaptiveAvgPool2d, AvgPool2d, MaxPool2d, MaxPool2dGather

torch = pytest.importorskip("torch")

#: kernels and compiled programs are called directly: the executor and the memory planner play no part
pytestmark = pytest.mark.one_pass
F = torch.nn.functional


def _x(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape, np.float32)


def _run(pool, x):
    out = np.full(pool.out_shape, np.nan, np.float32)
    pool(x, out)
    return out


@st.composite
def windows(draw, dilation=True):
    k = (draw(st.integers(1, 4)), draw(st.integers(1, 4)))
    d = (draw(st.integers(1, 2)), draw(st.integers(1, 2))) if dilation else (1, 1)
    limit = [ki // 2 for ki in k]                      # torch: padding at most half the kernel
    p = tuple(draw(st.integers(0, lim)) for lim in limit)
    s = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    size = [draw(st.integers(max(1, di * (ki - 1) + 1 - 2 * pi), 12)) for ki, di, pi in zip(k, d, p)]
    shape = (draw(st.integers(1, 2)), draw(st.integers(1, 3)), size[0], size[1])
    return shape, k, s, p, d, draw(st.booleans())


@settings(max_examples=150, deadline=None)
@given(w=windows(), seed=st.integers(0, 2**16))
def test_max_pool_equals_torch(w, seed):
    shape, k, s, p, d, ceil_mode = w
    x = _x(shape, seed)
    if seed % 3 == 0:
        x.reshape(-1)[seed % x.size] = np.nan
    ref = F.max_pool2d(torch.from_numpy(x), k, s, p, d, ceil_mode).numpy()
    pool = MaxPool2d(shape, k, s, p, d, ceil_mode)
    assert pool.out_shape == ref.shape
    np.testing.assert_array_equal(_run(pool, x), ref)
    # the gathered kernel of small planes (its padding taps repeat an element of their own window):
    # for every undilated pool; a dilated one may have windows without input elements (-inf), left to the rows
    gathered = MaxPool2dGather.of(pool)
    assert gathered is not None or (d != (1, 1) and np.isneginf(ref).any())
    if gathered is not None:
        np.testing.assert_array_equal(_run(gathered, x), ref)


@settings(max_examples=150, deadline=None)
@given(w=windows(dilation=False), seed=st.integers(0, 2**16), count_include_pad=st.booleans(),
       divisor=st.sampled_from([None, None, 3, -2]))
def test_avg_pool_matches_torch(w, seed, count_include_pad, divisor):
    shape, k, s, p, _, ceil_mode = w
    x = _x(shape, seed)
    ref = F.avg_pool2d(torch.from_numpy(x), k, s, p, ceil_mode, count_include_pad, divisor).numpy()
    pool = AvgPool2d(shape, k, s, p, ceil_mode, count_include_pad, divisor)
    assert pool.out_shape == ref.shape
    np.testing.assert_allclose(_run(pool, x), ref, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("shape, size", [((1, 512, 7, 7), 1), ((2, 3, 5, 4), 1), ((2, 3, 11, 13), (3, 5)),
                                         ((1, 2, 8, 8), (4, 4)), ((1, 2, 5, 7), (5, 7)), ((1, 2, 4, 5), (7, 9)),
                                         ((2, 1, 9, 2), (2, 1))])
def test_adaptive_avg_pool_matches_torch(shape, size):
    x = _x(shape, 0)
    ref = F.adaptive_avg_pool2d(torch.from_numpy(x), size).numpy()
    pool = AdaptiveAvgPool2d(shape, size)
    assert pool.out_shape == ref.shape
    np.testing.assert_allclose(_run(pool, x), ref, rtol=1e-6, atol=1e-6)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 2), c=st.integers(1, 5), h=st.integers(1, 9), w=st.integers(1, 9),
       seed=st.integers(0, 2**16), offset=st.sampled_from([0.0, 100.0]))
def test_global_avg_pool_matches_torch_for_planes_below_at_and_between_the_accumulators(n, c, h, w, seed, offset):
    """The 1x1 adaptive pool sums each plane in 8 interleaved accumulators: planes of 1..81
    elements cover the remainder loop alone, whole blocks of 8 and both together; an offset
    checks the sums' rounding against torch's float32 mean and the float64 mean."""
    x = _x((n, c, h, w), seed) + np.float32(offset)
    ref = F.adaptive_avg_pool2d(torch.from_numpy(x), 1).numpy()
    got = _run(AdaptiveAvgPool2d(x.shape, 1), x)
    np.testing.assert_allclose(got, ref, rtol=2e-6, atol=1e-6)
    np.testing.assert_allclose(got, x.astype(np.float64).mean((2, 3), keepdims=True), rtol=2e-6, atol=1e-6)


def test_global_avg_pool_propagates_nan_and_inf_from_any_accumulator():
    x = _x((1, 3, 5, 5), 1)
    x[0, 0, 2, 1] = np.nan            # element 11: accumulator 3
    x[0, 1, 4, 4] = np.inf            # element 24: the remainder loop
    x[0, 2, 0, 6 % 5] = -np.inf       # element 1: accumulator 1
    got = _run(AdaptiveAvgPool2d(x.shape, 1), x)
    ref = F.adaptive_avg_pool2d(torch.from_numpy(x), 1).numpy()
    np.testing.assert_array_equal(got, ref)
    assert np.isnan(got[0, 0, 0, 0]) and got[0, 1, 0, 0] == np.inf and got[0, 2, 0, 0] == -np.inf


def test_max_pool_padding_is_minus_inf_and_nan_propagates():
    x = np.full((1, 1, 3, 3), -np.inf, np.float32)
    x[0, 0, 0, 0] = -5.0
    out = _run(MaxPool2d(x.shape, 3, 1, 1), x)        # padding never wins over -inf inputs
    ref = F.max_pool2d(torch.from_numpy(x), 3, 1, 1).numpy()
    np.testing.assert_array_equal(out, ref)
    x = _x((1, 1, 6, 6), 0)
    x[0, 0, 2, 3] = np.nan
    out = _run(MaxPool2d(x.shape, 2, 2), x)
    np.testing.assert_array_equal(np.isnan(out), np.isnan(F.max_pool2d(torch.from_numpy(x), 2, 2).numpy()))
    assert np.isnan(out[0, 0, 1, 1])


def test_resnet_stem_pool():
    x = np.maximum(_x((1, 64, 112, 112), 1), 0)
    np.testing.assert_array_equal(_run(MaxPool2d(x.shape, 3, 2, 1), x),
                                  F.max_pool2d(torch.from_numpy(x), 3, 2, 1).numpy())


def test_concurrent_calls_from_two_threads_match_a_single_thread():
    pools = [MaxPool2d((1, 16, 57, 55), 3, 2, 1), AvgPool2d((2, 8, 31, 30), 3, 2, 1, True, False),
             AdaptiveAvgPool2d((1, 32, 14, 14), (3, 3))]
    work = [(p, x, _run(p, x)) for p in pools for x in (_x(p.x_shape, 1), _x(p.x_shape, 2))]
    errors = []

    def hammer(offset):
        for _ in range(20):
            for p, x, expect in work[offset:] + work[:offset]:
                if not np.array_equal(_run(p, x), expect):
                    errors.append(p.name)

    threads = [threading.Thread(target=hammer, args=(i,)) for i in (0, 3)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors


@pytest.mark.parametrize("make, match", [
    (lambda: MaxPool2d((1, 1, 8, 8), 3, 1, 2), "padding .* at most"),
    (lambda: AvgPool2d((1, 1, 8, 8), 2, 1, 2), "padding .* at most"),
    (lambda: MaxPool2d((1, 1, 2, 8), 3), "too small for kernel 3"),
    (lambda: MaxPool2d((1, 1, 8, 8), 0), "kernel .* must be >= 1"),
    (lambda: MaxPool2d((1, 1, 8), 2), "4-D"),
    (lambda: AvgPool2d((1, 1, 8, 8), 2, divisor_override=0), "divisor_override must not be 0"),
    (lambda: AdaptiveAvgPool2d((1, 1, 8, 8), (0, 2)), "output_size"),
    (lambda: AdaptiveAvgPool2d((1, 0, 8, 8), 1), "empty dimension"),
])
def test_bad_pool_specs_raise_a_srcore_error(make, match):
    with pytest.raises(TacticSpecError, match=match) as info:
        make()
    assert isinstance(info.value, SrcoreError)


def test_calls_with_wrong_arrays_raise():
    pool = MaxPool2d((1, 2, 8, 8), 2)
    with pytest.raises(TacticSpecError, match=r"max_pool2d: out must be .* shape \(1, 2, 4, 4\)"):
        pool(_x((1, 2, 8, 8), 0), np.empty((1, 2, 8, 8), np.float32))
    with pytest.raises(TacticSpecError, match="x must be .* got float64"):
        pool(np.zeros((1, 2, 8, 8)), np.empty((1, 2, 4, 4), np.float32))


@settings(max_examples=40, deadline=None)
@given(k=st.integers(1, 5), sh=st.integers(1, 3), W=st.integers(5, 75), H=st.integers(5, 20), ceil_mode=st.booleans(),
       seed=st.integers(0, 2**16), data=st.data())
def test_vectorized_stride2_max_pool_on_wide_rows_with_nan(k, sh, W, H, ceil_mode, seed, data):
    """Column stride 2 takes the 16-lane kernel: rows over several vectors, NaN anywhere."""
    p = data.draw(st.integers(0, k // 2))
    x = _x((1, 3, H, W), seed)
    x.reshape(-1)[data.draw(st.integers(0, x.size - 1))] = np.nan
    pool = MaxPool2d(x.shape, k, (sh, 2), p, 1, ceil_mode)
    assert pool.vectorized
    np.testing.assert_array_equal(_run(pool, x), F.max_pool2d(torch.from_numpy(x), k, (sh, 2), p, 1, ceil_mode).numpy())


def test_threaded_max_pool_matches_and_runs_from_two_python_threads():
    from srcore_trt_like.kernels import parallel as packed_parallel

    x = np.maximum(_x((2, 20, 30, 33), 5), 0)
    pool = MaxPool2d(x.shape, 3, 2, 1)
    want = _run(pool, x)
    errors = []

    def hammer():
        for _ in range(20):
            out = np.full(pool.out_shape, np.nan, np.float32)
            packed_parallel.max_pool_s2(x, 3, 3, 2, 1, 1, out, 2)
            if not np.array_equal(out, want):
                errors.append(1)

    threads = [threading.Thread(target=hammer) for _ in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors


@pytest.mark.parametrize("H, k, s, p, ceil", [(10, 3, 2, 1, False), (9, 3, 2, 0, True), (7, 2, 2, 0, True)])
def test_blocked_max_pool_matches_torch_with_nan_and_minus_inf(H, k, s, p, ceil):
    """The NCHW16c max pool after a blocked stem conv (``pool_vec.max_pool_blocked``; whole 3x3
    windows in straight-line taps, the rest in loops) into either layout: NaN and -inf planted, 20
    channels (a partial second block), ceil-mode windows hanging off the plane."""
    from srcore.plugin import nchwc
    from srcore_trt_like.kernels.pool_vec import max_pool_blocked

    x = _x((2, 20, H, H), H)
    x[0, 3, 4, 5], x[1, 17, 0, 0], x[1, 2, 3:, 3:] = np.nan, np.nan, -np.inf
    want = F.max_pool2d(torch.from_numpy(x), k, s, p, ceil_mode=ceil).numpy()
    Ho = want.shape[2]
    for blocked_out in (True, False):
        out = np.full(2 * 2 * Ho * Ho * 16 if blocked_out else want.size, 7.0, np.float32)
        max_pool_blocked(nchwc.to_blocked(x, 16), k, k, s, s, p, p, out, blocked_out, 20, Ho, Ho,
                         np.empty(16, np.float32))
        got = nchwc.from_blocked(out.reshape(2, 2, Ho, Ho, 16), 20) if blocked_out else out.reshape(want.shape)
        np.testing.assert_array_equal(got, want)
