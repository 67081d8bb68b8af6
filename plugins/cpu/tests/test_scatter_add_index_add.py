"""scatter_add / index_add (graph nets' message aggregation), eye, fill, numpy_T and the number
``&``/``|``/``^`` vs torch: ops the zoo's graph_conv, pointnet, inplace_ops, gpt_block and
script_control models needed (no kernel before)."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from srcore.errors import KernelError  # noqa: E402
from srcore.testing import check_kernel  # noqa: E402
from srcore_cpu.kernels import creation as C  # noqa: E402
from srcore_cpu.kernels import index as X  # noqa: E402
from srcore_cpu.kernels import scalar as S  # noqa: E402
from srcore_cpu.kernels import shape as V  # noqa: E402

#: kernels are called directly: the executor and the memory planner play no part
pytestmark = pytest.mark.one_pass

RNG = np.random.default_rng(11)


def rand(*shape, dtype="float32"):
    return RNG.standard_normal(shape).astype(dtype)


def idx(high, *shape):
    return RNG.integers(0, high, size=shape).astype(np.int64)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_scatter_add_accumulates_repeated_indices(dim):
    x = rand(4, 5)
    n = x.shape[dim]
    index = idx(n, 3, 4)                       # smaller than src, repeats
    src = rand(6, 7)
    check_kernel(X.scatter_add, torch.scatter_add, x, dim, index, src)
    check_kernel(X.scatter_add, torch.scatter_add, x.astype(np.int64), dim, index, src.astype(np.int64) * 3)
    y = x.copy()
    assert X.scatter_add_(y, dim, index, src) is y
    np.testing.assert_allclose(y, torch.scatter_add(torch.from_numpy(x), dim, torch.from_numpy(index),
                                                    torch.from_numpy(src)).numpy(), rtol=1e-6)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_index_add(dim):
    x = rand(4, 5, 3)
    index = idx(x.shape[dim], 7)               # repeated rows accumulate
    shape = list(x.shape)
    shape[dim] = 7
    src = rand(*shape)
    check_kernel(X.index_add, torch.index_add, x, dim, index, src)
    check_kernel(X.index_add, lambda a, d, i, s: torch.index_add(a, d, i, s, alpha=-2.5), x, dim, index, src,
                 alpha=-2.5)
    xi, si = x.astype(np.int64), (src * 4).astype(np.int64)
    check_kernel(X.index_add, lambda a, d, i, s: torch.index_add(a, d, i, s, alpha=3), xi, dim, index, si, alpha=3)
    y = x.copy()
    assert X.index_add_(y, dim, index, src) is y
    np.testing.assert_allclose(y, torch.index_add(torch.from_numpy(x), dim, torch.from_numpy(index),
                                                  torch.from_numpy(src)).numpy(), rtol=1e-6)


def test_index_add_0d_and_bounds():
    # torch takes a 0-d self with a 0-d source and one index
    check_kernel(X.index_add, torch.index_add, np.array(1.5, np.float32), 0, np.zeros(1, np.int64),
                 np.array(2.0, np.float32))
    with pytest.raises(KernelError, match="out of bounds"):
        X.index_add(rand(3, 2), 0, np.array([3]), rand(1, 2))
    with pytest.raises(KernelError, match="out of bounds"):
        X.index_add(rand(3, 2), 0, np.array([-1]), rand(1, 2))


def test_eye():
    np.testing.assert_array_equal(C.eye(3), torch.eye(3).numpy())
    assert C.eye(3).dtype == np.float32
    np.testing.assert_array_equal(C.eye(2, 4, dtype=4), torch.eye(2, 4, dtype=torch.int64).numpy())
    out = np.full((4, 3), 7.0, np.float32)
    assert C.eye(4, 3, out=out) is out
    np.testing.assert_array_equal(out, torch.eye(4, 3).numpy())


def test_fill():
    x = rand(2, 3)
    check_kernel(C.fill, lambda t, v: torch.ops.aten.fill.Scalar(t, v), x, 0.5)
    check_kernel(C.fill, lambda t, v: torch.ops.aten.fill.Tensor(t, v), x, np.array(-2.0, np.float32))
    check_kernel(C.fill, lambda t, v: torch.ops.aten.fill.Scalar(t, v), x.astype(np.int64), 2.7)


def test_numpy_T_reverses_every_dim():
    x = rand(2, 3, 4)
    r = V.numpy_T(x)
    np.testing.assert_array_equal(r, torch.ops.aten.numpy_T(torch.from_numpy(x)).numpy())
    assert np.shares_memory(r, x)                  # a view, like torch's


@pytest.mark.parametrize("a,b", [(True, False), (True, True), (False, False), (6, 3), (-5, 12)])
def test_number_and_or_xor(a, b):
    assert S.and_(a, b) == (a & b) and type(S.and_(a, b)) is type(a & b)
    assert S.or_(a, b) == (a | b)
    assert S.xor_(a, b) == (a ^ b)
