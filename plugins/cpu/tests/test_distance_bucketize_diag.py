"""linalg_norm, cdist, pairwise_distance (metric learning), bucketize, diag vs torch (no kernel before)."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from srcore.errors import KernelError  # noqa: E402
from srcore.testing import check_kernel  # noqa: E402
from srcore_cpu.kernels import index as X  # noqa: E402
from srcore_cpu.kernels import linalg as L  # noqa: E402

#: kernels are called directly: the executor and the memory planner play no part
pytestmark = pytest.mark.one_pass

RNG = np.random.default_rng(14)


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("ord,dim,keepdim", [(None, None, False), (None, [1], True), (1.0, [-1], False),
                                             (float("inf"), [0], False), (-1.0, [1], False), (0.5, [1], True),
                                             ("fro", [0, 1], False), ("nuc", [1, 2], True), (2.0, [1, 2], False),
                                             (None, [1, 2], False)])
def test_linalg_norm(ord, dim, keepdim):
    x = rand(2, 4, 5)
    if dim is not None and len(dim) == 1:
        x = x[0]
    check_kernel(L.linalg_norm, lambda t, *_: torch.linalg.norm(t, ord, dim, keepdim), x, ord, dim, keepdim, rtol=1e-4)
    with pytest.raises(KernelError, match="1D or 2D"):
        L.linalg_norm(rand(2, 3, 4), 2.0, None)


@pytest.mark.parametrize("p", [2.0, 1.0, 0.0, 3.0, float("inf")])
def test_cdist(p):
    a, b = rand(2, 4, 6), rand(2, 5, 6)
    b[0, 1] = a[0, 2]   # a zero distance
    check_kernel(L.cdist, lambda x, y, *_: torch.cdist(x, y, p), a, b, p, rtol=1e-5)
    check_kernel(L.cdist, lambda x, y, *_: torch.cdist(x, y, p), a[0], b[1], p, rtol=1e-5)


def test_cdist_refuses_a_negative_p_as_torch():
    a, b = rand(2, 6), rand(3, 6)
    with pytest.raises(RuntimeError, match="non-negative p"):
        torch.cdist(torch.from_numpy(a), torch.from_numpy(b), -1.0)
    with pytest.raises(KernelError, match="non-negative p"):
        L.cdist(a, b, -1.0)


@pytest.mark.parametrize("p,keepdim", [(2.0, False), (1.0, True), (float("inf"), False), (0.0, False)])
def test_pairwise_distance(p, keepdim):
    a, b = rand(4, 6), rand(4, 6)
    check_kernel(L.pairwise_distance, lambda x, y, *_: torch.pairwise_distance(x, y, p, 1e-6, keepdim),
                 a, b, p, 1e-6, keepdim, rtol=1e-5)
    check_kernel(L.pairwise_distance, lambda x, y, *_: torch.pairwise_distance(x, y, p, 1e-6, keepdim),
                 a, b[:1], p, 1e-6, keepdim, rtol=1e-5)  # broadcast


@pytest.mark.parametrize("right,out_int32", [(False, False), (True, False), (False, True)])
def test_bucketize_edges_follow_right(right, out_int32):
    bnd = np.array([-1.0, 0.0, 1.0, 1.0, 2.5], np.float32)
    x = np.array([[-3.0, -1.0, 0.0, 0.5], [1.0, 2.5, 9.0, -0.0]], np.float32)
    check_kernel(X.bucketize, lambda t, b: torch.bucketize(t, b, out_int32=out_int32, right=right), x, bnd,
                 out_int32=out_int32, right=right)
    got = X.bucketize(1.0, bnd, right=right)
    assert int(got) == int(torch.bucketize(1.0, torch.from_numpy(bnd), right=right))


@pytest.mark.parametrize("k", [0, 1, -2, 5])
def test_diag(k):
    check_kernel(X.diag, lambda t, *_: torch.diag(t, k), rand(4), k)
    check_kernel(X.diag, lambda t, *_: torch.diag(t, k), rand(3, 5), k)
    with pytest.raises(KernelError, match="1D or 2D"):
        X.diag(rand(2, 2, 2))


@pytest.mark.parametrize("right,side,out_int32", [(False, None, False), (True, None, False), (False, "right", True),
                                                  (False, "left", False)])
def test_searchsorted_matches_torch(right, side, out_int32):
    """``aten::searchsorted``: 1-D boundaries for every value, N-D rows per leading index, ties, NaN
    (last), a ``sorter`` for unsorted rows, a Scalar value."""
    kw = dict(out_int32=out_int32, right=right, side=side)
    seq = np.array([-1.0, 0.0, 1.0, 1.0, 2.5, np.nan], np.float32)
    x = np.array([[-3.0, -1.0, 0.0, 0.5], [1.0, 2.5, np.nan, -0.0]], np.float32)
    check_kernel(X.searchsorted, lambda s, t: torch.searchsorted(s, t, **kw), seq, x, **kw)
    rows = np.sort(RNG.standard_normal((2, 3, 7)).astype(np.float32), axis=-1)
    vals = RNG.standard_normal((2, 3, 5)).astype(np.float32)
    vals[0, 1, 2] = rows[0, 1, 3]                                         # a tie
    check_kernel(X.searchsorted, lambda s, t: torch.searchsorted(s, t, **kw), rows, vals, **kw)
    unsorted = RNG.standard_normal((3, 6))
    order = np.argsort(unsorted, axis=-1, kind="stable")
    v = RNG.standard_normal((3, 4))
    want = torch.searchsorted(torch.from_numpy(unsorted), torch.from_numpy(v), sorter=torch.from_numpy(order), **kw)
    np.testing.assert_array_equal(X.searchsorted(unsorted, v, sorter=order, **kw), want.numpy())
    assert int(X.searchsorted(seq, 1.0, **kw)) == int(torch.searchsorted(torch.from_numpy(seq), 1.0, **kw))
    empty = np.zeros(0, np.float32)
    np.testing.assert_array_equal(X.searchsorted(empty, x, **kw),
                                  torch.searchsorted(torch.from_numpy(empty), torch.from_numpy(x), **kw).numpy())


def test_searchsorted_bad_arguments_are_kernel_errors():
    with pytest.raises(KernelError, match="opposites"):
        X.searchsorted(np.arange(3.0), np.arange(2.0), right=True, side="left")
    with pytest.raises(KernelError, match="side can only be"):
        X.searchsorted(np.arange(3.0), np.arange(2.0), side="middle")
    with pytest.raises(KernelError, match="must match"):
        X.searchsorted(np.zeros((2, 3)), np.zeros((3, 2)))


def test_a_model_with_searchsorted_runs_without_torch_fallback():
    import srcore

    class Bins(torch.nn.Module):
        def forward(self, edges, x):
            return torch.searchsorted(edges, x, right=True) * 2

    edges, x = torch.linspace(-2, 2, 9), torch.randn(3, 5)
    model = srcore.from_torchscript(torch.jit.script(Bins()), (edges, x))
    sm = srcore.StaticModule(model, backends=("cpu",), options=srcore.Options(allow_fallback=False))
    np.testing.assert_array_equal(sm(edges.numpy(), x.numpy()), Bins()(edges, x).numpy())
    assert not sm.load_report.fallbacks
