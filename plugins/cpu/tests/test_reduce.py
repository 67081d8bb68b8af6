"""Reduction kernels vs torch: dims (None, [], negative, several), keepdim, dtype, int accumulation,
(values, indices) results with tuple outs, NaN handling, sort/topk order."""
from __future__ import annotations


import numpy as np
import pytest

torch = pytest.importorskip("torch")

from srcore.errors import KernelError  # noqa: E402
from srcore.testing import check_kernel  # noqa: E402
from srcore_cpu.kernels import reduce as R  # noqa: E402
from cpu_kernel_util import make_rand  # noqa: E402

#: kernels are called directly: the executor and the memory planner play no part
pytestmark = pytest.mark.one_pass

RNG = np.random.default_rng(2)
rand = make_rand(RNG)


DIMS = [None, [], [1], [-1], [0, 2], (-3,)]


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int32", "bool"])
@pytest.mark.parametrize("dim", DIMS)
@pytest.mark.parametrize("keepdim", [False, True])
def test_sum(dim, keepdim, dtype):
    x = rand(2, 3, 4, dtype=dtype)
    if dim is None:
        check_kernel(R.sum, torch.sum, x)
    tdim = None if dim is None or dim == [] else dim
    check_kernel(R.sum, lambda t, d, k: torch.sum(t, tdim, k), x, dim, keepdim)


@pytest.mark.parametrize("dim", [None, [1], [0, 2]])
def test_sum_dtype_mean_prod(dim):
    x = rand(2, 3, 4)
    tdim = dim if dim else None
    check_kernel(R.sum, lambda t, d, k: torch.sum(t, tdim, k, dtype=torch.float64), x, dim, False, dtype=7)
    check_kernel(R.mean, lambda t, d, k: torch.mean(t, tdim, k), x, dim, True)
    check_kernel(R.mean, lambda t: torch.mean(t, dtype=torch.float64), x, dtype=7)
    if dim is None:
        check_kernel(R.prod, torch.prod, x)
        check_kernel(R.prod, torch.prod, rand(5, dtype="int32"))
    else:
        check_kernel(R.prod, lambda t, d, k: torch.prod(t, d, k), x, dim[0], True)


def test_mean_of_ints_needs_dtype():
    x = rand(3, 4, dtype="int64")
    check_kernel(R.mean, lambda t: torch.mean(t, dtype=torch.float32), x, dtype=6)
    check_kernel(R.mean, lambda t, d, k: torch.mean(t, d, k, dtype=torch.float64), x, [1], True, dtype=7)
    with pytest.raises(KernelError, match="floating point"):
        R.mean(x)


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
def test_amax_amin_all_any(dtype):
    x = rand(3, 4, 5, dtype=dtype)
    for k, ref in [(R.amax, torch.amax), (R.amin, torch.amin)]:
        check_kernel(k, ref, x)
        check_kernel(k, ref, x, [0, -1], True)
    for k, ref in [(R.all, torch.all), (R.any, torch.any)]:
        check_kernel(k, ref, x)
        check_kernel(k, ref, x, 1)
        check_kernel(k, ref, x, 1, True)
        check_kernel(k, lambda t, d: ref(t, dim=tuple(d)), x, [0, 2])


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
@pytest.mark.parametrize("dim,keepdim", [(0, False), (-1, True), (1, False)])
def test_max_min_dim(dim, keepdim, dtype):
    x = rand(3, 4, 5, dtype=dtype)
    for k, ref in [(R.max, torch.max), (R.min, torch.min)]:
        r = check_kernel(k, lambda t, d, kd: tuple(ref(t, d, kd)), x, dim, keepdim)
        assert r[1].dtype == np.int64
        check_kernel(k, ref, x)


def test_max_nan_and_argmax():
    x = rand(3, 4)
    x[1, 2] = np.nan
    check_kernel(R.max, lambda t, d: tuple(torch.max(t, d)), x, 1)
    check_kernel(R.max, torch.max, x)
    for k, ref in [(R.argmax, torch.argmax), (R.argmin, torch.argmin)]:
        check_kernel(k, ref, x)
        check_kernel(k, ref, x, 1)
        check_kernel(k, ref, x, -2, True)
        check_kernel(k, ref, x, None, True)
        check_kernel(k, ref, np.array(3.0, np.float32), 0)


@pytest.mark.parametrize("p", [2, 1, 3, 0, float("inf"), float("-inf")])
def test_norms(p):
    x = rand(3, 4)
    x[0, 0] = 0
    check_kernel(R.linalg_vector_norm, torch.linalg.vector_norm, x, p)
    check_kernel(R.linalg_vector_norm, lambda t, o, d, k: torch.linalg.vector_norm(t, o, d, k), x, p, [1], True)
    check_kernel(R.norm, torch.norm, x, p)
    check_kernel(R.norm, lambda t, pp, d, k: torch.norm(t, pp, d, k), x, p, [0], False)
    check_kernel(R.norm, lambda t, pp, d: torch.ops.aten.norm(t, pp, d, False, dtype=torch.float64), x, p, [0],
                 dtype=7)


def test_norm_p_none():
    x = rand(3, 4)
    check_kernel(R.norm, lambda t, pp, d: torch.ops.aten.norm(t, pp, d), x, None, [1])


@pytest.mark.parametrize("fn", ["std", "var"])
def test_std_var(fn):
    x = rand(4, 5, 6, dtype="float64")
    k, ref = getattr(R, fn), getattr(torch, fn)
    check_kernel(k, ref, x)  # aten::std(self, unbiased=True)
    check_kernel(k, ref, x, False)  # aten::std(self, bool unbiased)
    check_kernel(k, lambda t, d, u, kd: ref(t, d, unbiased=u, keepdim=kd), x, [1], False, True)
    check_kernel(k, lambda t, d: ref(t, d, correction=0, keepdim=True), x, [0, 2], correction=0, keepdim=True)
    check_kernel(k, lambda t, d: ref(t, d), x, None, correction=None)


@pytest.mark.parametrize("dtype", ["float32", "int64", "int32", "bool"])
def test_cumsum(dtype):
    x = rand(3, 4, dtype=dtype)
    check_kernel(R.cumsum, torch.cumsum, x, 1)
    check_kernel(R.cumsum, torch.cumsum, x, -2)
    check_kernel(R.cumsum, lambda t, d: torch.cumsum(t, d, dtype=torch.float64), x, 0, dtype=7)


def test_logsumexp():
    x = rand(3, 4, 5) * 30
    check_kernel(R.logsumexp, torch.logsumexp, x, [1])
    check_kernel(R.logsumexp, torch.logsumexp, x, [0, 2], True)
    check_kernel(R.logsumexp, torch.logsumexp, rand(3, 4, dtype="int64"), [1])
    check_kernel(R.logsumexp, torch.logsumexp, x, [0, 1, 2])
    # rows all -inf, one +inf, a NaN; an empty reduction
    y = rand(4, 3)
    y[0] = -np.inf
    y[1, 1] = np.inf
    y[2, 0] = np.nan
    check_kernel(R.logsumexp, torch.logsumexp, y, [1])
    check_kernel(R.logsumexp, torch.logsumexp, rand(4, 0), [1], True)


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("dim", [-1, 0])
def test_sort_stable_with_ties_and_nan(dim, descending):
    x = RNG.integers(0, 4, size=(6, 7)).astype(np.float32)
    x[2, 3] = np.nan
    check_kernel(R.sort, lambda t, d, de: tuple(torch.sort(t, dim=d, descending=de, stable=True)),
                 x, dim, descending)
    check_kernel(R.sort, lambda t: tuple(torch.sort(t, stable=True, dim=dim, descending=descending)), x,
                 stable=True, dim=dim, descending=descending)


@pytest.mark.parametrize("largest", [True, False])
def test_topk(largest):
    x = RNG.permutation(60).reshape(5, 12).astype(np.float32)  # distinct: torch's tie order is unspecified
    check_kernel(R.topk, lambda t, k, d, lg: tuple(torch.topk(t, k, d, lg)), x, 3, -1, largest)
    check_kernel(R.topk, lambda t, k, d, lg: tuple(torch.topk(t, k, d, lg)), x, 2, 0, largest)
    check_kernel(R.topk, lambda t, k: tuple(torch.topk(t, k)), x.astype(np.int64), 4)


@pytest.mark.parametrize("dim", [0, -1, [0], [-1]])
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_0d_input_with_dim(dim, keepdim, dtype):
    # conformance regression: torch accepts dim 0/-1 on a 0-d tensor (and keeps it 0-d); numpy raises AxisError
    x = np.array(1.5, dtype)
    d1 = dim if isinstance(dim, int) else dim[0]
    check_kernel(R.sum, lambda t, *_: torch.sum(t, dim, keepdim), x, dim, keepdim)
    check_kernel(R.mean, lambda t, *_: torch.mean(t, dim, keepdim), x, dim, keepdim)
    check_kernel(R.amax, lambda t, *_: torch.amax(t, dim, keepdim), x, dim, keepdim)
    check_kernel(R.logsumexp, lambda t, *_: torch.logsumexp(t, dim, keepdim), x, dim, keepdim)
    check_kernel(R.var, lambda t, *_: torch.var(t, dim, correction=0, keepdim=keepdim), x, dim,
                 keepdim=keepdim, correction=0)
    check_kernel(R.max, lambda t, *_: tuple(torch.max(t, d1, keepdim)), x, d1, keepdim)
    for ord in (2, 1, 4, 0.5, float("inf")):
        check_kernel(R.linalg_vector_norm, lambda t, *_: torch.linalg.vector_norm(t, ord, dim, keepdim), x, ord,
                     dim, keepdim)
    with pytest.raises(KernelError, match="Dimension out of range"):
        R.sum(x, [1])


@pytest.mark.parametrize("dtype", ["int64", "float32"])
@pytest.mark.parametrize("largest", [True, False])
def test_topk_ties_select_distinct_indices(dtype, largest):
    # conformance regression (harness): torch breaks ties in an unspecified order, so check what the
    # indices must satisfy: distinct, selecting torch's values
    x = RNG.integers(0, 3, size=(5, 10, 5)).astype(dtype)
    ref = torch.topk(torch.from_numpy(x), 3, 1, largest)
    values, idx = R.topk(x, 3, 1, largest)
    np.testing.assert_array_equal(values, ref.values.numpy())
    np.testing.assert_array_equal(np.take_along_axis(x, idx, 1), ref.values.numpy())
    assert idx.dtype == np.int64
    assert not np.any(np.diff(np.sort(idx, axis=1), axis=1) == 0)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int32"])
@pytest.mark.parametrize("largest", [True, False])
def test_topk_selection_path_matches_torch_and_the_full_sort(dtype, largest):
    # wide rows and a small k take the partition path; boundary ties (few distinct values) and NaN
    # fall back to the full sort: either way the indices are the stable sort's (lower index first
    # among equal values) and the values torch's
    rng = np.random.default_rng(11)
    cases = [((6, 400), -1, 1000, True), ((3, 200, 2), 1, 1000, True), ((500,), 0, 1000, True),
             ((4, 300), 1, 3, False)]                                    # values 0..2: ties everywhere
    if dtype.startswith("float"):
        nan = (rng.standard_normal((5, 300)) * 1000).astype(dtype)
        nan[1, 7] = np.nan
        cases.append((nan, -1, None, False))
    for shape, dim, spread, selects in cases:
        x = shape if spread is None else (rng.integers(0, spread, shape) if spread < 10
                                          else rng.standard_normal(shape) * spread).astype(dtype)
        for k in (1, 7, x.shape[dim] // 4):
            values, idx = R.topk(x, k, dim, largest)
            full = np.take(R._sorted_indices(x, dim, largest), np.arange(k), axis=dim)
            np.testing.assert_array_equal(idx, full)
            ref = torch.topk(torch.from_numpy(x), k, dim, largest)
            np.testing.assert_array_equal(values, ref.values.numpy())
            if selects and k > 1:   # distinct values: the selection path answered
                assert R._topk_partial(x, k, dim, largest) is not None
            if spread is None:
                assert R._topk_partial(x, k, dim, largest) is None


@pytest.mark.parametrize("shape,dim,keepdim", [((3, 10), [1], True), ((3, 10), None, False),
                                               ((2, 3, 4, 5), [2, 3], False), ((2, 3), [-1], False),
                                               ((), None, False), ((0, 3), [0], True)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float_mean_has_numpys_bits_and_torchs_values(shape, dim, keepdim, dtype):
    """A float mean is a sum in the input's dtype divided by the count (np.mean's arithmetic, without
    its Python): the same bits as np.mean, torch's values, into ``out`` too."""
    x = np.random.default_rng(3).standard_normal(shape).astype(dtype)
    axis = None if dim is None else tuple(dim)
    with np.errstate(all="ignore"):
        want = np.mean(x, axis=axis, keepdims=keepdim)
        got = R.mean(x, dim, keepdim)
        out = np.empty(np.shape(want), dtype)
        into = R.mean(x, dim, keepdim, out=out)
    assert got.dtype == want.dtype and np.array_equal(got, want, equal_nan=True)
    assert into is out and np.array_equal(out, want, equal_nan=True)
    t = torch.from_numpy(x)
    ref = torch.mean(t) if dim is None else torch.mean(t, dim, keepdim)
    np.testing.assert_allclose(got, ref.numpy(), rtol=1e-6, equal_nan=True)
