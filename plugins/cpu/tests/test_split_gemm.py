"""Products of non-constant tensors split over the part pool at more than one BLAS thread
(split_gemm.py): the split plans, the results against torch.matmul, numpy's BLAS at one thread in
each part, and the matmul / mm / bmm matchers (the load-time timing forced either way)."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
threadpoolctl = pytest.importorskip("threadpoolctl")

from srcore.ir.types import TensorType  # noqa: E402
from srcore.plugin import ArgInfo, NodeInfo, Specialized  # noqa: E402
from srcore_cpu.kernels import linalg as K  # noqa: E402
from srcore_cpu.kernels import parallel as P  # noqa: E402
from srcore_cpu.kernels import split_gemm as S  # noqa: E402

pytestmark = pytest.mark.one_pass   # kernels are called directly

RNG = np.random.default_rng(5)
TOL = dict(rtol=1e-4, atol=1e-4)


def rand(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def torch_matmul(a, b):
    return torch.matmul(torch.from_numpy(a), torch.from_numpy(b)).numpy()


def _blas_ok():
    return P._blas_controller() is not None


@pytest.mark.parametrize("a_shape, b_shape, parts", [
    ((1, 4, 32, 16), (1, 4, 16, 24), 2),     # attention: over the heads
    ((3, 40, 8), (8, 5), 2),                 # 2-D right operand broadcast: over a's batch
    ((5, 1, 40, 8), (3, 8, 6), 2),           # broadcast batch: out (5, 3, ...), split over axis 0
    ((1, 64, 32), (1, 32, 16), 2),           # batch of one: over the rows
    ((64, 32), (32, 16), 2),                 # mm: over the rows
])
def test_split_matches_torch_with_one_blas_thread_a_part(monkeypatch, a_shape, b_shape, parts):
    if not _blas_ok():
        pytest.skip("numpy's BLAS not controllable here")
    seen, ctl, real = [], P._blas_controller(), np.matmul

    def matmul(a, b, out=None):
        seen.append(ctl.num_threads)
        return real(a, b, out=out)
    with monkeypatch.context() as m:       # the kernel binds numpy's matmul when built
        m.setattr(np, "matmul", matmul)
        fn = S.make(a_shape, b_shape, "float32", 2)
    assert fn is not None and fn.parts == parts
    a, b = rand(*a_shape), rand(*b_shape)
    out = np.full(np.broadcast_shapes(a_shape[:-2], b_shape[:-2]) + (a_shape[-2], b_shape[-1]), np.nan, np.float32)
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        np.testing.assert_allclose(fn(a, b), torch_matmul(a, b), **TOL)
        assert seen == [1] * parts and ctl.num_threads == 2   # each part on one BLAS thread, put back
        assert fn(a, b, out) is out
    np.testing.assert_allclose(out, torch_matmul(a, b), **TOL)


def test_split_falls_back_on_other_shapes_and_declines_what_does_not_split():
    fn = S.make((1, 4, 8, 8), (1, 4, 8, 8), "float32", 2)
    a, b = rand(2, 4, 8, 8), rand(2, 4, 8, 8)
    np.testing.assert_allclose(fn(a, b), torch_matmul(a, b), **TOL)           # another shape: np.matmul
    np.testing.assert_allclose(fn(a[:1].astype(np.float64), b[:1].astype(np.float64)),
                               torch_matmul(a[:1].astype(np.float64), b[:1].astype(np.float64)), **TOL)
    assert S.make((1, 3, 8), (1, 8, 8), "float32", 2) is None                  # 3 rows, no batch to split
    assert S.make((8,), (8, 4), "float32", 2) is None                          # a vector
    with threadpoolctl.threadpool_limits(1, user_api="blas"):
        assert S.split_for((1, 4, 128, 64), (1, 4, 64, 128), "float32") is None   # one thread
    assert S.split_for(("s", 64), (64, 64), "float32") is None                # symbolic
    assert S.split_for((1, 4, 8, 8), (1, 4, 8, 8), "float32") is None          # under MIN_MACS


def _node(op, other, a_shape, b_shape, dtype="float32"):
    return NodeInfo(op, None, (ArgInfo("self", TensorType(dtype, a_shape), False, None),
                               ArgInfo(other, TensorType(dtype, b_shape), False, None)), ())


@pytest.mark.parametrize("op, other, matcher, generic", [
    ("aten::matmul", "other", K.matmul_matcher, K.matmul),
    ("aten::bmm", "mat2", K.bmm_matcher, K.bmm),
    ("aten::mm", "mat2", K.mm_matcher, K.mm),
])
def test_matchers_take_the_split_only_where_it_timed_no_slower(monkeypatch, op, other, matcher, generic):
    if not _blas_ok():
        pytest.skip("numpy's BLAS not controllable here")
    from srcore_cpu.kernels import tactic

    monkeypatch.setenv("SRCORE_CPU_NATIVE_SPLIT", "0")   # (the native split's choice: test_native_team.py)
    a_shape, b_shape = ((128, 96), (96, 80)) if op == "aten::mm" else ((4, 64, 48), (4, 48, 64))
    timed = []
    for split_t, blas_t, chosen in ((1.0, 1.01, True), (1.0, 0.9, False)):
        monkeypatch.setattr(S, "_choices", {})
        monkeypatch.setattr(tactic, "split_vs_blas",
                            lambda split, blas, **kw: (timed.append((split(), blas())), (split_t, blas_t))[1])
        with threadpoolctl.threadpool_limits(2, user_api="blas"):
            spec = matcher(_node(op, other, a_shape, b_shape))
            if not chosen:   # numpy's product, on the calling thread's one BLAS thread (one team)
                assert spec is not generic and spec.__wrapped__ is generic
                a, b = rand(*a_shape), rand(*b_shape)
                np.testing.assert_allclose(spec(a, b), torch_matmul(a, b), **TOL)
                monkeypatch.setenv("SRCORE_CPU_THREADED_BLAS", "1")
                assert matcher(_node(op, other, a_shape, b_shape)) is generic
                monkeypatch.delenv("SRCORE_CPU_THREADED_BLAS")
                continue
            assert isinstance(spec, Specialized) and spec.args == (0, 1)
            a, b = rand(*a_shape), rand(*b_shape)
            np.testing.assert_allclose(spec.fn(a, b), torch_matmul(a, b), **TOL)
    assert len(timed) == 2                                     # both candidates ran on the node's shape
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        monkeypatch.setenv("SRCORE_CPU_SPLIT_GEMM", "0")
        assert matcher(_node(op, other, a_shape, b_shape)).__wrapped__ is generic
        monkeypatch.delenv("SRCORE_CPU_SPLIT_GEMM")
        assert matcher(_node(op, other, a_shape, b_shape, "int64")) is generic
