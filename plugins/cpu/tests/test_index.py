"""Indexing kernels vs torch: gather/scatter with index smaller than self, index_select,
advanced indexing with None entries and bool masks, masked_select, nonzero."""
from __future__ import annotations


import numpy as np
import pytest

torch = pytest.importorskip("torch")

from srcore.errors import KernelError  # noqa: E402
from srcore.testing import check_kernel  # noqa: E402
from srcore_cpu.kernels import index as X  # noqa: E402

#: kernels are called directly: the executor and the memory planner play no part
pytestmark = pytest.mark.one_pass

RNG = np.random.default_rng(4)


def rand(*shape, dtype="float32"):
    return RNG.standard_normal(shape).astype(dtype)


def idx(high, *shape):
    return RNG.integers(0, high, size=shape).astype(np.int64)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_gather(dim):
    x = rand(4, 5, 6)
    n = x.shape[dim]
    check_kernel(X.gather, torch.gather, x, dim, idx(n, 4, 5, 6))
    check_kernel(X.gather, torch.gather, x, dim, idx(n, 2, 3, 7 if dim in (-1, 2) else 2))  # smaller index
    check_kernel(X.gather, torch.gather, x.astype(np.int64), dim, idx(n, 1, 1, 1))


def test_gather_0d():
    check_kernel(X.gather, torch.gather, np.array(3.0, np.float32), 0, np.zeros((), np.int64))


@pytest.mark.filterwarnings("ignore:The reduce argument of torch.scatter")
@pytest.mark.parametrize("dim", [0, 1])
def test_scatter(dim):
    x, src = rand(4, 5), rand(6, 7)
    # unique indices along dim so that the result does not depend on write order
    index = np.argsort(RNG.random((4, 5)), axis=dim)[:3, :3] if dim == 0 else np.argsort(RNG.random((4, 5)), axis=1)[:3, :3]
    index = index.astype(np.int64)
    check_kernel(X.scatter, torch.scatter, x, dim, index, src)
    check_kernel(X.scatter, torch.scatter, x, dim, index, 2.5)
    rep = idx(x.shape[dim], 3, 3)  # repeated indices are fine when reducing
    check_kernel(X.scatter, lambda t, d, i, s: torch.scatter(t, d, i, s, reduce="add"), x, dim, rep, src,
                 reduce="add")
    check_kernel(X.scatter, lambda t, d, i, s: torch.scatter(t, d, i, s, reduce="multiply"), x, dim, rep, src,
                 reduce="multiply")
    y = x.copy()
    assert X.scatter_(y, dim, index, src) is y
    np.testing.assert_array_equal(y, torch.scatter(torch.from_numpy(x), dim, torch.from_numpy(index),
                                                   torch.from_numpy(src)).numpy())
    with pytest.raises(KernelError, match="reduce"):
        X.scatter(x, dim, rep, src, reduce="max")


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_index_select(dim):
    x = rand(4, 5, 6)
    check_kernel(X.index_select, torch.index_select, x, dim, idx(x.shape[dim], 7))
    check_kernel(X.index_select, torch.index_select, x, dim, np.array(1))
    check_kernel(X.index_select, torch.index_select, np.array(2.0, np.float32), 0, np.array([0]))


def _tindex(t, ind):
    return torch.ops.aten.index(t, ind)


@pytest.mark.parametrize("make", [
    lambda: [idx(4, 3)],
    lambda: [None, idx(5, 2, 2)],
    lambda: [idx(4, 3), idx(5, 3)],
    lambda: [idx(4, 3), None, idx(6, 3)],  # separated advanced indices go first
    lambda: [None, idx(5, 3), idx(6, 1)],
    lambda: [RNG.random((4, 5)) < 0.5],
    lambda: [None, RNG.random(5) < 0.5],
    lambda: [np.array(2)],
    lambda: [(RNG.random(4) < 0.5).astype(np.uint8)],
], ids=["int", "none-int2d", "two", "split", "none-bcast", "bool2d", "none-bool", "0d", "uint8-mask"])
def test_index_tensor(make):
    x = rand(4, 5, 6)
    check_kernel(X.index, _tindex, x, make(), kind="native")


def test_index_out_of_range():
    with pytest.raises(KernelError, match="index"):
        X.index(rand(3), [np.array([5])])


def test_masked_select_nonzero():
    x = rand(3, 4)
    check_kernel(X.masked_select, torch.masked_select, x, x > 0, kind="native")
    check_kernel(X.masked_select, torch.masked_select, x, RNG.random(4) < 0.5, kind="native")  # broadcast mask
    check_kernel(X.nonzero, torch.nonzero, (x > 0).astype(np.float32), kind="native")
    check_kernel(X.nonzero, torch.nonzero, np.zeros((2, 0, 3), np.int64), kind="native")
    check_kernel(X.nonzero, torch.nonzero, RNG.random((2, 3, 4)) < 0.3, kind="native")


def test_where_one_argument():
    x = RNG.random((3, 4)) < 0.5
    check_kernel(X.where_nonzero, lambda t: list(torch.where(t)), x, kind="native")


def test_index_put():
    x = rand(4, 5)
    m = x > 0
    check_kernel(X.index_put, lambda t, i, v: torch.index_put(t, i, v), x, [m], np.array(0.0, np.float32))
    rows = np.array([0, 2, 0])
    check_kernel(X.index_put, lambda t, i, v, a: torch.ops.aten.index_put(t, i, v, a), x, [rows, None], rand(5), True)
    check_kernel(X.index_put, lambda t, i, v: torch.ops.aten.index_put(t, i, v), x, [None, np.array([1, 3])], rand(4, 2))
    y = x.copy()
    assert X.index_put_(y, [m], np.array(7.0, np.float32)) is y
    np.testing.assert_array_equal(y, np.where(m, 7.0, x))
    with pytest.raises(KernelError, match="index_put_"):
        X.index_put_(y, [np.array([9])], np.array(1.0, np.float32))


def test_gather_empty_index_of_other_rank():
    # conformance regression: torch skips the rank check for an empty index and returns index's shape
    check_kernel(X.gather, torch.gather, rand(5), 0, np.zeros((2, 0), np.int64))


@pytest.mark.filterwarnings("ignore:The reduce argument of torch.scatter")
@pytest.mark.parametrize("dtype", ["int64", "int32"])
@pytest.mark.parametrize("reduce", ["add", "multiply"])
def test_scatter_float_value_into_int_truncates(dtype, reduce):
    # conformance regression: the Scalar is cast to self's dtype before reducing (2.5 -> 2, -2.5 -> -2)
    x = np.array([3, 4, 5], dtype)
    i = np.array([0, 0, 2], np.int64)
    for v in (2.5, -2.5):
        check_kernel(X.scatter, lambda t, d, ii: torch.ops.aten.scatter.value_reduce(t, d, ii, v, reduce=reduce),
                     x, 0, i, value=v, reduce=reduce)
    check_kernel(X.scatter, lambda t, d, ii: torch.ops.aten.scatter.value_reduce(t, d, ii, 2.5, reduce="add"),
                 np.array(3, dtype), 0, np.array(0, np.int64), value=2.5, reduce="add")


@pytest.mark.parametrize("bad", [-1, 5])
def test_out_of_bounds_index_is_an_error(bad):
    # torch rejects negative indices in gather/scatter/index_select; numpy would wrap them silently
    x, i = rand(5), np.array([0, bad], np.int64)
    for call, ref in [(lambda: X.gather(x, 0, i), lambda: torch.gather(torch.from_numpy(x), 0, torch.from_numpy(i))),
                      (lambda: X.scatter(x, 0, i, value=1.0),
                       lambda: torch.scatter(torch.from_numpy(x), 0, torch.from_numpy(i), 1.0)),
                      (lambda: X.index_select(x, 0, i),
                       lambda: torch.index_select(torch.from_numpy(x), 0, torch.from_numpy(i)))]:
        with pytest.raises((RuntimeError, IndexError)):
            ref()
        with pytest.raises(KernelError, match="out of bounds"):
            call()
