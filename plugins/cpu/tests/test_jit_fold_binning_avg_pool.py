"""The compiled im2col / col2im (jit_fold.py), histc / searchsorted (jit_binning.py) and avg_pool3d
(jit_avg_pool.py) against torch's CPU kernels, bit for bit, over hypothesis-drawn geometries and
values (edges, NaN, infinities, ties); into the runtime's buffers and not; and the declarations that
put them first."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from hypothesis import HealthCheck, assume, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from srcore.ir.types import TensorType  # noqa: E402
from srcore.plugin import ArgInfo, KernelError, NodeInfo  # noqa: E402
from srcore_cpu.kernels import index as I  # noqa: E402
from srcore_cpu.kernels import pool as P  # noqa: E402
from srcore_cpu.kernels import rearrange as R  # noqa: E402
from srcore_cpu.kernels import selection as S  # noqa: E402

#: kernels are called directly: the executor and the memory planner play no part
pytestmark = pytest.mark.one_pass

T = torch.from_numpy
aten = torch.ops.aten
SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
DTYPES = st.sampled_from([np.float32, np.float64])


def _node(op, *tensors, **consts):
    """A matcher's view of a node: ``tensors`` typed (name, array), ``consts`` constant arguments."""
    args = tuple(ArgInfo(n, TensorType(a.dtype.name, a.shape), False, None) for n, a in tensors)
    return NodeInfo(op, None, args + tuple(ArgInfo(n, TensorType(), True, v) for n, v in consts.items()), ())


def _data(seed, shape, dtype):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _transposed(a):
    """``a`` with the same values, its last two dims' strides swapped (not C-contiguous)."""
    return np.ascontiguousarray(np.swapaxes(a, -1, -2)).swapaxes(-1, -2)


def _same(r, e):
    e = e.numpy() if isinstance(e, torch.Tensor) else e
    assert r.dtype == e.dtype and r.shape == e.shape
    np.testing.assert_array_equal(r, e)


def _into_buffers(fn, args, kw, e):
    """``fn`` writes the expected values into a C-contiguous buffer (the same array back) and into a
    strided one (copied into)."""
    e = e.numpy()
    buf = np.full(e.shape, 7, e.dtype)
    assert fn(*args, out=buf, **kw) is buf
    np.testing.assert_array_equal(buf, e)
    if e.ndim:
        strided = np.zeros(e.shape[:-1] + (2 * e.shape[-1],), e.dtype)[..., ::2]
        assert fn(*args, out=strided, **kw) is strided
        np.testing.assert_array_equal(strided, e)


# --- im2col / col2im ------------------------------------------------------------------------------

pairs = st.tuples(st.integers(1, 3), st.integers(1, 3))
FOLD = dict(n=st.integers(0, 2), c=st.integers(1, 3), hw=st.tuples(st.integers(1, 9), st.integers(1, 9)),
            k=st.tuples(st.integers(1, 4), st.integers(1, 4)), d=pairs,
            p=st.tuples(st.integers(0, 3), st.integers(0, 3)), s=pairs, dtype=DTYPES, batched=st.booleans(), seed=st.integers(0, 2**16), const=st.booleans())


def _blocks(hw, k, d, p, s):
    return tuple((hw[i] + 2 * p[i] - d[i] * (k[i] - 1) - 1) // s[i] + 1 for i in range(2))


@SETTINGS
@given(**FOLD)
def test_im2col_matches_torch(n, c, hw, k, d, p, s, dtype, batched, seed, const):
    """Every kernel / dilation / padding / stride that fits, batched or not, a transposed input too;
    geometry given as constants (remembered per shape) or not."""
    assume(min(_blocks(hw, k, d, p, s)) > 0 and (batched or n == 1))
    x = _data(seed, (n, c) + hw, dtype)
    x = x if batched else x[0]
    geo = dict(kernel_size=list(k), dilation=list(d), padding=list(p), stride=list(s)) if const else {}
    fn = R.im2col_matcher(_node("aten::im2col", ("self", x), **geo))
    assert fn is not None and fn.__name__ == "im2col_jit"
    e = aten.im2col(T(x), k, d, p, s)
    _same(fn(x, list(k), list(d), list(p), list(s)), e)
    _same(fn(x, list(k), list(d), list(p), list(s)), e)        # the remembered geometry
    _same(fn(_transposed(x), list(k), list(d), list(p), list(s)), e)
    _into_buffers(fn, (x, k, d, p, s), {}, e)


@SETTINGS
@given(**FOLD)
def test_col2im_matches_torch(n, c, hw, k, d, p, s, dtype, batched, seed, const):
    """Overlapping blocks summed in torch's order (bit for bit), blocks over the padding dropped; a
    transposed input (``F.fold`` of a ``transpose``) too."""
    oh, ow = _blocks(hw, k, d, p, s)
    assume(min(oh, ow) > 0 and (batched or n == 1))
    cols = _data(seed, (n, c * k[0] * k[1], oh * ow), dtype)
    cols = cols if batched else cols[0]
    geo = dict(output_size=list(hw), kernel_size=list(k), dilation=list(d), padding=list(p),
               stride=list(s)) if const else {}
    fn = R.col2im_matcher(_node("aten::col2im", ("self", cols), **geo))
    assert fn is not None and fn.__name__ == "col2im_jit"
    e = aten.col2im(T(cols), hw, k, d, p, s)
    _same(fn(cols, list(hw), list(k), list(d), list(p), list(s)), e)
    _same(fn(cols, list(hw), list(k), list(d), list(p), list(s)), e)
    _same(fn(_transposed(cols), list(hw), list(k), list(d), list(p), list(s)), e)
    _into_buffers(fn, (cols, hw, k, d, p, s), {}, e)


def test_fold_bad_geometry_raises_kernel_error():
    x = _data(0, (1, 2, 4, 4), np.float32)
    im2col = R.im2col_matcher(_node("aten::im2col", ("self", x)))
    with pytest.raises(KernelError, match="does not fit"):
        im2col(x, [5, 5], [1, 1], [0, 0], [1, 1])
    with pytest.raises(KernelError, match="3-D or 4-D"):
        im2col(x[0, 0], [1, 1], [1, 1], [0, 0], [1, 1])
    cols = _data(0, (1, 8, 9), np.float32)
    col2im = R.col2im_matcher(_node("aten::col2im", ("self", cols)))
    with pytest.raises(KernelError, match="divisible"):
        col2im(cols, [4, 4], [3, 3], [1, 1], [0, 0], [1, 1])
    with pytest.raises(KernelError, match="blocks"):
        col2im(cols, [5, 5], [2, 2], [1, 1], [0, 0], [1, 1])


# --- histc ----------------------------------------------------------------------------------------

@st.composite
def histc_cases(draw):
    dtype = draw(DTYPES)
    bins = draw(st.integers(1, 12))
    lo = draw(st.sampled_from([-2.0, -1.0, 0.0, -0.3, 1e-3]))
    hi = draw(st.sampled_from([lo, lo + 0.5, lo + 1.0, lo + 3.7, 2.0]))
    # values on the edges (the last bin's right edge included), near them, and outside
    edges = [lo + (hi - lo) * i / bins for i in range(bins + 1)]
    pool = edges + [np.nextafter(e, np.inf) for e in edges] + [np.nextafter(e, -np.inf) for e in edges]
    pool += [lo - 1, hi + 1, 0.0, -0.0, np.inf, -np.inf]
    vals = draw(st.lists(st.one_of(st.sampled_from(pool), st.floats(-3, 3, width=32)), max_size=40))
    if draw(st.booleans()):
        vals += [np.nan]
    shape = draw(st.sampled_from([(len(vals),), (1, len(vals))]))
    return np.array(vals, dtype).reshape(shape), bins, lo, hi


@SETTINGS
@given(histc_cases())
def test_histc_matches_torch(case):
    """Counts exactly torch's: values equal to max in the last bin, NaN and values outside ignored,
    edges compared in the input's dtype, ``min == max`` meaning the data's range; where torch
    refuses (a NaN or infinite data range), a KernelError."""
    x, bins, lo, hi = case
    fn = S.histc_matcher(_node("aten::histc", ("self", x), bins=bins, min=lo, max=hi))
    assert fn is not None and fn.__name__ == "histc_jit"
    try:
        e = torch.histc(T(x), bins, lo, hi)
    except RuntimeError as exc:
        with pytest.raises(KernelError, match="histc"):
            fn(x, bins, lo, hi)
        assert "finite" in str(exc) or "larger" in str(exc)
        return
    _same(fn(x, bins, lo, hi), e)
    _into_buffers(fn, (x, bins, lo, hi), {}, e)
    # the numpy kernel agrees away from the edges' float32 rounding (not asserted: it bins in float64)


def test_histc_strided_input_and_refusals():
    x = _transposed(_data(1, (5, 6), np.float32))
    fn = S.histc_matcher(_node("aten::histc", ("self", x)))
    _same(fn(x, 7, -1.5, 1.5), torch.histc(T(x), 7, -1.5, 1.5))
    _same(fn(x, 4), torch.histc(T(x), 4))
    with pytest.raises(KernelError, match="bins must be > 0"):
        fn(x, 0, -1.0, 1.0)
    with pytest.raises(KernelError, match="max must be larger than min"):
        fn(x, 3, 1.0, -1.0)
    with pytest.raises(KernelError, match="not finite"):
        fn(x, 3, 0.0, float("inf"))
    with pytest.raises(KernelError, match="not finite"):
        S.histc(x, 3, 0.0, float("inf"))          # the numpy kernel too (was numpy's ValueError)
    xi = np.arange(6)
    assert S.histc_matcher(_node("aten::histc", ("self", xi))) is None


# --- searchsorted ---------------------------------------------------------------------------------

SEARCH_DTYPES = ["float32", "float64", "int64", "int32", "int16", "int8", "uint8"]


@st.composite
def search_cases(draw):
    dtype = np.dtype(draw(st.sampled_from(SEARCH_DTYPES)))
    lead = draw(st.sampled_from([(), (3,), (2, 2)]))
    n = draw(st.integers(0, 7))
    m = draw(st.integers(0, 5))
    small = st.integers(0, 9) if dtype.kind == "u" else st.integers(-5, 5)
    if dtype.kind == "f":
        elem = st.one_of(small.map(float), st.sampled_from([np.nan, np.inf, -np.inf, 0.5]))
    else:
        elem = small
    size = int(np.prod(lead)) * n
    rows = np.sort(np.array(draw(st.lists(elem, min_size=size, max_size=size)), dtype).reshape(lead + (n,)), -1)
    vals_shape = lead + (m,) if lead else draw(st.sampled_from([(m,), (2, m), ()]))
    vals = np.array(draw(st.lists(elem, min_size=int(np.prod(vals_shape)), max_size=int(np.prod(vals_shape)))),
                    dtype).reshape(vals_shape)
    return rows, vals


@SETTINGS
@given(search_cases(), st.sampled_from(["left", "right", None]), st.booleans(), st.booleans())
def test_searchsorted_matches_torch(case, side, right, out_int32):
    """ATen's binary search, NaN and duplicates in the rows and the values included; 1-D rows for
    every value or one row per leading index; int32 or int64 indices."""
    rows, vals = case
    if side == "left" and right:
        right = False
    fn = I.searchsorted_matcher(_node("aten::searchsorted.Tensor", ("sorted_sequence", rows), ("self", vals),
                                      sorter=None, out_int32=out_int32))
    assert fn is not None and fn.__name__ == "searchsorted_jit"
    kw = dict(side=side, right=right, out_int32=out_int32)
    e = torch.searchsorted(T(rows), T(vals), **kw)
    _same(fn(rows, vals, **kw), e)
    _into_buffers(fn, (rows, vals), kw, e)


def test_searchsorted_declines_and_refuses():
    rows = np.array([[1.0, 2.0, 3.0]], np.float32)
    vals = np.array([[2.5]], np.float32)
    node = _node("aten::searchsorted.Tensor", ("sorted_sequence", rows), ("self", vals), sorter=None)
    fn = I.searchsorted_matcher(node)
    with pytest.raises(KernelError, match="opposites"):
        fn(rows, vals, side="left", right=True)
    with pytest.raises(KernelError, match="first N-1"):
        fn(np.zeros((2, 3), np.float32), vals)
    # a sorter (computed), mixed dtypes, the Scalar overload: the numpy kernel
    assert I.searchsorted_matcher(_node("aten::searchsorted.Tensor", ("sorted_sequence", rows), ("self", vals),
                                        sorter="<var>")) is None
    mixed = _node("aten::searchsorted.Tensor", ("sorted_sequence", rows), ("self", vals.astype(np.float64)),
                  sorter=None)
    assert I.searchsorted_matcher(mixed) is None
    assert I.searchsorted_matcher(_node("aten::searchsorted.Scalar", ("sorted_sequence", rows), sorter=None)) is None
    # a sorter given at the call anyway: the numpy kernel's answer, torch's
    perm = np.array([[2, 0, 1]])
    shuffled = np.take_along_axis(rows, np.argsort(perm, -1), -1)
    _same(fn(shuffled, vals, sorter=perm), torch.searchsorted(T(shuffled), T(vals), sorter=T(perm)))


# --- avg_pool3d -----------------------------------------------------------------------------------

@st.composite
def pool3d_cases(draw):
    k = draw(st.tuples(*[st.integers(1, 3)] * 3))
    s = draw(st.one_of(st.just(()), st.tuples(*[st.integers(1, 3)] * 3)))
    p = tuple(draw(st.integers(0, ki // 2)) for ki in k)
    size = draw(st.tuples(*[st.integers(1, 6)] * 3))
    lead = draw(st.sampled_from([(2,), (1, 3), (2, 2), (0, 2)]))
    return lead + size, k, s, p


@SETTINGS
@given(pool3d_cases(), st.booleans(), st.booleans(), st.sampled_from([None, 1, 3, 5]), DTYPES,
       st.integers(0, 2**16))
def test_avg_pool3d_matches_torch(case, ceil_mode, count_include_pad, divisor_override, dtype, seed):
    """Every kernel / stride / padding, ``ceil_mode`` (a last window reaching past the padding),
    ``count_include_pad`` and ``divisor_override``, 4-D and 5-D: torch's values bit for bit."""
    shape, k, s, p = case
    x = _data(seed, shape, dtype)
    x.reshape(-1)[::7] = -0.0
    try:
        e = aten.avg_pool3d(T(x), k, s, p, ceil_mode, count_include_pad, divisor_override)
    except RuntimeError:
        assume(False)       # output smaller than 1: the numpy kernel's refusal, tested in test_pool
    fn = P.avg_pool3d_matcher(_node("aten::avg_pool3d", ("self", x), kernel_size=list(k), stride=list(s),
                                    padding=list(p), ceil_mode=ceil_mode))
    assert fn is not None and fn.__name__ == "avg_pool3d_jit"
    args = (x, list(k), list(s), list(p), ceil_mode, count_include_pad, divisor_override)
    _same(fn(*args), e)
    _same(fn(*args), e)                     # the remembered windows
    _same(fn(_transposed(x), *args[1:]), e)
    _into_buffers(fn, args, {}, e)


def test_avg_pool3d_refusals():
    x = _data(0, (1, 2, 4, 4, 4), np.float32)
    fn = P.avg_pool3d_matcher(_node("aten::avg_pool3d", ("self", x)))
    with pytest.raises(KernelError, match="divisor"):
        fn(x, [2, 2, 2], [], [0, 0, 0], False, True, 0)
    with pytest.raises(KernelError, match="padding"):
        fn(x, [2, 2, 2], [], [2, 0, 0], False, True, None)
    assert P.avg_pool3d_matcher(_node("aten::avg_pool3d", ("self", x.astype(np.int64)))) is None


@st.composite
def pool2d_cases(draw):
    k = draw(st.tuples(*[st.integers(1, 4)] * 2))
    s = draw(st.one_of(st.just(()), st.tuples(*[st.integers(1, 3)] * 2)))
    p = tuple(draw(st.integers(0, ki // 2)) for ki in k)
    size = draw(st.tuples(*[st.integers(1, 9)] * 2))
    lead = draw(st.sampled_from([(2,), (1, 3), (2, 8), (0, 2)]))
    return lead + size, k, s, p


@SETTINGS
@given(pool2d_cases(), st.booleans(), st.booleans(), st.sampled_from([None, 1, 3, 5]), DTYPES,
       st.integers(0, 2**16))
def test_avg_pool2d_matches_torch(case, ceil_mode, count_include_pad, divisor_override, dtype, seed):
    """The 2-D pool through the 3-D compiled kernel (depth one): torch's values bit for bit, 3-D and
    4-D inputs, every padding mode, non-contiguous inputs and into the runtime's buffers."""
    shape, k, s, p = case
    x = _data(seed, shape, dtype)
    x.reshape(-1)[::7] = -0.0
    x.reshape(-1)[3::13] = np.nan
    x.reshape(-1)[5::17] = -np.inf
    try:
        e = aten.avg_pool2d(T(x), k, s, p, ceil_mode, count_include_pad, divisor_override)
    except RuntimeError:
        assume(False)       # output smaller than 1: the numpy kernel's refusal, tested in test_pool
    fn = P.avg_pool2d_matcher(_node("aten::avg_pool2d", ("self", x), kernel_size=list(k), stride=list(s),
                                    padding=list(p), ceil_mode=ceil_mode))
    assert fn is not None and fn.__name__ == "avg_pool2d_jit"
    args = (x, list(k), list(s), list(p), ceil_mode, count_include_pad, divisor_override)
    _same(fn(*args), e)
    _same(fn(*args), e)                     # the remembered windows
    _same(fn(_transposed(x), *args[1:]), e)
    _into_buffers(fn, args, {}, e)


def test_avg_pool2d_refusals():
    x = _data(0, (1, 2, 4, 4), np.float32)
    fn = P.avg_pool2d_matcher(_node("aten::avg_pool2d", ("self", x)))
    with pytest.raises(KernelError, match="divisor"):
        fn(x, [2, 2], [], [0, 0], False, True, 0)
    with pytest.raises(KernelError, match="padding"):
        fn(x, [2, 2], [], [2, 0], False, True, None)
    assert P.avg_pool2d_matcher(_node("aten::avg_pool2d", ("self", x.astype(np.int64)))) is None


# --- declarations ---------------------------------------------------------------------------------

@pytest.mark.parametrize("op,matcher", [("aten::im2col", "rearrange:im2col_matcher"),
                                        ("aten::col2im", "rearrange:col2im_matcher"),
                                        ("aten::histc", "selection:histc_matcher"),
                                        ("aten::searchsorted.Tensor", "index:searchsorted_matcher"),
                                        ("aten::avg_pool3d", "pool:avg_pool3d_matcher"),
                                        ("aten::avg_pool2d", "pool:avg_pool2d_matcher")])
def test_compiled_kernels_are_declared_first(op, matcher):
    """Each compiled kernel's declaration outranks the numpy one (priority 2) for the same dtypes."""
    from srcore_cpu.decl import index, pool, rearrange, selection

    ks = [k for m in (index, pool, rearrange, selection) for k in m.KERNELS if k.op == op]
    jit = [k for k in ks if k.matcher == "srcore_cpu.kernels." + matcher]
    plain = [k for k in ks if k.matcher is None]
    assert len(jit) == 1 and plain and jit[0].priority > max(k.priority for k in plain)
    assert set(plain[0].dtypes) <= set(jit[0].dtypes)


def test_per_shape_remembers_only_constant_geometry():
    """Constant geometry arguments: one computation per shape; a computed one (or one the node does
    not know): every call; an error is raised on every call, never remembered."""
    from srcore_cpu.kernels.per_shape import PerShape

    calls = []

    def fn(shape, k):
        calls.append(shape)
        if k < 0:
            raise KernelError("bad k")
        return shape[0] * k

    x = np.zeros((2, 3), np.float32)
    const = PerShape(_node("op", ("self", x), k=2), ("k",), fn)
    assert [const((2, 3), 2), const((2, 3), 2), const((4, 3), 2)] == [4, 4, 8] and len(calls) == 2
    computed = PerShape(_node("op", ("self", x), ("k", x)), ("k",), fn)
    assert [computed((2, 3), 2), computed((2, 3), 3)] == [4, 6] and len(calls) == 4
    unknown = PerShape(_node("op", ("self", x)), ("k",), fn)
    assert not unknown.fixed
    bad = PerShape(_node("op", ("self", x), k=-1), ("k",), fn)
    for _ in range(2):
        with pytest.raises(KernelError):
            bad((2, 3), -1)
    assert len(calls) == 6
