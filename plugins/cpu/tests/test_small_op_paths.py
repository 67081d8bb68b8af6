"""The small-tensor fast paths of integer truncating division, clamp with number bounds, unsqueeze,
take_along_dim without broadcasting, var/std and logsumexp, against torch over hypothesis-drawn
shapes, values (NaN, infinities, negatives, empty tensors) and layouts (non-contiguous views)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

torch = pytest.importorskip("torch")

from srcore.errors import KernelError  # noqa: E402
from srcore_cpu.kernels import elementwise as E  # noqa: E402
from srcore_cpu.kernels import reduce as R  # noqa: E402
from srcore_cpu.kernels import selection as S  # noqa: E402
from srcore_cpu.kernels import shape as SH  # noqa: E402
from srcore_cpu.kernels import ternary as TE  # noqa: E402

pytestmark = pytest.mark.one_pass
SETTINGS = settings(max_examples=80, deadline=None)
SHAPES = st.lists(st.integers(0, 5), min_size=1, max_size=3).map(tuple)


def _ints(seed, shape, dtype):
    info = np.iinfo(dtype)
    return np.random.default_rng(seed).integers(max(info.min, -1000), min(info.max, 1000), shape, endpoint=True).astype(dtype)


def _floats(seed, shape, dtype, specials):
    x = np.random.default_rng(seed).standard_normal(shape).astype(dtype) * 3
    if specials and x.size:
        flat = x.reshape(-1)
        flat[:: 5] = np.nan
        flat[1:: 7] = np.inf
        flat[2:: 9] = -np.inf
    return x


def _strided(x, on):
    """``x``'s values in a non-contiguous view when ``on`` (and ``x`` has a dim to stride)."""
    if not on or x.ndim == 0:
        return x
    wide = np.zeros(x.shape[:-1] + (2 * x.shape[-1],), x.dtype)
    wide[..., ::2] = x
    return wide[..., ::2]


@SETTINGS
@given(SHAPES, st.sampled_from([np.int64, np.int32, np.int16, np.int8, np.uint8]), st.integers(0, 2**16),
       st.booleans(), st.one_of(st.integers(-9, 9).filter(bool), st.none()), st.booleans())
def test_trunc_division_of_integers(shape, dtype, seed, strided, scalar, inplace):
    a = _strided(_ints(seed, shape, dtype), strided)
    if scalar is not None and (dtype is np.uint8 and scalar < 0):
        scalar = -scalar
    b = scalar if scalar is not None else _ints(seed + 1, shape, dtype)
    if isinstance(b, np.ndarray):
        b[b == 0] = 3
        if np.iinfo(dtype).min < 0:
            b[(a == np.iinfo(dtype).min) & (b == -1)] = 2   # torch raises SIGFPE on INT_MIN / -1
    e = torch.div(torch.from_numpy(a.copy()), b if scalar is not None else torch.from_numpy(b),
                  rounding_mode="trunc").numpy()
    r = E.div(a, b, rounding_mode="trunc")
    assert r.dtype == e.dtype and r.shape == e.shape
    np.testing.assert_array_equal(r, e)
    if inplace and e.dtype == a.dtype:   # div_: the output is the dividend itself
        assert E.div(a, b, rounding_mode="trunc", out=a) is a
        np.testing.assert_array_equal(a, e)


def test_integer_division_by_zero_raises():
    a = np.array([4, -4, 7])
    for fn in (lambda b: E.div(a, b, rounding_mode="trunc"), lambda b: E.fmod(a, b),
               lambda b: E.remainder(a, b), lambda b: E.floor_divide(a, b)):
        with pytest.raises(KernelError, match="ZeroDivisionError"):
            fn(0)
        with pytest.raises(KernelError, match="ZeroDivisionError"):
            fn(np.array([1, 0, 2]))
    np.testing.assert_array_equal(E.div(np.array(-7), 2, rounding_mode="trunc"), np.array(-3))


@SETTINGS
@given(SHAPES, st.sampled_from([np.int64, np.int32, np.float32]), st.integers(0, 2**16), st.booleans(),
       st.sampled_from([(-2, 2), (None, 1), (0, None), (1.5, 2.5), (3, -3)]))
def test_clamp_with_number_bounds(shape, dtype, seed, strided, bounds):
    x = _strided(_ints(seed, shape, dtype) if dtype is not np.float32 else _floats(seed, shape, dtype, True), strided)
    lo, hi = bounds
    e = torch.clamp(torch.from_numpy(x.copy()), lo, hi).numpy()
    r = TE.clamp(x, lo, hi)
    assert r.dtype == e.dtype and r.shape == e.shape
    np.testing.assert_array_equal(r, e)


@given(st.lists(st.integers(0, 4), max_size=3).map(tuple), st.data())
def test_unsqueeze_is_torchs_view(shape, data):
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    dim = data.draw(st.integers(-x.ndim - 1, x.ndim))
    r = SH.unsqueeze(x, dim)
    assert r.shape == tuple(torch.from_numpy(x).unsqueeze(dim).shape)
    assert np.shares_memory(r, x) or x.size == 0
    with pytest.raises(KernelError, match="out of range"):
        SH.unsqueeze(x, x.ndim + 1)


@SETTINGS
@given(st.lists(st.integers(1, 5), min_size=1, max_size=3).map(tuple), st.data(), st.integers(0, 2**16),
       st.booleans())
def test_take_along_dim_matches_torch(shape, data, seed, strided):
    x = _strided(_floats(seed, shape, np.float32, False), strided)
    dim = data.draw(st.integers(-x.ndim, x.ndim - 1))
    n = x.shape[dim]
    ishape = list(shape)
    ishape[dim] = data.draw(st.integers(0, 4))
    if data.draw(st.booleans()):   # broadcasting index (a size-1 dim elsewhere)
        other = data.draw(st.integers(0, x.ndim - 1))
        if other != dim % x.ndim:
            ishape[other] = 1
    idx = np.random.default_rng(seed).integers(-n, n, ishape)
    e = torch.take_along_dim(torch.from_numpy(x.copy()), torch.from_numpy(idx), dim).numpy()
    r = S.take_along_dim(x, idx, dim)
    assert r.dtype == e.dtype and r.shape == e.shape
    np.testing.assert_array_equal(r, e)
    buf = np.full(e.shape, 7, e.dtype)
    assert S.take_along_dim(x, idx, dim, out=buf) is buf
    np.testing.assert_array_equal(buf, e)
    if idx.size:
        bad = idx.copy()
        bad.reshape(-1)[0] = n
        with pytest.raises(KernelError, match="out of range"):
            S.take_along_dim(x, bad, dim)


@SETTINGS
@given(SHAPES, st.sampled_from([np.float32, np.float64]), st.integers(0, 2**16), st.booleans(), st.booleans(),
       st.data())
def test_var_std_match_torch(shape, dtype, seed, specials, strided, data):
    x = _strided(_floats(seed, shape, dtype, specials), strided)
    dims = data.draw(st.one_of(st.none(), st.lists(st.integers(-x.ndim, x.ndim - 1), min_size=1, max_size=x.ndim,
                                                   unique_by=lambda d: d % x.ndim)))
    correction, keepdim = data.draw(st.sampled_from([0, 1, 2])), data.draw(st.booleans())
    t = torch.from_numpy(x.copy())
    for ours, theirs in ((R.var, torch.var), (R.std, torch.std)):
        e = theirs(t, dims, correction=correction, keepdim=keepdim).numpy()
        r = ours(x, dims, keepdim=keepdim, correction=correction)
        assert r.dtype == e.dtype and r.shape == e.shape
        np.testing.assert_allclose(r, e, rtol=1e-4 if dtype is np.float32 else 1e-10, atol=1e-5, equal_nan=True)


@SETTINGS
@given(SHAPES, st.sampled_from([np.float32, np.float64]), st.integers(0, 2**16), st.booleans(), st.booleans(),
       st.data())
def test_logsumexp_matches_torch(shape, dtype, seed, specials, strided, data):
    x = _strided(_floats(seed, shape, dtype, specials), strided)
    if data.draw(st.booleans()) and x.size:
        x[..., 0] = -np.inf   # a slice of -inf only where the last dim is 1
    dims = data.draw(st.lists(st.integers(-x.ndim, x.ndim - 1), min_size=1, max_size=x.ndim,
                              unique_by=lambda d: d % x.ndim))
    keepdim = data.draw(st.booleans())
    e = torch.logsumexp(torch.from_numpy(x.copy()), dims, keepdim=keepdim).numpy()
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")   # no RuntimeWarning on infinities or NaN (torch warns of none)
        r = R.logsumexp(x, dims, keepdim)
    assert r.dtype == e.dtype and r.shape == e.shape
    np.testing.assert_allclose(r, e, rtol=1e-5 if dtype is np.float32 else 1e-12, atol=1e-6, equal_nan=True)


def test_logsumexp_of_a_0d_tensor():
    x = np.array(2.5, np.float32)
    r = R.logsumexp(x, [0], False)
    assert r.shape == () and r.dtype == np.float32 and r == np.float32(2.5)


@SETTINGS
@given(SHAPES, st.data(), st.booleans(), st.booleans())
def test_unfold_matches_torch(shape, data, strided, reversed_):
    x = _strided(np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape), strided)
    if reversed_:
        x = x[..., ::-1]
    dim = data.draw(st.integers(-x.ndim, x.ndim - 1))
    size, step = data.draw(st.integers(0, x.shape[dim])), data.draw(st.integers(1, 3))
    e = torch.from_numpy(x.copy()).unfold(dim, size, step).numpy()
    r = SH.unfold(x, dim, size, step)
    assert r.shape == e.shape
    np.testing.assert_array_equal(r, e)
    if r.size and x.flags.writeable:   # a view, as torch's: writing through it reaches x
        r[(0,) * r.ndim] = -1
        assert (x == -1).any()


@SETTINGS
@given(st.lists(st.integers(1, 4), max_size=3).map(tuple), st.data(), st.booleans(),
       st.sampled_from([np.float32, np.int64, np.bool_, np.complex64]))
def test_expand_matches_torch(shape, data, strided, dtype):
    x = _strided(np.array(np.arange(int(np.prod(shape))).reshape(shape), dtype), strided)
    ones = data.draw(st.lists(st.booleans(), min_size=x.ndim, max_size=x.ndim))
    if x.ndim:   # size-1 dims to broadcast
        x = x[tuple(slice(0, 1) if o else slice(None) for o in ones)]
    lead = data.draw(st.lists(st.integers(0, 3), max_size=2))
    size = list(lead) + [data.draw(st.sampled_from([-1, 3])) if n == 1 else data.draw(st.sampled_from([-1, n]))
                         for n in x.shape]
    e = torch.from_numpy(x.copy()).expand(size).numpy()
    r = SH.expand(x, size)
    assert r.dtype == e.dtype and r.shape == e.shape and not r.flags.writeable
    np.testing.assert_array_equal(r, e)
    assert r.size == 0 or np.shares_memory(r, x)
    r2 = SH.expand_as(x, e)
    assert r2.shape == e.shape and not r2.flags.writeable
    np.testing.assert_array_equal(r2, e)


def test_expand_refuses_a_size_that_does_not_broadcast():
    with pytest.raises((KernelError, ValueError)):
        SH.expand(np.zeros((2, 3), np.float32), [2, 4])
    with pytest.raises(KernelError, match="number of sizes"):
        SH.expand(np.zeros((2, 3), np.float32), [3])


@SETTINGS
@given(st.integers(0, 2), st.integers(0, 6), st.integers(0, 6), st.integers(0, 5), st.integers(0, 2**16),
       st.booleans(), st.sampled_from([1.0, 2.0, 0.0, 3.0, float("inf")]), st.sampled_from([np.float32, np.float64]))
def test_cdist_matches_torch(batch, p_rows, r_rows, m, seed, specials, p, dtype):
    lead = (batch,) if batch else ()
    a = _floats(seed, lead + (p_rows, m), dtype, specials)
    b = _floats(seed + 1, lead + (r_rows, m), dtype, False)
    if a.ndim < 2 or b.ndim < 2:
        return
    e = torch.cdist(torch.from_numpy(a.copy()), torch.from_numpy(b.copy()), p=p,
                    compute_mode="donot_use_mm_for_euclid_dist").numpy()
    from srcore_cpu.kernels import linalg as L
    r = L.cdist(a, b, p)
    assert r.dtype == e.dtype and r.shape == e.shape
    np.testing.assert_allclose(r, e, rtol=1e-5 if dtype is np.float32 else 1e-12, atol=1e-5, equal_nan=True)


@SETTINGS
@given(st.lists(st.integers(1, 4), min_size=2, max_size=4).map(tuple), st.data(), st.integers(0, 2**16),
       st.booleans())
def test_gather_of_whole_rows_matches_torch(shape, data, seed, strided_self):
    """An index broadcast (stride 0) along every dim after ``dim``: the row path; one trailing dim
    narrower than ``self`` there, or not broadcast: the element path. Both torch's values."""
    from srcore_cpu.kernels import index as IX
    x = _strided(_floats(seed, shape, np.float32, True), strided_self)
    d = data.draw(st.integers(0, x.ndim - 2))
    k = data.draw(st.integers(0, 5))
    lead = tuple(data.draw(st.integers(1, n)) for n in x.shape[:d])
    core = np.random.default_rng(seed).integers(0, x.shape[d], lead + (k,))
    trailing = list(x.shape[d + 1:])
    if data.draw(st.booleans()):   # a near miss: narrower than self along the last dim
        trailing[-1] = data.draw(st.integers(1, trailing[-1]))
    idx = np.broadcast_to(core.reshape(core.shape + (1,) * len(trailing)), core.shape + tuple(trailing))
    e = torch.gather(torch.from_numpy(x.copy()), d, torch.from_numpy(idx.copy())).numpy()
    r = IX.gather(x, d, idx)
    assert r.dtype == e.dtype and r.shape == e.shape
    np.testing.assert_array_equal(r, e)
    if core.size:
        bad = core.copy()
        bad.reshape(-1)[0] = x.shape[d]
        bad_idx = np.broadcast_to(bad.reshape(bad.shape + (1,) * len(trailing)), bad.shape + tuple(trailing))
        with pytest.raises(KernelError, match="out of bounds"):
            IX.gather(x, d, bad_idx)


@SETTINGS
@given(SHAPES, st.sampled_from([np.float32, np.float64]), st.integers(0, 2**16), st.booleans(),
       st.sampled_from([(None, None, None), (0.5, 9.0, -9.0), (float("inf"), None, 1.0), (None, 1e300, -1e300)]))
def test_nan_to_num_matches_torch(shape, dtype, seed, strided, fills):
    from srcore_cpu.kernels import unary as U
    x = _strided(_floats(seed, shape, dtype, True), strided)
    nan, posinf, neginf = fills
    e = torch.nan_to_num(torch.from_numpy(x.copy()), nan, posinf, neginf).numpy()
    with np.errstate(over="ignore"):
        r = U.nan_to_num(x, nan, posinf, neginf)
        assert r.dtype == e.dtype and r.shape == e.shape
        np.testing.assert_array_equal(r, e)
        buf = np.full(e.shape, 3, e.dtype)
        assert U.nan_to_num(x, nan, posinf, neginf, out=buf) is buf
    np.testing.assert_array_equal(buf, e)


@SETTINGS
@given(SHAPES, st.integers(0, 2**16), st.sampled_from([(1.5, -2.0), (3, 7), (True, 2.5), (0, -1)]),
       st.sampled_from([np.float32, np.int32, np.int64]))
def test_where_with_number_operands_matches_torch(shape, seed, operands, dtype):
    x = _ints(seed, shape, dtype) if dtype is not np.float32 else _floats(seed, shape, dtype, True)
    cond = x > 0
    a, b = operands
    e = torch.where(torch.from_numpy(cond), a, b).numpy()
    r = TE.where(cond, a, b)
    assert r.dtype == e.dtype and r.shape == e.shape
    np.testing.assert_array_equal(r, e)
    e2 = torch.where(torch.from_numpy(cond), torch.from_numpy(x.copy()), b).numpy()
    r2 = TE.where(cond, x, b)
    assert r2.dtype == e2.dtype
    np.testing.assert_array_equal(r2, e2)
