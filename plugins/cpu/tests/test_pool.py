"""pool kernels vs torch: max/avg pool 1-D/2-D, adaptive avg/max pool, the global-average matcher."""
from __future__ import annotations


import numpy as np
import pytest

torch = pytest.importorskip("torch")

import srcore  # noqa: E402
from srcore.plugin import Specialized  # noqa: E402
from cpu_kernel_util import node  # noqa: E402
from srcore_cpu.kernels import pool as K  # noqa: E402

#: kernels are called directly: the executor and the memory planner play no part
pytestmark = pytest.mark.one_pass

RNG = np.random.default_rng(0)
T = torch.from_numpy
aten = torch.ops.aten


def rand(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def both(fn, exp, *args, **kw):
    tol = 1e-5 if exp.dtype == np.float32 else 1e-12
    r = fn(*args, **kw)
    assert r.dtype == exp.dtype and r.shape == exp.shape
    np.testing.assert_allclose(r, exp, rtol=tol, atol=tol)
    buf = np.full(exp.shape, 123, exp.dtype)
    assert fn(*args, out=buf, **kw) is buf
    np.testing.assert_allclose(buf, exp, rtol=tol, atol=tol)


MAX2D = [  # kernel, stride, padding, dilation, ceil_mode
    ([3, 3], [2, 2], [1, 1], [1, 1], False),
    ([3, 3], [], [0, 0], [1, 1], False),
    ([2, 3], [2, 1], [1, 0], [2, 1], True),
    ([3, 3], [2, 2], [0, 0], [1, 1], True),
    ([2, 2], [3, 3], [1, 1], [1, 1], True),
]


@pytest.mark.parametrize("k,s,p,d,c", MAX2D)
@pytest.mark.parametrize("shape", [(2, 3, 9, 10), (3, 8, 7)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_max_pool2d(k, s, p, d, c, shape, dtype):
    x = rand(*shape, dtype=dtype)
    both(K.max_pool2d, aten.max_pool2d(T(x), k, s, p, d, c).numpy(), x, k, s, p, d, c)


@pytest.mark.parametrize("k,s,p,d,c", MAX2D)
@pytest.mark.parametrize("shape", [(2, 3, 9, 10), (3, 8, 7)])
def test_max_pool2d_with_indices(k, s, p, d, c, shape):
    x = rand(*shape)
    x[..., 2, :] = x[..., 1, :]          # ties: torch keeps the first
    ev, ei = aten.max_pool2d_with_indices(T(x), k, s, p, d, c)
    v, i = K.max_pool2d_with_indices(x, k, s, p, d, c)
    np.testing.assert_array_equal(v, ev.numpy())
    np.testing.assert_array_equal(i, ei.numpy())
    bufs = (np.empty_like(v), np.empty_like(i))
    assert K.max_pool2d_with_indices(x, k, s, p, d, c, out=bufs) is bufs
    np.testing.assert_array_equal(bufs[1], ei.numpy())


def test_max_pool_with_indices_nan_and_1d():
    x = rand(1, 2, 6, 6)
    x[0, 0, 1, 1] = x[0, 1, 3, 4] = np.nan
    ev, ei = aten.max_pool2d_with_indices(T(x), [3, 3], [2, 2], [1, 1])
    v, i = K.max_pool2d_with_indices(x, [3, 3], [2, 2], [1, 1])
    np.testing.assert_array_equal(i, ei.numpy())
    np.testing.assert_array_equal(np.isnan(v), np.isnan(ev.numpy()))
    x1 = rand(2, 3, 11)
    ev, ei = aten.max_pool1d_with_indices(T(x1), [3], [2], [1], [2], True)
    v, i = K.max_pool1d_with_indices(x1, [3], [2], [1], [2], True)
    np.testing.assert_array_equal(v, ev.numpy())
    np.testing.assert_array_equal(i, ei.numpy())


def test_max_pool_nan_propagates():
    x = rand(1, 1, 4, 4)
    x[0, 0, 1, 1] = np.nan
    exp = aten.max_pool2d(T(x), [2, 2], [2, 2]).numpy()
    r = K.max_pool2d(x, [2, 2], [2, 2])
    np.testing.assert_array_equal(np.isnan(r), np.isnan(exp))


@pytest.mark.parametrize("k,s,p,d,c", [([3], [2], [1], [1], False), ([4], [], [2], [2], True),
                                       ([2], [3], [0], [1], True)])
def test_max_pool1d(k, s, p, d, c):
    x = rand(2, 3, 15)
    both(K.max_pool1d, aten.max_pool1d(T(x), k, s, p, d, c).numpy(), x, k, s, p, d, c)


AVG2D = [  # kernel, stride, padding, ceil_mode, count_include_pad, divisor_override
    ([3, 3], [2, 2], [1, 1], False, True, None),
    ([3, 3], [2, 2], [1, 1], False, False, None),
    ([3, 2], [], [1, 0], True, True, None),
    ([3, 3], [2, 2], [1, 1], True, False, None),
    ([2, 2], [2, 2], [0, 0], True, True, 3),
    ([2, 2], [3, 3], [1, 1], True, True, None),
]


@pytest.mark.parametrize("k,s,p,c,inc,div", AVG2D)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_avg_pool2d(k, s, p, c, inc, div, dtype):
    x = rand(2, 3, 9, 8, dtype=dtype)
    both(K.avg_pool2d, aten.avg_pool2d(T(x), k, s, p, c, inc, div).numpy(), x, k, s, p, c, inc, div)


@pytest.mark.parametrize("k,s,p,c,inc", [([3], [2], [1], False, True), ([3], [2], [1], True, False),
                                         ([4], [], [0], True, True)])
def test_avg_pool1d(k, s, p, c, inc):
    x = rand(2, 3, 11)
    both(K.avg_pool1d, aten.avg_pool1d(T(x), k, s, p, c, inc).numpy(), x, k, s, p, c, inc)


@pytest.mark.parametrize("shape,osz", [((2, 3, 7, 9), [3, 4]), ((2, 3, 8, 8), [4, 4]), ((3, 10, 5), [1, 1]),
                                       ((1, 2, 5, 5), [7, 3]), ((1, 2, 6, 6), [1, 2])])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_adaptive_avg_pool2d(shape, osz, dtype):
    x = rand(*shape, dtype=dtype)
    both(K.adaptive_avg_pool2d, aten.adaptive_avg_pool2d(T(x), osz).numpy(), x, osz)


@pytest.mark.parametrize("osz", [[1], [4], [7], [20]])
def test_adaptive_avg_pool1d(osz):
    x = rand(2, 3, 13)
    both(K.adaptive_avg_pool1d, aten.adaptive_avg_pool1d(T(x), osz).numpy(), x, osz)


def test_global_avg_matcher():
    spec = K.adaptive_avg_pool_matcher(node("aten::adaptive_avg_pool2d", self="<var>", output_size=[1, 1]))
    assert isinstance(spec, Specialized) and spec.args == (0,)
    x = rand(2, 5, 7, 7)
    both(spec.fn, aten.adaptive_avg_pool2d(T(x), [1, 1]).numpy(), x)
    spec1 = K.adaptive_avg_pool_matcher(node("aten::adaptive_avg_pool1d", self="<var>", output_size=[1]))
    x1 = rand(2, 5, 9)
    both(spec1.fn, aten.adaptive_avg_pool1d(T(x1), [1]).numpy(), x1)
    assert K.adaptive_avg_pool_matcher(node("aten::adaptive_avg_pool2d", self="<var>", output_size=[2, 1])) \
        is K.adaptive_avg_pool2d
    assert K.adaptive_avg_pool_matcher(node("aten::adaptive_avg_pool1d", self="<var>", output_size="<var>")) \
        is K.adaptive_avg_pool1d


@pytest.mark.parametrize("shape,osz", [((2, 3, 7, 9), [3, 4]), ((3, 8, 8), [1, 1]), ((1, 2, 5, 5), [7, 3])])
def test_adaptive_max_pool2d(shape, osz):
    x = rand(*shape)
    ev, ei = aten.adaptive_max_pool2d(T(x), osz)
    v, i = K.adaptive_max_pool2d(x, osz)
    np.testing.assert_array_equal(v, ev.numpy())
    np.testing.assert_array_equal(i, ei.numpy())
    assert i.dtype == np.int64
    bufs = (np.empty_like(v), np.empty_like(i))
    assert K.adaptive_max_pool2d(x, osz, out=bufs) is bufs
    np.testing.assert_array_equal(bufs[1], ei.numpy())


def test_bad_padding_is_kernel_error():
    with pytest.raises(srcore.KernelError, match="half of kernel"):
        K.max_pool2d(rand(1, 1, 5, 5), [2, 2], [1, 1], [2, 2])


def test_decl():
    from srcore_cpu.decl import pool as D
    ops = {k.op for k in D.KERNELS}
    assert {"aten::max_pool2d", "aten::avg_pool2d", "aten::adaptive_avg_pool2d", "aten::adaptive_max_pool2d"} <= ops
    for k in D.KERNELS:
        for ref in (k.impl, k.matcher):
            if ref:
                mod, _, attr = ref.partition(":")
                assert callable(getattr(__import__(mod, fromlist=[attr]), attr))


def test_integer_max_pool_pads_with_the_smallest_integer():
    x = np.random.default_rng(3).integers(-5, 5, (1, 2, 5, 5)).astype(np.int64)
    ref = torch.ops.aten.max_pool2d_with_indices(torch.from_numpy(x), [3, 3], [2, 2], [1, 1])
    vals, idx = K.max_pool2d_with_indices(x, [3, 3], [2, 2], [1, 1], [1, 1], False)
    np.testing.assert_array_equal(vals, ref[0].numpy())
    np.testing.assert_array_equal(idx, ref[1].numpy())
    np.testing.assert_array_equal(K.max_pool2d(x, [3, 3], [2, 2], [1, 1]),
                                  torch.nn.functional.max_pool2d(torch.from_numpy(x), 3, 2, 1).numpy())


@pytest.mark.parametrize("ceil_mode", [False, True])
def test_pool3d_matches_torch(ceil_mode):
    """max_pool3d (with indices, as export emits it), avg_pool3d and adaptive_avg_pool3d (video
    models; no kernel before)."""
    from srcore.testing import check_kernel
    from srcore_cpu.kernels import pool as P

    F = torch.nn.functional
    x = np.random.default_rng(9).standard_normal((2, 3, 5, 6, 7)).astype(np.float32)
    check_kernel(P.max_pool3d, lambda t, *_: F.max_pool3d(t, 2, 2, 1, 1, ceil_mode), x, 2, 2, 1, 1, ceil_mode)
    check_kernel(P.max_pool3d, lambda t, *_: F.max_pool3d(t, (3, 2, 2), (1, 2, 3), 0, (1, 2, 1), ceil_mode), x,
                 (3, 2, 2), (1, 2, 3), 0, (1, 2, 1), ceil_mode)
    check_kernel(P.max_pool3d_with_indices,
                 lambda t, *_: torch.ops.aten.max_pool3d_with_indices(t, [2, 3, 2], [2, 2, 2], [1, 1, 0], [1, 1, 1],
                                                                     ceil_mode), x, [2, 3, 2], [2, 2, 2], [1, 1, 0],
                 [1, 1, 1], ceil_mode)
    check_kernel(P.avg_pool3d, lambda t, *_: F.avg_pool3d(t, 3, 2, 1, ceil_mode, False), x, 3, 2, 1, ceil_mode, False)
    check_kernel(P.avg_pool3d, lambda t, *_: F.avg_pool3d(t, 2, 1, 0, ceil_mode, True, 3), x, 2, 1, 0, ceil_mode, True, 3)
    for size in ((1, 1, 1), (2, 4, 3), (5, 6, 7)):
        check_kernel(P.adaptive_avg_pool3d, lambda t, *_: F.adaptive_avg_pool3d(t, size), x, size)


@pytest.mark.parametrize("size", [1, 3, 5, 8])
def test_adaptive_max_pool1d_matches_torch(size):
    from srcore.testing import check_kernel
    from srcore_cpu.kernels import pool as P

    x = np.random.default_rng(10).standard_normal((2, 3, 8)).astype(np.float32)
    x[0, 1, 2] = np.nan     # NaN wins its window, as in torch
    got = check_kernel(P.adaptive_max_pool1d, lambda t, *_: torch.nn.functional.adaptive_max_pool1d(t, size, True),
                       x, [size])
    assert got[1].dtype == np.int64


@pytest.mark.parametrize("split_wins", [True, False])
def test_max_pool_split_over_two_threads_where_it_times_faster(monkeypatch, split_wins):
    """At 2 intra-op threads a large float32 max pool of static shape is timed split by channel on
    the part pool against one thread; the winner runs, torch's result either way (another shape:
    the plain kernel)."""
    from srcore.ir.types import TensorType
    from srcore.plugin import ArgInfo, NodeInfo
    from srcore_cpu.kernels import row_split as RS

    monkeypatch.delenv("SRCORE_CPU_THREADS", raising=False)
    monkeypatch.setattr(K._par, "intra_op_threads", lambda: 2)
    monkeypatch.setattr(K, "MAX_POOL_PARALLEL_MIN", 1000)
    monkeypatch.setattr(RS, "split_pays", lambda one, split, args, timer=None: split_wins)
    parts = []
    real = K._par.run_parts
    monkeypatch.setattr(K._par, "run_parts", lambda fn, n, t: parts.append(n) or real(fn, n, t))
    shape = (1, 6, 15, 14)
    hp = {"kernel_size": [3, 3], "stride": [2, 2], "padding": [1, 1], "dilation": [1, 1], "ceil_mode": False}
    args = (ArgInfo("self", TensorType("float32", shape), False, None),) + tuple(
        ArgInfo(n, TensorType(), True, v) for n, v in hp.items())
    spec = K.max_pool_matcher(NodeInfo("aten::max_pool2d", None, args, ()))
    assert isinstance(spec, Specialized) == split_wins
    fn = spec.fn if split_wins else (lambda x, out=None: spec(x, *hp.values(), out=out))
    x = rand(*shape)
    parts.clear()
    both(fn, aten.max_pool2d(T(x), *hp.values()).numpy(), x)
    assert parts == ([2, 2] if split_wins else [])
    x2 = rand(1, 6, 9, 9)
    both(fn, aten.max_pool2d(T(x2), *hp.values()).numpy(), x2)


def _typed(op: str, x: np.ndarray, **consts) -> "NodeInfo":
    from srcore.ir.types import TensorType
    from srcore.plugin import ArgInfo, NodeInfo

    args = (ArgInfo("self", TensorType(x.dtype.name, x.shape), False, None),)
    return NodeInfo(op, None, args + tuple(ArgInfo(n, TensorType(), True, v) for n, v in consts.items()), ())


def _specials(x: np.ndarray) -> np.ndarray:
    """NaN (two in some windows: torch keeps the last), -inf, +inf and ties sprinkled over ``x``."""
    flat = x.reshape(-1)
    n = flat.size
    flat[RNG.choice(n, max(1, n // 13), replace=False)] = np.nan
    flat[RNG.choice(n, max(1, n // 17), replace=False)] = -np.inf
    flat[RNG.choice(n, max(1, n // 29), replace=False)] = np.inf
    flat[RNG.choice(n, max(1, n // 7), replace=False)] = 0.5
    return x


@pytest.mark.parametrize("k,s,p,d,c", MAX2D)
@pytest.mark.parametrize("shape", [(2, 3, 9, 10), (3, 8, 7), (1, 1, 1, 1)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("special", [False, True])
def test_compiled_max_pool2d_with_indices_matches_torch(k, s, p, d, c, shape, dtype, special):
    """The compiled kernel (jit_pool_indices.py): values and indices exactly torch's, NaN (the last of
    several in a window), infinities and ties included; into the runtime's buffers and not."""
    if shape == (1, 1, 1, 1) and (p[0] > 0 or k[0] > 1 or d[0] > 1):
        pytest.skip("no window fits a 1x1 plane with this geometry")
    x = rand(*shape, dtype=dtype)
    if special:
        x = _specials(x)
    fn = K.max_pool2d_with_indices_matcher(_typed("aten::max_pool2d_with_indices", x, kernel_size=k, stride=s,
                                                  padding=p, dilation=d, ceil_mode=c))
    assert fn is not None and fn.__name__ == "max_pool2d_with_indices_jit"
    ev, ei = aten.max_pool2d_with_indices(T(x), k, s, p, d, c)
    v, i = fn(x, k, s, p, d, c)
    np.testing.assert_array_equal(v, ev.numpy())
    np.testing.assert_array_equal(i, ei.numpy())
    bufs = (np.full_like(v, 7), np.full_like(i, 7))
    assert fn(x, k, s, p, d, c, out=bufs) is bufs
    np.testing.assert_array_equal(bufs[0], ev.numpy())
    np.testing.assert_array_equal(bufs[1], ei.numpy())
    strided = (np.zeros(v.shape[:-1] + (2 * v.shape[-1],), v.dtype)[..., ::2], np.zeros_like(i))
    assert fn(x[..., ::1], k, s, p, d, c, out=strided) is strided       # a non-contiguous out is copied into
    np.testing.assert_array_equal(strided[0], ev.numpy())


@pytest.mark.parametrize("shape,osz", [((2, 3, 7, 9), [3, 4]), ((3, 8, 8), [1, 1]), ((1, 2, 5, 5), [7, 3]),
                                       ((2, 4, 13, 6), [5, 6])])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("special", [False, True])
def test_compiled_adaptive_max_pool2d_matches_torch(shape, osz, dtype, special):
    x = rand(*shape, dtype=dtype)
    if special:
        x = _specials(x)
    fn = K.adaptive_max_pool2d_matcher(_typed("aten::adaptive_max_pool2d", x, output_size=osz))
    assert fn is not None and fn.__name__ == "adaptive_max_pool2d_jit"
    ev, ei = aten.adaptive_max_pool2d(T(x), osz)
    v, i = fn(x, osz)
    np.testing.assert_array_equal(v, ev.numpy())
    np.testing.assert_array_equal(i, ei.numpy())
    bufs = (np.empty_like(v), np.empty_like(i))
    assert fn(x, osz, out=bufs) is bufs
    np.testing.assert_array_equal(bufs[1], ei.numpy())
    # a transposed (non-contiguous) input, as a view of a permute
    xt = np.ascontiguousarray(np.swapaxes(x, -1, -2)).swapaxes(-1, -2)
    np.testing.assert_array_equal(fn(xt, osz)[1], ei.numpy())


def test_compiled_max_pools_decline_what_they_do_not_take():
    """Integer inputs and unknown ranks keep the numpy kernels (the matchers say None)."""
    xi = np.arange(2 * 3 * 6 * 6, dtype=np.int64).reshape(2, 3, 6, 6)
    assert K.max_pool2d_with_indices_matcher(_typed("aten::max_pool2d_with_indices", xi, kernel_size=[2, 2])) is None
    assert K.adaptive_max_pool2d_matcher(_typed("aten::adaptive_max_pool2d", xi, output_size=[2, 2])) is None
    x5 = rand(1, 2, 3, 4, 5)
    assert K.adaptive_max_pool2d_matcher(_typed("aten::adaptive_max_pool2d", x5, output_size=[2, 2])) is None
