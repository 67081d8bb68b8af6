"""MKL's SGEMM in the cpu plugin (mkl_gemm.py) against torch: the GEMM itself, its fallbacks to
``np.dot``, and constant-weight linears whose GEMM is MKL's (the timing forced to pick it)."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from srcore.ir.types import TensorType  # noqa: E402
from srcore.plugin import ArgInfo, NodeInfo, Specialized  # noqa: E402
from srcore.plugin import mkl as core_mkl  # noqa: E402
from srcore_cpu.kernels import linalg as K  # noqa: E402
from srcore_cpu.kernels import mkl_gemm as M  # noqa: E402
from srcore_cpu.kernels import parallel as P  # noqa: E402

pytestmark = [pytest.mark.one_pass,   # kernels are called directly
              pytest.mark.skipif(M._load() is None, reason="no libmkl_rt (the mkl package) here")]

RNG = np.random.default_rng(3)
TOL = dict(rtol=1e-4, atol=1e-4)


def rand(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def torch_linear(x, w, b=None):
    return torch.nn.functional.linear(torch.from_numpy(x), torch.from_numpy(w),
                                      None if b is None else torch.from_numpy(b)).numpy()


def test_mkl_gemm_matches_torch_and_falls_back():
    w = rand(23, 19)                      # torch's (out, in)
    wT = np.ascontiguousarray(w.T)
    dot = M._make(M._load(), wT, 37)
    x = rand(37, 19)
    # the packed weight (37 rows), plain cblas_sgemm (other row counts), a transposed view packed
    np.testing.assert_allclose(dot(x[:5], wT), torch_linear(x[:5], w), **TOL)
    assert dot(x[:0], wT).shape == (0, 23)
    view = M._make(M._load(), w.T, 37)
    for rows in (37, 6):
        np.testing.assert_allclose(view(x[:rows], w.T), torch_linear(x[:rows], w), **TOL)
    np.testing.assert_allclose(dot(x, wT), torch_linear(x, w), **TOL)
    out = np.full((37, 23), np.nan, np.float32)
    assert dot(x, wT, out=out) is out
    np.testing.assert_allclose(out, torch_linear(x, w), **TOL)
    # operands cblas_sgemm is not given: a transposed view, float64, another weight -> np.dot
    xv = rand(19, 37).T
    np.testing.assert_allclose(dot(xv, wT), torch_linear(np.ascontiguousarray(xv), w), **TOL)
    x64 = x.astype(np.float64)
    r64 = dot(x64, wT)
    assert r64.dtype == np.float64
    np.testing.assert_allclose(r64, torch_linear(x64, w.astype(np.float64)), **TOL)
    w2 = rand(23, 19)
    np.testing.assert_allclose(dot(x, np.ascontiguousarray(w2.T)), torch_linear(x, w2), **TOL)


def test_gemm_for_declines_what_it_cannot_time(monkeypatch):
    monkeypatch.setattr(M, "_choices", {})
    wT = rand(256, 256)
    assert M.gemm_for(None, wT) is None                     # rows unknown at load
    assert M.gemm_for(2, rand(16, 16)) is None              # too small to gain from a ctypes call
    assert M.gemm_for(64, wT.astype(np.float64)) is None
    assert M.gemm_for(64, rand(256, 512)[:, ::2]) is None   # neither C- nor Fortran-contiguous
    timed = []
    monkeypatch.setattr(M, "_mkl_faster", lambda mkl_dot, m, w, threads: timed.append(threads) or True)
    for threads in (2, 1, 2):
        monkeypatch.setattr(P, "blas_threads", lambda threads=threads: threads)
        assert M.gemm_for(64, wT) is not None
    assert timed == [2, 1]                                  # timed once per shape and thread count


def test_column_blocks():
    assert M._blocks(256, 1) == [(0, 256)]
    assert M._blocks(48, 2) == [(0, 48)]                     # fewer than 2 groups of 16 a thread
    assert M._blocks(200, 2) == [(0, 96), (96, 200)]         # 12 groups of 16 (+ 8 columns)
    assert M._blocks(1000, 3) == [(0, 320), (320, 656), (656, 1000)]


@pytest.mark.parametrize("layout", ["F", "C"])
def test_gemm_at_two_blas_threads_splits_columns_over_the_part_pool(monkeypatch, layout):
    """At 2 BLAS threads MKL's products run as 2 column blocks on the part pool, each a one-thread
    MKL call (the calling thread's count put back), with torch's results: the packed weight (its
    row count), plain cblas_sgemm (another), a transposed view or a C-contiguous weight, and the
    im2col GEMM into a block of columns of a larger output."""
    from threadpoolctl import threadpool_limits

    lib, counts, parts = M._load(), [], []

    class Counting:
        def __getattr__(self, name):
            fn = getattr(lib, name)
            return (lambda n: (counts.append(n), fn(n))[1]) if name == "MKL_Set_Num_Threads_Local" else fn
    real_parts = P.run_parts
    monkeypatch.setattr(P, "run_parts", lambda fn, n, threads: (parts.append((n, threads)), real_parts(fn, n, threads)))
    monkeypatch.setattr(M, "_load", lambda: Counting())
    monkeypatch.setattr(M, "_choices", {})
    monkeypatch.setattr(M, "_mkl_faster", lambda mkl_dot, m, w, threads: threads == 2)
    w = rand(100, 72)                        # torch's (out, in): 100 outputs in blocks of 48 and 52
    wT = w.T if layout == "F" else np.ascontiguousarray(w.T)
    with threadpool_limits(2, user_api="blas"):
        dot, gemm = M.gemm_for(64, wT), M.matmul_rows()
    assert dot is not None and dot.parts == 2 and gemm.threads == 2
    prev = core_mkl.swap_threads(lib, 3)
    try:
        for rows in (64, 9):
            x = rand(rows, 72)
            counts.clear()
            np.testing.assert_allclose(dot(x, wT), torch_linear(x, w), **TOL)
            # each part (caller and worker, in either order): one MKL thread, then its count put back
            assert len(counts) == 4 and counts.count(1) >= 2 and 3 in counts
        big = np.full((64, 140), np.nan, np.float32)
        a = rand(64, 72)
        assert gemm(a, np.ascontiguousarray(w.T), big[:, 20:120]) is not None
        np.testing.assert_allclose(big[:, 20:120], a @ w.T, **TOL)
        assert np.isnan(big[:, :20]).all() and np.isnan(big[:, 120:]).all()
        assert parts == [(2, 2)] * 3 and core_mkl.swap_threads(lib, prev) == 3
    finally:
        core_mkl.swap_threads(lib, prev)


def test_threaded_timing_times_the_split_while_openblas_sleeps(monkeypatch):
    """At more than one thread MKL's split is timed first, after OpenBLAS's worker (woken by an
    earlier threaded timing) went to sleep, then numpy's threaded BLAS, and that is noted: as in
    a module whose products all run split. A tie keeps the split; a clearly slower one loses."""
    monkeypatch.setenv("SRCORE_CPU_THREADED_BLAS", "1")   # the threaded-BLAS timing (not the one-team default)
    from srcore.plugin import clock
    from srcore_cpu.kernels import tactic

    now, log = [0], []
    monkeypatch.setattr(clock, "WALL_CLOCK", lambda: now[0])
    monkeypatch.setattr(clock, "CPU_CLOCK", lambda: 0)      # (the wall clock it must be)
    monkeypatch.setattr(clock, "run_delay", lambda: 0)
    monkeypatch.setattr(P, "wait_blas_idle", lambda: log.append("wait"))
    monkeypatch.setattr(P, "note_threaded_blas", lambda: log.append("note"))
    monkeypatch.setattr(tactic, "CLEAR", 10.0)

    def call(name, t):
        def run():
            log.append(name)
            now[0] += t
        return run
    assert M._faster(call("mkl", 100), call("np", 99), reps=1, rounds=3, threads=2)    # within 3 %: the split
    assert log == ["wait", "mkl", "mkl", "mkl", "mkl", "np", "np", "np", "np", "note"]   # (warm-up + 3 rounds)
    assert not M._faster(call("mkl", 100), call("np", 90), reps=1, rounds=3, threads=2)


@pytest.mark.parametrize("xshape", [(40, 64), (2, 20, 64)])
def test_linear_matcher_with_mkl(monkeypatch, xshape):
    """A linear whose input shape is known at load, MKL's GEMM chosen: same results as torch."""
    monkeypatch.setattr(M, "_choices", {})
    monkeypatch.setattr(M, "_mkl_faster", lambda mkl_dot, m, w, threads: True)
    monkeypatch.setattr(M, "_MIN_MACS", 1)
    w, b = rand(48, 64), rand(48)
    args = (ArgInfo("input", TensorType("float32", xshape), False, None), ArgInfo("weight", TensorType(), True, w),
            ArgInfo("bias", TensorType(), True, b))
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1, user_api="blas"):
        spec = K.linear_matcher(NodeInfo("aten::linear", None, args, ()))
    assert isinstance(spec, Specialized)
    assert M._choices == {(int(np.prod(xshape[:-1])), 64, 48, 1): True}
    x = rand(*xshape)
    np.testing.assert_allclose(spec.fn(x), torch_linear(x, w, b), **TOL)
    out = np.full(xshape[:-1] + (48,), np.nan, np.float32)
    assert spec.fn(x, out=out) is out
    np.testing.assert_allclose(out, torch_linear(x, w, b), **TOL)


def test_linear_kernel_runs_the_packed_weight(monkeypatch):
    """The linear kernel calls MKL with the very weight object it packed (no silent np.dot)."""
    from threadpoolctl import threadpool_limits

    calls = []
    lib = M._load()

    class Counting:
        def __getattr__(self, name):
            fn = getattr(lib, name)
            if name != "cblas_sgemm_compute":
                return fn
            return lambda *a: (calls.append(a[3:6]), fn(*a))[1]
    counting = Counting()
    monkeypatch.setattr(M, "_load", lambda: counting)
    monkeypatch.setattr(M, "_MIN_MACS", 1)
    monkeypatch.setattr(M, "_choices", {})
    monkeypatch.setattr(M, "_mkl_faster", lambda mkl_dot, m, w, threads: True)
    w, b = rand(48, 64), rand(48)
    t = TensorType("float32", (2, 20, 64))
    args = (ArgInfo("input", t, False, None), ArgInfo("weight", TensorType(), True, w),
            ArgInfo("bias", TensorType(), True, b))
    with threadpool_limits(1, user_api="blas"):
        spec = K.linear_matcher(NodeInfo("aten::linear", None, args, ()))
    x = rand(2, 20, 64)
    np.testing.assert_allclose(spec.fn(x), torch_linear(x, w, b), **TOL)
    assert calls == [(40, 48, 64)]


def test_matmul_rows_strided_operands():
    """MKL's GEMM on operands with contiguous rows and other row strides (a block of columns of a
    larger output, as the im2col conv writes): same as numpy; other layouts go to np.matmul."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1, user_api="blas"):
        gemm = M.matmul_rows()
    assert gemm is not None
    a, b = rand(13, 21), rand(21, 40)
    big = np.full((13, 50), np.nan, np.float32)
    out = big[:, 5:45]
    assert gemm(a, b[:, :40], out) is out
    np.testing.assert_allclose(out, a @ b, **TOL)
    assert np.isnan(big[:, :5]).all() and np.isnan(big[:, 45:]).all()
    out2 = np.empty((13, 40), np.float32)
    np.testing.assert_allclose(gemm(a, np.asfortranarray(b), out2), a @ b, **TOL)   # np.matmul
    np.testing.assert_allclose(gemm(rand(40, 13).T, rand(40, 40)[:, ::1], out2.copy()).shape, (13, 40))


@pytest.mark.parametrize("nd", [1, 2])
def test_conv_with_mkl_gemm_matches_torch(monkeypatch, nd):
    """A constant-weight strided conv whose im2col GEMM is MKL's (the timing forced to pick it):
    the GEMM runs in the call, and the result is torch's."""
    from threadpoolctl import threadpool_limits

    from srcore_cpu.kernels import conv as C
    from srcore_cpu.kernels import tactic

    monkeypatch.setattr(tactic, "fastest", lambda cands, args, **kw: "mkl" if "mkl" in cands else next(iter(cands)))
    monkeypatch.setenv("SRCORE_CPU_SIMD_CONV", "0")
    calls = []
    real = M.matmul_rows

    def counting_rows():
        gemm = real()
        counting = (lambda a, b, out: (calls.append(a.shape), gemm(a, b, out))[1])
        counting.threads = gemm.threads
        return counting
    monkeypatch.setattr(M, "matmul_rows", counting_rows)
    shape = (1, 6, 9001) if nd == 1 else (1, 6, 129, 131)   # past conv_small.py: the im2col path
    w, bias = rand(16, 6, *([3] * nd)), rand(16)
    x = rand(*shape)
    conv = torch.nn.functional.conv1d if nd == 1 else torch.nn.functional.conv2d
    want = conv(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(bias), stride=2, padding=1).numpy()
    with threadpool_limits(1, user_api="blas"):
        fn = C.make_conv(nd, w, bias, 2, 1, 1, 1, input_shape=shape)
        calls.clear()   # (the load-time timing ran it too)
        np.testing.assert_allclose(fn(x), want, **TOL)
    assert calls and all(c == (16, 6 * 3 ** nd) for c in calls)


@pytest.mark.parametrize("mkl_t, chosen", [(1.0, True), (1.2, False)])
def test_conv_mkl_gemm_at_two_threads_timed_split_against_threaded_blas(monkeypatch, mkl_t, chosen):
    """At 2 BLAS threads the conv's MKL im2col GEMM (split on the part pool) is timed against the
    numpy path by ``tactic.split_vs_blas`` (split first), kept on a tie, dropped when slower; the
    result is torch's either way."""
    from threadpoolctl import threadpool_limits

    from srcore_cpu.kernels import conv as C
    from srcore_cpu.kernels import tactic

    timed, calls = [], []
    monkeypatch.setattr(tactic, "split_vs_blas", lambda split, blas, **kw: (timed.append(1), (mkl_t, 1.0))[1])
    monkeypatch.setenv("SRCORE_CPU_SIMD_CONV", "0")
    real = M.matmul_rows

    def counting_rows():
        gemm = real()
        counting = (lambda a, b, out: (calls.append(a.shape), gemm(a, b, out))[1])
        counting.threads = gemm.threads
        return counting
    monkeypatch.setattr(M, "matmul_rows", counting_rows)
    shape = (1, 6, 129, 131)
    w, bias = rand(16, 6, 3, 3), rand(16)
    x = rand(*shape)
    want = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(bias),
                                      stride=2, padding=1).numpy()
    with threadpool_limits(2, user_api="blas"):
        fn = C.make_conv(2, w, bias, 2, 1, 1, 1, input_shape=shape)
        calls.clear()
        np.testing.assert_allclose(fn(x), want, **TOL)
    assert timed == [1] and bool(calls) == chosen


def test_calls_leave_the_threads_mkl_count_alone():
    """Each call runs MKL on one thread and puts the calling thread's MKL count back (trt_like's
    MKL tactic in the same process sets its own)."""
    lib = M._load()
    w = rand(64, 32)
    dot = M._make(lib, w, 16)
    gemm = M.matmul_rows() or (lambda a, b, out: np.matmul(a, b, out=out))
    prev = core_mkl.swap_threads(lib, 2)
    try:
        dot(rand(16, 64), w)
        gemm(rand(8, 64), w, np.empty((8, 32), np.float32))
        assert core_mkl.swap_threads(lib, 2) == 2
    finally:
        core_mkl.swap_threads(lib, prev)


def test_conv_mkl_timing_skips_winograd_shapes(monkeypatch):
    """A 3x3 stride-1 conv whose shape runs Winograd reaches no im2col GEMM: the MKL GEMM timing (and
    its probe, a whole conv) is skipped; a stride-2 im2col conv is timed. Both give torch's result."""
    from srcore_cpu.kernels import conv as C
    from srcore_cpu.kernels import conv_winograd as WG

    timed = []
    real = C._time_mkl_gemm
    monkeypatch.setattr(C, "_time_mkl_gemm", lambda shape, *a, **kw: (timed.append(shape), real(shape, *a, **kw))[1])
    monkeypatch.setenv("SRCORE_CPU_SIMD_CONV", "0")
    assert WG.choose(1, 64, 64, 16, 16)          # (Winograd's shape; 64 channels: not timed against im2col)
    cases = [(rand(64, 64, 3, 3), (1, 64, 16, 16), 1, False),
             (rand(16, 6, 3, 3), (1, 6, 129, 131), 2, True)]   # past conv_small.py: im2col
    for w, shape, stride, want_timed in cases:
        timed.clear()
        x = rand(*shape)
        fn = C.make_conv(2, w, None, stride, 1, 1, 1, input_shape=shape)
        assert timed == ([shape] if want_timed else [])
        want = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w), stride=stride, padding=1).numpy()
        np.testing.assert_allclose(fn(x), want, rtol=1e-3, atol=1e-3)
