"""Intra-op parallel conv and pool kernels (``parallel.py``) against torch and the 1-part path."""
from __future__ import annotations

import os
import threading

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from srcore_cpu.kernels import conv as C
from srcore_cpu.kernels import conv_winograd as W
from srcore_cpu.kernels import parallel as P
from srcore_cpu.kernels import pool as PL

#: kernels are called directly: the executor and the memory planner play no part
pytestmark = pytest.mark.one_pass

RNG = np.random.default_rng(7)


def _data(N, Ci, H, Wd, O, k, groups, dtype=np.float32, bias=True):
    x = RNG.standard_normal((N, Ci, H, Wd)).astype(dtype)
    w = RNG.standard_normal((O, Ci // groups, k, k)).astype(dtype)
    b = RNG.standard_normal(O).astype(dtype) if bias else None
    return x, w, b


def _ref(x, w, b, stride, padding, dilation, groups):
    t = torch.from_numpy
    return F.conv2d(t(x), t(w), None if b is None else t(b), stride, padding, dilation, groups).numpy()


def _tol(ref):
    return 1e-5 * max(1.0, float(np.abs(ref).max()))


# (N, C, H, W, O, k, stride, padding, dilation, groups, bias): row split (many rows), channel split
# (few rows: 7, 5, 3), the 1x1 GEMM path, odd sizes, dilation, groups, batch 2, no bias
CASES = [
    (1, 3, 23, 21, 16, 7, 2, 3, 1, 1, True),
    (1, 8, 9, 11, 12, 3, 1, 1, 1, 1, True),
    (2, 6, 7, 7, 10, 3, 2, 1, 1, 2, True),
    (1, 16, 15, 13, 8, 1, 1, 0, 1, 1, True),
    (2, 16, 15, 13, 9, 1, 1, 0, 1, 1, False),
    (1, 16, 15, 13, 9, 1, 2, 0, 1, 1, True),
    (1, 8, 17, 17, 6, 3, 1, 2, 2, 1, False),
    (1, 32, 7, 7, 32, 3, 1, 1, 1, 1, True),
    (1, 12, 5, 9, 8, 3, 1, 1, 1, 4, True),
    (2, 8, 33, 19, 8, 5, 3, 2, 1, 1, True),
]


@pytest.mark.parametrize("threads", [2, 3])
@pytest.mark.parametrize("case", CASES)
def test_conv_forward_split_matches_torch_and_one_part(case, threads):
    N, Ci, H, Wd, O, k, s, p, d, g, bias = case
    x, w, b = _data(N, Ci, H, Wd, O, k, g, bias=bias)
    ref = _ref(x, w, b, s, p, d, g)
    args = (x, w, b, (s, s), [(p, p)] * 2, (d, d), g)
    one = C.conv_forward(*args, ws=C.SHARED_WS, threads=1)
    got = C.conv_forward(*args, ws=C.SHARED_WS, threads=threads)
    np.testing.assert_allclose(got, ref, rtol=0, atol=_tol(ref))
    np.testing.assert_allclose(got, one, rtol=0, atol=_tol(ref))


def test_conv_forward_split_writes_a_non_contiguous_out():
    x, w, b = _data(1, 8, 20, 20, 6, 3, 1)
    ref = _ref(x, w, b, 1, 1, 1, 1)
    big = np.zeros((1, 12, 20, 20), np.float32)
    out = big[:, ::2]
    C.conv_forward(x, w, b, (1, 1), [(1, 1)] * 2, (1, 1), 1, out=out, ws=C.SHARED_WS, threads=2)
    np.testing.assert_allclose(out, ref, rtol=0, atol=_tol(ref))
    assert not big[:, 1::2].any()


@pytest.mark.parametrize("threads", [2, 3])
@pytest.mark.parametrize("m", [2, 4])
@pytest.mark.parametrize("N,Ci,H,Wd,O,p,bias,dtype", [
    (1, 8, 14, 14, 8, 1, True, np.float32),
    (1, 5, 29, 31, 7, 1, True, np.float32),     # odd output: tiles cover an extra row/column
    (2, 8, 14, 16, 12, 0, False, np.float32),
    (1, 6, 15, 15, 9, 1, True, np.float64),
])
def test_winograd_split_matches_torch(N, Ci, H, Wd, O, p, bias, dtype, m, threads):
    x, w, b = _data(N, Ci, H, Wd, O, 3, 1, dtype, bias)
    ref = _ref(x, w, b, 1, p, 1, 1)
    out = np.full(ref.shape, np.nan, dtype)
    W.conv3x3(x, W.transform_weight(w, m), b, [(p, p)] * 2, out, C.SHARED_WS, threads)
    np.testing.assert_allclose(out, ref, rtol=0, atol=_tol(ref) * (1 if dtype == np.float32 else 1e-6))
    one = np.empty_like(out)
    W.conv3x3(x, W.transform_weight(w, m), b, [(p, p)] * 2, one, C.SHARED_WS, 1)
    np.testing.assert_allclose(out, one, rtol=0, atol=_tol(ref) * (1 if dtype == np.float32 else 1e-6))


def test_make_conv_splits_by_srcore_cpu_threads(monkeypatch):
    # 64ch 3x3 at 48x48, stride 1 (Winograd) and 2 (im2col): both over PARALLEL_MIN_MACS
    x, w, b = _data(1, 64, 48, 48, 64, 3, 1)
    calls = []
    real = P.run_parts
    monkeypatch.setattr(P, "run_parts", lambda fn, parts, threads: (calls.append(parts), real(fn, parts, threads)))
    monkeypatch.setenv("SRCORE_CPU_THREADS", "2")
    for s in (1, 2):
        calls.clear()
        got = C.make_conv(2, w, b, s, 1, 1, 1)(x)
        ref = _ref(x, w, b, s, 1, 1, 1)
        np.testing.assert_allclose(got, ref, rtol=0, atol=_tol(ref))
        assert calls and set(calls) == {2}
    monkeypatch.setenv("SRCORE_CPU_THREADS", "1")
    calls.clear()
    C.make_conv(2, w, b, 1, 1, 1, 1)(x)
    assert calls == []


def test_small_convs_stay_on_one_thread(monkeypatch):
    x, w, b = _data(1, 8, 10, 10, 8, 3, 1)   # 0.06 M MACs
    monkeypatch.setenv("SRCORE_CPU_THREADS", "2")
    monkeypatch.setattr(P, "run_parts", lambda *a: pytest.fail("a tiny conv was split"))
    got = C.make_conv(2, w, b, 1, 1, 1, 1)(x)
    np.testing.assert_allclose(got, _ref(x, w, b, 1, 1, 1, 1), rtol=0, atol=1e-4)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 200), parts=st.integers(1, 9))
def test_split_covers_the_range_evenly(n, parts):
    chunks = P.split(n, parts)
    assert len(chunks) == parts
    assert [lo for lo, _ in chunks[1:]] == [hi for _, hi in chunks[:-1]]
    assert chunks[0][0] == 0 and chunks[-1][1] == n
    sizes = [hi - lo for lo, hi in chunks]
    assert max(sizes) - min(sizes) <= 1


def test_run_parts_runs_every_part_once_on_several_threads():
    import time

    seen = []
    # parts long enough that the workers join before the caller has claimed them all
    P.run_parts(lambda i: (seen.append((i, threading.get_ident())), time.sleep(0.05)), 3, 3)
    assert sorted(i for i, _ in seen) == [0, 1, 2]
    assert len({t for _, t in seen}) == 3


def test_run_parts_reraises_a_worker_error_and_stays_usable():
    def part(i):
        if i == 1:
            raise ValueError("part 1 failed")
    with pytest.raises(ValueError, match="part 1 failed"):
        P.run_parts(part, 2, 2)
    seen = []
    P.run_parts(seen.append, 2, 2)
    assert sorted(seen) == [0, 1]


def test_busy_pool_runs_the_parts_on_the_caller():
    pool = P.get_pool(2)
    seen = []
    assert pool.busy.acquire(False)
    try:
        P.run_parts(lambda i: seen.append((i, threading.get_ident())), 2, 2)
    finally:
        pool.busy.release()
    assert seen == [(0, threading.get_ident()), (1, threading.get_ident())]


def test_nested_run_parts_does_not_deadlock():
    seen = []
    P.run_parts(lambda i: P.run_parts(lambda j: seen.append((i, j)), 2, 2), 2, 2)
    assert sorted(seen) == [(0, 0), (0, 1), (1, 0), (1, 1)]


def test_blas_threads_are_one_inside_the_parts_and_restored_after():
    threadpoolctl = pytest.importorskip("threadpoolctl")
    ctl = P._blas_controller()
    if ctl is None:
        pytest.skip("no single BLAS library to control")
    with threadpoolctl.threadpool_limits(2):
        before = ctl.num_threads
        inside = []
        P.run_parts(lambda i: inside.append(ctl.num_threads), 2, 2)
        assert inside == [1, 1]
        assert ctl.num_threads == before


def test_split_threads_reads_the_environment_and_defaults_to_one(monkeypatch):
    monkeypatch.delenv("SRCORE_CPU_THREADS", raising=False)
    assert P.split_threads() == 1
    monkeypatch.setenv("SRCORE_CPU_THREADS", "3")
    assert P.split_threads() == min(3, __import__("os").cpu_count() or 1)
    monkeypatch.setenv("SRCORE_CPU_THREADS", "zero")
    assert P.split_threads() == 1
    monkeypatch.setenv("SRCORE_CPU_THREADS", "-4")
    assert P.split_threads() == 1


@pytest.mark.parametrize("threads", [2, 3])
@pytest.mark.parametrize("shape,k,s,p,d,ceil", [
    ((1, 64, 112, 112), 3, 2, 1, 1, False),
    ((2, 5, 17, 13), 3, 2, 1, 1, True),
    ((7, 9, 11), 2, 2, 0, 2, False),          # unbatched
])
def test_max_pool_split_matches_torch(shape, k, s, p, d, ceil, threads):
    x = RNG.standard_normal(shape).astype(np.float32)
    ref = F.max_pool2d(torch.from_numpy(x), k, s, p, d, ceil_mode=ceil).numpy()
    got = PL._max_pool_parts(2, threads, x, k, s, p, d, ceil, None)
    np.testing.assert_array_equal(got, ref)


def test_max_pool_matcher_binds_srcore_cpu_threads(monkeypatch):
    from cpu_kernel_util import node

    x = RNG.standard_normal((1, 64, 112, 112)).astype(np.float32)
    monkeypatch.setenv("SRCORE_CPU_THREADS", "1")
    assert PL.max_pool_matcher(node("aten::max_pool2d")) is PL.max_pool2d
    monkeypatch.setenv("SRCORE_CPU_THREADS", "2")
    fn = PL.max_pool_matcher(node("aten::max_pool2d"))
    parts = []
    real = P.run_parts
    monkeypatch.setattr(P, "run_parts", lambda f, n, t: (parts.append(n), real(f, n, t)))
    out = np.empty((1, 64, 56, 56), np.float32)
    fn(x, [3, 3], [2, 2], [1, 1], [1, 1], False, out=out)
    np.testing.assert_array_equal(out, F.max_pool2d(torch.from_numpy(x), 3, 2, 1).numpy())
    assert parts == [2]


@pytest.mark.parametrize("H,expect", [(28, 4), (56, 4), (14, 2), (7, 0)])
def test_winograd_choice_does_not_depend_on_blas_threads(monkeypatch, H, expect):
    # at 2 BLAS threads Winograd's small GEMMs scale less than im2col's one GEMM, but resnet_small
    # still measured faster with the 1-thread choices (conv_winograd.choose)
    monkeypatch.delenv("SRCORE_CPU_THREADS", raising=False)
    from srcore_cpu.kernels import conv_small
    monkeypatch.setattr(conv_small, "SMALL_COLS_MAX", 0)  # 16ch 14x14 would take the small-input path
    x, w, b = _data(1, 16, H, H, 16, 3, 1)
    used = []
    real = W.conv3x3
    monkeypatch.setattr(W, "conv3x3", lambda x, gw, *a: (used.append(gw.shape[0]), real(x, gw, *a))[1])
    for blas in (1, 2):
        monkeypatch.setattr(P, "blas_threads", lambda: blas)
        used.clear()
        got = C.make_conv(2, w, b, 1, 1, 1, 1)(x)
        ref = _ref(x, w, b, 1, 1, 1, 1)
        np.testing.assert_allclose(got, ref, rtol=0, atol=_tol(ref))
        assert used == ([(expect + 2) ** 2] if expect else [])


@pytest.mark.parametrize("nd,spatial,k,s,p", [(1, (37,), 5, 2, 2), (1, (6,), 3, 1, 1), (3, (9, 7, 8), 3, 1, 1),
                                              (3, (4, 5, 6), 3, 2, 1)])
def test_conv1d_conv3d_split_matches_torch(nd, spatial, k, s, p):
    x = RNG.standard_normal((1, 6) + spatial).astype(np.float32)
    w = RNG.standard_normal((8, 6) + (k,) * nd).astype(np.float32)
    b = RNG.standard_normal(8).astype(np.float32)
    ref = getattr(F, f"conv{nd}d")(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b), s, p).numpy()
    got = C.conv_forward(x, w, b, (s,) * nd, [(p, p)] * nd, (1,) * nd, 1, ws=C.SHARED_WS, threads=2)
    np.testing.assert_allclose(got, ref, rtol=0, atol=_tol(ref))


@settings(max_examples=80, deadline=None)
@given(k=st.tuples(st.integers(1, 4), st.integers(1, 4)), s=st.tuples(st.integers(1, 3), st.integers(1, 3)),
       d=st.tuples(st.integers(1, 3), st.integers(1, 3)), hw=st.tuples(st.integers(1, 12), st.integers(1, 12)),
       pfrac=st.tuples(st.integers(0, 2), st.integers(0, 2)), ceil=st.booleans())
def test_max_pool_without_padded_copy_matches_torch(k, s, d, hw, pfrac, ceil):
    # the max pool reads taps that reach into the padding only where they are inside the input
    p = tuple(min(f, kk // 2) for f, kk in zip(pfrac, k))
    if any((n + 2 * pp - dd * (kk - 1) - 1) < 0 for n, pp, dd, kk in zip(hw, p, d, k)):
        return
    x = RNG.standard_normal((2, 3) + hw).astype(np.float32)
    ref = F.max_pool2d(torch.from_numpy(x), k, s, p, d, ceil_mode=ceil).numpy()
    np.testing.assert_array_equal(PL.max_pool2d(x, list(k), list(s), list(p), list(d), ceil), ref)


def test_split_worthy_conv_with_few_columns_is_split_not_small(monkeypatch):
    # 128 -> 512 ch 3x3 on 6x6: a 41k-element column matrix (the small-input path's size) but
    # 21 M MACs (over PARALLEL_MIN_MACS): split over the threads, not run on one
    from srcore_cpu.kernels import conv_small
    x, w, b = _data(1, 128, 6, 6, 512, 3, 1)
    assert conv_small.SmallConv(w, b, (1, 1), [(1, 1)] * 2, (1, 1), 1).plan(x.shape, x.dtype) is not None
    calls = []
    real = P.run_parts
    monkeypatch.setattr(P, "run_parts", lambda fn, parts, threads: (calls.append(parts), real(fn, parts, threads)))
    monkeypatch.setenv("SRCORE_CPU_THREADS", "2")
    got = C.make_conv(2, w, b, 1, 1, 1, 1)(x)
    np.testing.assert_allclose(got, _ref(x, w, b, 1, 1, 1, 1), rtol=0, atol=_tol(_ref(x, w, b, 1, 1, 1, 1)))
    assert calls and set(calls) == {2}



class _ProcessWideCount:
    """numpy's OpenBLAS as threadpoolctl sees it, with one count for the whole process (as
    ``openblas_set_num_threads`` in pthreads OpenBLAS: whichever thread sets it, every thread's
    next GEMM uses it)."""

    def __init__(self, n):
        self.num_threads = n

    def set_num_threads(self, n):
        self.num_threads = n


def _blocked_run(pool, started, release, seen, ctl):
    """``pool`` runs 2 parts on another thread that record the count and wait for ``release``."""
    def part(i):
        seen.append(ctl.num_threads)
        if i == 0:
            started.set()
            release.wait(10)
    t = threading.Thread(target=pool.run, args=(part, 2))
    t.start()
    assert started.wait(10)
    return t


def test_blas_count_is_the_users_while_another_thread_runs_parts(monkeypatch):
    # a module loaded (intra_op_threads read) on one thread while another runtime's parts hold
    # OpenBLAS at 1 must still see the user's 2, or it builds no splits
    ctl = _ProcessWideCount(2)
    monkeypatch.setattr(P, "_blas_controller", lambda: ctl)
    started, release, seen = threading.Event(), threading.Event(), []
    t = _blocked_run(P.PartPool(2), started, release, seen, ctl)
    try:
        assert ctl.num_threads == 1            # the parts' GEMMs run on one thread
        assert P.blas_threads() == 2
        assert P.intra_op_threads() == min(2, os.cpu_count() or 1)
    finally:
        release.set()
        t.join(10)
    assert seen == [1, 1] and ctl.num_threads == 2 and P.blas_threads() == 2


def test_overlapping_part_runs_hold_one_blas_thread_until_the_last_leaves(monkeypatch):
    ctl = _ProcessWideCount(2)
    monkeypatch.setattr(P, "_blas_controller", lambda: ctl)
    a = (threading.Event(), threading.Event(), [])
    b = (threading.Event(), threading.Event(), [])
    ta = _blocked_run(P.PartPool(2), *a, ctl)
    tb = _blocked_run(P.PartPool(2), *b, ctl)   # two pools (e.g. an old, smaller one): both hold
    try:
        a[1].set()
        ta.join(10)                             # the first one in leaves first
        assert ctl.num_threads == 1             # b's parts still run: still one thread
        assert P.blas_threads() == 2
    finally:
        a[1].set()
        b[1].set()
        ta.join(10)
        tb.join(10)
    assert a[2] == [1, 1] and b[2] == [1, 1]
    assert ctl.num_threads == 2


def test_one_blas_thread_holds_one_and_shares_the_hold_with_part_runs(monkeypatch):
    """``one_blas_thread()`` (the conv's load-time probe): one BLAS thread inside, the user's count
    reported meanwhile and restored after, also around a part run inside it (one shared hold)."""
    ctl = _ProcessWideCount(2)
    monkeypatch.setattr(P, "_blas_controller", lambda: ctl)
    seen = []
    with P.one_blas_thread():
        assert ctl.num_threads == 1 and P.blas_threads() == 2
        P.PartPool(2).run(lambda i: seen.append(ctl.num_threads), 2)
        assert ctl.num_threads == 1
    assert seen == [1, 1] and ctl.num_threads == 2
    with pytest.raises(ValueError), P.one_blas_thread():
        raise ValueError
    assert ctl.num_threads == 2


@pytest.mark.parametrize("oc_lanes", [False, True])
def test_run_bound_splits_the_simd_conv_tasks_on_the_part_pool(oc_lanes):
    """``parallel.run_bound``: a bound SIMD direct conv's tasks in two ranges claimed by the caller and
    a pool worker; every image; the bits of one thread, torch's result."""
    import time

    from srcore.plugin import simd_conv

    if oc_lanes and simd_conv.lanes() != 16:
        pytest.skip("output channels in the lanes: 16-lane CPUs")
    rng = np.random.default_rng(11)
    w = rng.standard_normal((24, 8, 3, 3), dtype=np.float32)
    b = rng.standard_normal(24, dtype=np.float32)
    x = rng.standard_normal((2, 8, 13, 11), dtype=np.float32)
    conv = simd_conv.SimdDirectConv(w, b, (1, 1), [(1, 1), (1, 1)], (1, 1), oc_lanes=oc_lanes)
    one = conv(x, np.empty(conv.out_shape(x.shape), np.float32))
    run = conv.bind(x, out := np.full(one.shape, np.nan, np.float32))
    seen = []
    real = run.run_tasks

    class Spy:
        images, channels, tasks = run.images, run.channels, run.tasks
        fill = run.fill

        def run_tasks(self, n, t0, t1):
            seen.append((n, t0, t1, threading.get_ident()))
            real(n, t0, t1)
            time.sleep(0.02)   # the worker joins before the caller claims the second range
    P.run_bound(Spy(), 2)
    assert np.array_equal(out, one)
    ref = F.conv2d(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b), padding=1).numpy()
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-4)
    for n in range(2):
        ranges = sorted((t0, t1) for m, t0, t1, _ in seen if m == n)
        assert ranges[0][0] == 0 and ranges[-1][1] == run.tasks and ranges[0][1] == ranges[1][0]
    assert {tid for *_, tid in seen} - {threading.get_ident()}   # a range ran on a worker
