"""Shape/view kernels vs torch: values, and that torch's views are numpy views of the input."""
from __future__ import annotations


import numpy as np
import pytest

torch = pytest.importorskip("torch")

from srcore.errors import KernelError  # noqa: E402
from srcore.testing import check_kernel  # noqa: E402
from srcore_cpu.kernels import shape as S  # noqa: E402

#: kernels are called directly: the executor and the memory planner play no part
pytestmark = pytest.mark.one_pass

RNG = np.random.default_rng(3)


def rand(*shape, dtype="float32"):
    return RNG.standard_normal(shape).astype(dtype)


def view_of(r, x):
    rs = r if isinstance(r, (list, tuple)) else [r]
    return all(isinstance(v, np.ndarray) and np.shares_memory(v, x) for v in rs if v.size)


VIEWS = [  # (kernel, torch reference, args)
    (S.view, lambda t, s: t.view(s), ([4, -1, 2],)),
    (S.view, lambda t, s: t.view(s), ([24],)),
    (S.reshape, torch.reshape, ([3, 8],)),
    (S.flatten, torch.flatten, ()),
    (S.flatten, torch.flatten, (1, 2)),
    (S.flatten, torch.flatten, (-2, -1)),
    (S.unflatten, torch.unflatten, (2, [2, -1])),
    (S.permute, torch.permute, ([2, 0, 1],)),
    (S.permute, torch.permute, ([-1, 1, 0],)),
    (S.transpose, torch.transpose, (0, -1)),
    (S.movedim, torch.movedim, (0, 2)),
    (S.movedim, torch.movedim, ([0, 1], [2, 0])),
    (S.select, torch.select, (1, -1)),
    (S.select, torch.select, (2, 0)),
    (S.slice, lambda t, d, a, b, c: torch.ops.aten.slice(t, d, a, b, c), (1, 1, None, 1)),
    (S.slice, lambda t, d, a, b, c: torch.ops.aten.slice(t, d, a, b, c), (2, -3, 100, 2)),
    (S.slice, lambda t, d, a, b, c: torch.ops.aten.slice(t, d, a, b, c), (0, None, -1, 1)),
    (S.slice, lambda t, d, a, b, c: torch.ops.aten.slice(t, d, a, b, c), (-1, 9223372036854775807, None, 1)),
    (S.narrow, torch.narrow, (2, 1, 2)),
    (S.narrow, torch.narrow, (1, -2, 2)),
    (S.unsqueeze, torch.unsqueeze, (0,)),
    (S.unsqueeze, torch.unsqueeze, (-1,)),
    (S.expand, lambda t, s: t.expand(s), ([5, 2, 3, 4],)),
    (S.expand, lambda t, s: t.expand(s), ([2, -1, 4],)),
    (S.split, lambda t, s, d: list(torch.split(t, s, d)), (2, 2)),
    (S.split, lambda t, s, d: list(torch.split(t, s, d)), ([1, 3], -1)),
    (S.split, lambda t, s: list(torch.split(t, s)), (5,)),
    (S.chunk, lambda t, c, d: list(torch.chunk(t, c, d)), (3, 2)),
    (S.chunk, lambda t, c, d: list(torch.chunk(t, c, d)), (2, 1)),
    (S.unbind, lambda t, d: list(torch.unbind(t, d)), (1,)),
    (S.contiguous, lambda t: t.contiguous(), ()),
]


@pytest.mark.parametrize("kernel,ref,args", VIEWS, ids=[f"{c[0].__name__}{i}" for i, c in enumerate(VIEWS)])
def test_views(kernel, ref, args):
    x = rand(2, 3, 4)
    r = check_kernel(kernel, ref, x, *args, kind="native")
    assert view_of(r, x)


def test_expand_size1_dims_and_expand_as():
    x = rand(3, 1)
    assert view_of(check_kernel(S.expand, lambda t, s: t.expand(s), x, [2, 3, 5], kind="native"), x)
    y = rand(4, 3, 6)
    assert view_of(check_kernel(S.expand_as, lambda t, o: t.expand_as(o), x, y, kind="native"), x)
    with pytest.raises(KernelError, match="number of sizes"):
        S.expand(x, [3])


def test_squeeze():
    x = rand(1, 3, 1, 2)
    for args in [(), (0,), (1,), (-2,), ([0, 2],), ([1, 3],)]:
        r = check_kernel(S.squeeze, torch.squeeze, x, *args, kind="native")
        assert view_of(r, x)
    s = np.array(2.0, np.float32)
    check_kernel(S.squeeze, torch.squeeze, s, 0, kind="native")


def test_t_and_0d_transpose():
    x = rand(3, 4)
    assert view_of(check_kernel(S.t, torch.t, x, kind="native"), x)
    check_kernel(S.t, torch.t, rand(5), kind="native")
    with pytest.raises(KernelError, match="<= 2"):
        S.t(rand(2, 2, 2))


def test_view_needs_compatible_strides():
    x = rand(3, 4).T
    with pytest.raises(KernelError, match="reshape"):
        S.view(x, [12])
    r = check_kernel(S.reshape, torch.reshape, x, [12], kind="native")  # reshape copies instead
    assert not np.shares_memory(r, x)
    with pytest.raises(KernelError, match="invalid for input"):
        S.view(rand(3, 4), [5, -1])


def test_view_dtype_and_as():
    x = rand(2, 4)
    r = check_kernel(S.view, lambda t, d: t.view(torch.int32), x, 3, kind="native")
    assert view_of(r, x)
    y = rand(8)
    assert view_of(check_kernel(S.view_as, lambda t, o: t.view_as(o), x, y, kind="native"), x)
    check_kernel(S.reshape_as, lambda t, o: t.reshape_as(o), x, y, kind="native")


def test_select_errors_and_0d():
    x = rand(3)
    r = check_kernel(S.select, torch.select, x, 0, 1, kind="native")
    assert isinstance(r, np.ndarray) and r.shape == () and view_of(r, x)
    with pytest.raises(KernelError, match="out of range"):
        S.select(x, 0, 3)
    with pytest.raises(KernelError, match="Dimension out of range"):
        S.select(x, 1, 0)
    with pytest.raises(KernelError, match="exceeds"):
        S.narrow(x, 0, 2, 2)
    check_kernel(S.narrow, lambda t, d, s, n: torch.narrow(t, d, s, n), x, 0, np.array(1), 2, kind="native")


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
def test_cat_stack(dtype):
    a, b = rand(2, 3).astype(dtype), rand(4, 3).astype(dtype)
    check_kernel(S.cat, torch.cat, [a, b])
    check_kernel(S.cat, torch.cat, [a.T, b.T], -1)
    check_kernel(S.stack, torch.stack, [a, a, a], 1)
    check_kernel(S.stack, torch.stack, [a, a], -1)


def test_cat_promotes_and_skips_legacy_empty():
    a, b = rand(2, 3), np.ones((1, 3), np.int64)
    check_kernel(S.cat, torch.cat, [a, b])
    check_kernel(S.cat, torch.cat, [a, np.zeros((0,), np.float32), a])
    check_kernel(S.stack, torch.stack, [a, a.astype(np.float64)])


@pytest.mark.parametrize("reps", [[2, 3], [2, 1, 3], [1, 1], [3, 2, 1, 2]])
def test_repeat(reps):
    x = rand(2, 3)
    check_kernel(S.repeat, lambda t, r: t.repeat(r), x, reps)
    check_kernel(S.repeat, lambda t, r: t.repeat(r), x.T, reps)
    with pytest.raises(KernelError, match="smaller"):
        S.repeat(x, [2])


def test_repeat_noncontiguous_out():
    x = rand(2, 3)
    out = np.empty((9, 4), np.float32).T
    assert S.repeat(x, [2, 3], out=out) is out
    np.testing.assert_array_equal(out, np.tile(x, (2, 3)))


def test_flip_roll():
    x = rand(2, 3, 4)
    r = check_kernel(S.flip, torch.flip, x, [0, -1])
    assert not np.shares_memory(r, x)
    for dims in ([1], [0, 1, 2], [], [-3, 2]):
        check_kernel(S.flip, torch.flip, x, dims)
    check_kernel(S.flip, torch.flip, x[:, ::2], [1])   # a strided view
    with pytest.raises(KernelError, match="appears multiple times"):   # torch refuses it too
        S.flip(x, [1, -2])
    with pytest.raises(KernelError, match="out of range"):
        S.flip(x, [3])
    check_kernel(S.roll, torch.roll, x, [1], [2])
    check_kernel(S.roll, torch.roll, x, [1, -2], [0, 2])
    check_kernel(S.roll, torch.roll, x, [5])
    check_kernel(S.roll, torch.roll, x, [7, -1, 2], [1, 1, -3])   # a dim twice, shifts past the size
    check_kernel(S.roll, torch.roll, rand(2, 0, 3), [1, 1], [1, 2])


@pytest.mark.parametrize("diag", [0, 1, -1, 3])
def test_triu_tril(diag):
    x = rand(2, 4, 5)
    x[0, 0, 4] = np.nan
    check_kernel(S.triu, torch.triu, x, diag)
    check_kernel(S.tril, torch.tril, x, diag)
    y = x.copy()
    assert S.triu_(y, diag) is y
    np.testing.assert_array_equal(y, torch.triu(torch.from_numpy(x), diag).numpy())
    with pytest.raises(KernelError, match="at least 2"):
        S.triu(rand(3))


def test_contiguous_0d_and_view():
    # conformance regression: np.ascontiguousarray made a 0-d tensor 1-d
    x = np.array(2.5, np.float32)
    r = check_kernel(S.contiguous, lambda t: t.contiguous(), x)
    assert r.shape == ()
    y = rand(3, 4)
    assert S.contiguous(y) is y or np.shares_memory(S.contiguous(y), y)  # already contiguous: no copy
    check_kernel(S.contiguous, lambda t: t.contiguous(), y.T)


@pytest.mark.parametrize("diag", [0, 2, -1])
def test_triu_tril_bool(diag):
    # conformance regression: zeroing wrote an int 0 into a bool tensor
    x = RNG.random((3, 4, 5)) < 0.7
    check_kernel(S.triu, torch.triu, x, diag)
    check_kernel(S.tril, torch.tril, x, diag)
