"""one_hot (given / inferred class counts, errors) and the functionalization ops select_scatter,
slice_scatter and out-of-place copy vs torch (shapes, negative dims and indices, clamped slice bounds,
steps, dtype casts, broadcasting, errors as KernelError)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

torch = pytest.importorskip("torch")

from srcore.errors import KernelError  # noqa: E402
from srcore.testing import check_kernel  # noqa: E402
from srcore_cpu.kernels import index as I  # noqa: E402
from srcore_cpu.kernels import view_scatter as V  # noqa: E402

#: kernels are called directly: the executor and the memory planner play no part
pytestmark = pytest.mark.one_pass

F = torch.nn.functional
RNG = np.random.default_rng(7)


@pytest.mark.parametrize("shape", [(5,), (2, 3), (2, 1, 4), ()])
@pytest.mark.parametrize("num_classes", [-1, 7, 9])
def test_one_hot(shape, num_classes):
    x = RNG.integers(0, 7, size=shape).astype(np.int64)
    check_kernel(I.one_hot, lambda t, _n: F.one_hot(t, num_classes), x, num_classes)
    if num_classes == -1:
        check_kernel(I.one_hot, F.one_hot, x)  # the default infers too


def test_one_hot_empty():
    x = np.zeros((0, 2), np.int64)
    check_kernel(I.one_hot, lambda t, _n: F.one_hot(t, 3), x, 3)
    with pytest.raises(KernelError, match="empty"):
        I.one_hot(x)


@pytest.mark.parametrize("x,n,match", [
    (np.array([0, -1, 2]), 5, "non-negative"),
    (np.array([0, -1, 2]), -1, "non-negative"),
    (np.array([0, 5, 2]), 5, "smaller than num_classes"),
    (np.array([0, 1]), -2, "num_classes"),
    (np.array([0, 1], np.int32), 3, "int64"),
])
def test_one_hot_errors(x, n, match):
    with pytest.raises(KernelError, match=match):
        I.one_hot(x, n)
    with pytest.raises(RuntimeError):  # torch rejects the same inputs
        F.one_hot(torch.from_numpy(x), n)


SHAPE = (3, 4, 5)


@pytest.mark.parametrize("dim,index", [(0, 0), (1, -1), (-1, 2), (2, 4), (-3, -3)])
@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
def test_select_scatter(dim, index, dtype):
    x = (RNG.standard_normal(SHAPE) * 3).astype(dtype)
    view = np.take(x, 0, axis=dim)
    src = (RNG.standard_normal(view.shape) * 3).astype(dtype)
    check_kernel(V.select_scatter, lambda s, t, *_: torch.select_scatter(s, t, dim, index), x, src, dim, index)


def test_select_scatter_casts_src_like_torch():
    x = np.zeros((2, 3), np.int64)
    src = np.array([1.7, -2.5, 3.2], np.float64)
    check_kernel(V.select_scatter, lambda s, t, *_: torch.select_scatter(s, t, 0, 1), x, src, 0, 1)


def test_select_scatter_errors():
    x = np.zeros(SHAPE, np.float32)
    with pytest.raises(KernelError, match="out of range"):
        V.select_scatter(x, np.zeros((3, 5), np.float32), 1, 4)
    with pytest.raises(KernelError, match="src to have a size equal"):
        V.select_scatter(x, np.zeros((3, 1), np.float32), 1, 2)
    with pytest.raises(KernelError, match="dim 3 out of range"):
        V.select_scatter(x, np.zeros((3, 4), np.float32), 3, 0)
    with pytest.raises(KernelError, match="0-dim"):
        V.select_scatter(np.zeros((), np.float32), np.zeros((), np.float32), 0, 0)


@settings(max_examples=80, deadline=None)
@given(st.integers(-3, 2), st.one_of(st.none(), st.integers(-7, 7)), st.one_of(st.none(), st.integers(-7, 7)),
       st.integers(1, 3))
def test_slice_scatter_matches_torch(dim, start, end, step):
    x = RNG.standard_normal(SHAPE).astype(np.float32)
    key = [slice(None)] * 3
    key[dim] = slice(start, end, step)
    src = RNG.standard_normal(x[tuple(key)].shape).astype(np.float32)
    check_kernel(V.slice_scatter, lambda s, t, *_: torch.slice_scatter(s, t, dim, start, end, step),
                 x, src, dim, start, end, step)


def test_slice_scatter_defaults_and_errors():
    x = np.zeros((4, 2), np.float32)
    src = np.ones((4, 2), np.float32)
    check_kernel(V.slice_scatter, torch.slice_scatter, x, src)
    with pytest.raises(KernelError, match="step must be positive"):
        V.slice_scatter(x, src, 0, 0, 4, 0)
    with pytest.raises(KernelError, match=r"src size = \[4, 2\], slice size = \[2, 2\]"):
        V.slice_scatter(x, src, 0, 1, 3)


@pytest.mark.parametrize("self_dt,src_dt", [("float32", "float32"), ("int32", "float64"), ("float32", "int64"),
                                            ("bool", "float32"), ("float64", "bool")])
@pytest.mark.parametrize("src_shape", [(3, 4), (4,), (1, 4), ()])
def test_copy(self_dt, src_dt, src_shape):
    x = np.zeros((3, 4), self_dt)
    src = (RNG.standard_normal(src_shape) * 3).astype(src_dt)
    check_kernel(V.copy, torch.ops.aten.copy, x, src)


def test_copy_does_not_broadcast_self():
    with pytest.raises(KernelError, match="does not broadcast"):
        V.copy(np.zeros((5,), np.float32), np.zeros((3, 5), np.float32))
    with pytest.raises(KernelError, match="does not broadcast"):
        V.copy(np.zeros((3, 4), np.float32), np.zeros((2, 4), np.float32))


def test_export_functionalized_row_assignment():
    # what torch.export emits for ``acc[i] = row``: copy(select(acc, 0, i), row) then select_scatter
    acc = np.zeros((3, 2), np.float32)
    row = np.array([1.5, 2.5], np.float32)
    new = V.copy(acc[1], row)
    got = V.select_scatter(acc, new, 0, 1)
    ref = torch.zeros(3, 2)
    ref[1] = torch.from_numpy(row)
    np.testing.assert_array_equal(got, ref.numpy())
    assert not acc.any()  # out of place: the inputs are untouched


def test_decl():
    from srcore_cpu.decl import index as DI, view_scatter as DV
    assert {"aten::select_scatter", "aten::slice_scatter", "aten::copy"} == {k.op for k in DV.KERNELS}
    assert all(k.kind == "out" for k in DV.KERNELS)
    (oh,) = [k for k in DI.KERNELS if k.op == "aten::one_hot"]
    assert oh.kind == "native" and oh.dtypes == ("int64",)
