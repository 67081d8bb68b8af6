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
