"""MKL's SGEMM in the cpu plugin (mkl_gemm.py) against torch: the GEMM itself, its fallbacks to
``np.dot``, and constant-weight linears whose GEMM is MKL's (the timing forced to pick it)."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from srcore.ir.types import TensorType  # noqa: E402
from srcore.plugin import ArgInfo, NodeInfo, Specialized  # noqa: E402
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
    monkeypatch.setattr(M, "_mkl_faster", lambda mkl_dot, m, w: True)
    monkeypatch.setattr(P, "blas_threads", lambda: 2)
    assert M.gemm_for(64, wT) is None                       # numpy's BLAS on 2 threads keeps them
    monkeypatch.setattr(P, "blas_threads", lambda: 1)
    assert M.gemm_for(64, wT) is not None


@pytest.mark.parametrize("xshape", [(40, 64), (2, 20, 64)])
def test_linear_matcher_with_mkl(monkeypatch, xshape):
    """A linear whose input shape is known at load, MKL's GEMM chosen: same results as torch."""
    monkeypatch.setattr(M, "_choices", {})
    monkeypatch.setattr(M, "_mkl_faster", lambda mkl_dot, m, w: True)
    monkeypatch.setattr(M, "_MIN_MACS", 1)
    w, b = rand(48, 64), rand(48)
    args = (ArgInfo("input", TensorType("float32", xshape), False, None), ArgInfo("weight", TensorType(), True, w),
            ArgInfo("bias", TensorType(), True, b))
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1, user_api="blas"):   # MKL is sequential: offered at 1 BLAS thread only
        spec = K.linear_matcher(NodeInfo("aten::linear", None, args, ()))
    assert isinstance(spec, Specialized)
    assert M._choices == {(int(np.prod(xshape[:-1])), 64, 48): True}
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
            if name != "compute":
                return fn
            return lambda *a: (calls.append(a[3:6]), fn(*a))[1]
    monkeypatch.setattr(M, "_lib", Counting())
    monkeypatch.setattr(M, "_MIN_MACS", 1)
    monkeypatch.setattr(M, "_choices", {})
    monkeypatch.setattr(M, "_mkl_faster", lambda mkl_dot, m, w: True)
    w, b = rand(48, 64), rand(48)
    t = TensorType("float32", (2, 20, 64))
    args = (ArgInfo("input", t, False, None), ArgInfo("weight", TensorType(), True, w),
            ArgInfo("bias", TensorType(), True, b))
    with threadpool_limits(1, user_api="blas"):
        spec = K.linear_matcher(NodeInfo("aten::linear", None, args, ()))
    x = rand(2, 20, 64)
    np.testing.assert_allclose(spec.fn(x), torch_linear(x, w, b), **TOL)
    assert calls == [(40, 48, 64)]
