"""The small-input conv path (conv_small.py), the tiling max pool and the Winograd weight
transform, against torch / the einsum they replace."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from srcore.errors import KernelError  # noqa: E402
from cpu_kernel_util import make_rand, node, thread_mismatches  # noqa: E402
from srcore_cpu.kernels import conv as K  # noqa: E402
from srcore_cpu.kernels import conv_small as S  # noqa: E402
from srcore_cpu.kernels import conv_winograd as WG  # noqa: E402
from srcore_cpu.kernels import pool as PL  # noqa: E402

#: kernels are called directly: the executor and the memory planner play no part
pytestmark = pytest.mark.one_pass

F = torch.nn.functional
rand = make_rand(np.random.default_rng(7))
CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}


def _tol(dtype):
    return 1e-4 if np.dtype(dtype) == np.float32 else 1e-11


def _ref(x, w, b, s, p, d, g):
    nd = w.ndim - 2
    return CONV[nd](torch.from_numpy(x), torch.from_numpy(w), None if b is None else torch.from_numpy(b),
                    s, p, d, g).numpy()


def _planned(w, b, s, p, d, g, shape, dtype):
    nd = w.ndim - 2
    st, dil = K._tup(s, nd), K._tup(d, nd)
    pads = K._pads(p, w.shape[2:], st, dil, nd)
    return S.SmallConv(w, b, st, pads, dil, g).plan(shape, np.dtype(dtype))


CASES = [
    # x shape, w shape, stride, padding, dilation, groups
    ((1, 1, 8, 8), (16, 1, 3, 3), 1, 1, 1, 1),          # the digits demo's convs
    ((1, 16, 4, 4), (32, 16, 3, 3), 1, 1, 1, 1),
    ((2, 3, 7, 5), (4, 3, 3, 3), 1, 1, 1, 1),           # batch, odd sizes
    ((1, 4, 9, 8), (6, 2, 3, 2), (2, 1), (1, 0), (1, 2), 2),   # grouped, asymmetric everything
    ((3, 6, 5, 6), (9, 2, 2, 3), 2, (0, 2), 1, 3),
    ((1, 3, 11, 11), (5, 3, 5, 5), 2, 2, 1, 1),
    ((1, 3, 10, 10), (5, 3, 1, 1), 2, 0, 1, 1),         # 1x1 strided
    ((1, 2, 6, 6), (3, 2, 3, 3), 1, 0, 2, 1),           # dilated, unpadded
    ((4, 9, 9), (2, 4, 3, 3), 1, 1, 1, 1),              # unbatched
    ((2, 3, 13), (4, 3, 5), 2, 2, 1, 1),                # conv1d
    ((1, 4, 11), (4, 2, 3), 1, 1, 3, 2),
    ((1, 2, 4, 5, 3), (3, 2, 3, 3, 3), 1, 1, 1, 1),     # conv3d
    ((1, 2, 5, 4, 6), (4, 1, 2, 2, 2), (1, 2, 1), 1, 1, 2),
]


@pytest.mark.parametrize("xs,wsh,s,p,d,g", CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("with_bias", [True, False])
def test_small_path_matches_torch(xs, wsh, s, p, d, g, dtype, with_bias):
    x, w = rand(*xs, dtype=dtype), rand(*wsh, dtype=dtype)
    b = rand(wsh[0], dtype=dtype) if with_bias else None
    exp = _ref(x, w, b, s, p, d, g)
    assert _planned(w, b, s, p, d, g, x.shape, dtype) is not None   # the path under test is taken
    conv = K.make_conv(w.ndim - 2, w, b, s, p, d, g)
    tol = _tol(dtype)
    for _ in range(2):   # the second call reuses the plan and its buffers
        r = conv(x)
        assert r.dtype == exp.dtype and r.shape == exp.shape
        np.testing.assert_allclose(r, exp, rtol=tol, atol=tol)
    buf = np.full(exp.shape, np.nan, dtype)
    assert conv(x, out=buf) is buf
    np.testing.assert_allclose(buf, exp, rtol=tol, atol=tol)
    # a non-contiguous out (every other element of a bigger buffer along the last dim)
    big = np.full(exp.shape[:-1] + (2 * exp.shape[-1],), np.nan, dtype)
    view = big[..., ::2]
    assert conv(x, out=view) is view
    np.testing.assert_allclose(view, exp, rtol=tol, atol=tol)
    assert np.isnan(big[..., 1::2]).all()
    # a non-contiguous input
    xt = np.ascontiguousarray(np.swapaxes(x, -1, -2)).swapaxes(-1, -2)
    np.testing.assert_allclose(conv(xt), exp, rtol=tol, atol=tol)


def test_mixed_dtypes_promote_like_the_general_path():
    x, w, b = rand(1, 3, 6, 6, dtype=np.float64), rand(4, 3, 3, 3), rand(4)
    exp = _ref(x, w.astype(np.float64), b.astype(np.float64), 1, 1, 1, 1)
    r = K.make_conv(2, w, b, 1, 1, 1, 1)(x)
    assert r.dtype == np.float64
    np.testing.assert_allclose(r, exp, rtol=1e-5, atol=1e-5)
    # float32 out for a float64 result: cast on the copy
    out = np.empty(exp.shape, np.float32)
    K.make_conv(2, w, b, 1, 1, 1, 1)(x, out=out)
    np.testing.assert_allclose(out, exp, rtol=1e-4, atol=1e-4)


def test_large_inputs_and_excluded_kinds_take_the_general_path():
    w = rand(16, 16, 3, 3)
    assert _planned(w, None, 1, 1, 1, 1, (1, 16, 64, 64), np.float32) is None      # over SMALL_COLS_MAX
    assert _planned(w, None, 1, 1, 1, 1, (1, 8, 6, 6), np.float32) is None         # channel mismatch
    assert not S.small_conv_applies(rand(8, 4, 1, 1), (1, 1), [(0, 0)] * 2, 1)     # 1x1: a plain GEMM
    assert not S.small_conv_applies(rand(8, 1, 3, 3), (1, 1), [(1, 1)] * 2, 8)     # depthwise
    with pytest.raises(KernelError, match="channels"):
        K.make_conv(2, w, None, 1, 1, 1, 1)(rand(1, 8, 6, 6))


def test_plans_per_shape_and_capped(monkeypatch):
    monkeypatch.setattr(S, "MAX_PLANS", 3)
    w, b = rand(4, 2, 3, 3), rand(4)
    conv = K.make_conv(2, w, b, 1, 1, 1, 1)
    for n in range(3, 9):   # more shapes than plans kept: still right after eviction
        x = rand(2, 2, n, n + 1)
        np.testing.assert_allclose(conv(x), _ref(x, w, b, 1, 1, 1, 1), rtol=1e-4, atol=1e-4)


def test_small_path_is_thread_safe():
    w, b = rand(8, 3, 3, 3), rand(8)
    conv = K.make_conv(2, w, b, 1, 1, 1, 1)
    xs = [rand(1, 3, 6, 6) for _ in range(4)]
    exps = [_ref(x, w, b, 1, 1, 1, 1) for x in xs]
    assert not thread_mismatches(lambda i: conv(xs[i]), exps)


def test_fused_conv2d_relu_uses_small_path():
    from srcore_cpu.kernels import fused
    x, w, b = rand(1, 1, 8, 8), rand(16, 1, 3, 3), rand(16)
    spec = fused.conv2d_relu_matcher(node("srcore::conv2d_relu", input="<var>", weight=w, bias=b, stride=[1, 1],
                                          padding=[1, 1], dilation=[1, 1], groups=1))
    exp = np.maximum(_ref(x, w, b, 1, 1, 1, 1), 0)
    np.testing.assert_allclose(spec.fn(x), exp, rtol=1e-5, atol=1e-5)
    out = np.empty_like(exp)
    assert spec.fn(x, out=out) is out
    np.testing.assert_allclose(out, exp, rtol=1e-5, atol=1e-5)


# --- tiling max pool (stride == kernel, no padding) through the matcher

def _pool_spec(nd, k, s, ceil_mode=False):
    return PL.max_pool_matcher(node(f"aten::max_pool{nd}d", self="<var>", kernel_size=k, stride=s,
                                    padding=[0] * nd, dilation=[1] * nd, ceil_mode=ceil_mode))


@pytest.mark.parametrize("shape,k,s,ceil_mode", [
    ((1, 16, 8, 8), [2, 2], [], False),
    ((2, 3, 7, 9), [2, 2], [2, 2], False),        # remainders are dropped in floor mode
    ((2, 3, 7, 9), [2, 3], [2, 3], True),         # ceil mode with a partial window: generic kernel
    ((2, 3, 8, 9), [2, 3], [2, 3], True),         # ceil mode, exact tiling
    ((3, 9, 10), [3, 1], [], False),              # unbatched, kernel 1 along one dim
    ((1, 2, 12, 12), [4, 4], [4, 4], False),
])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_tiling_max_pool_matches_torch(shape, k, s, ceil_mode, dtype):
    spec = _pool_spec(2, k, s, ceil_mode)
    x = rand(*shape, dtype=dtype)
    ref_x = torch.from_numpy(x.astype(np.float64))
    exp = F.max_pool2d(ref_x, k, s or None, 0, 1, ceil_mode).numpy().astype(dtype)
    for _ in range(2):
        r = spec.fn(x)
        assert r.dtype == exp.dtype
        np.testing.assert_array_equal(r, exp)
    buf = np.full(exp.shape[:-1] + (2 * exp.shape[-1],), -7, dtype)
    view = buf[..., ::2]
    assert spec.fn(x, out=view) is view
    np.testing.assert_array_equal(view, exp)


def test_tiling_max_pool_1d_nan_and_declines():
    spec = _pool_spec(1, [2], [])
    x = rand(2, 3, 9)
    x[0, 1, 4] = np.nan
    exp = F.max_pool1d(torch.from_numpy(x), 2).numpy()
    np.testing.assert_array_equal(spec.fn(x), exp)     # NaN propagates like torch
    assert np.isnan(spec.fn(x)[0, 1, 2])
    # overlapping or padded windows, or a variable kernel size: the plain kernel
    assert _pool_spec(2, [3, 3], [2, 2]) is PL.max_pool2d
    assert PL.max_pool_matcher(node("aten::max_pool2d", self="<var>", kernel_size="<var>", stride=[],
                                    padding=[0, 0], dilation=[1, 1], ceil_mode=False)) is PL.max_pool2d


# --- Winograd weight transform

def test_winograd_weight_transform_matches_einsum_bit_for_bit():
    G = WG._G
    for dtype in (np.float32, np.float64):
        w = rand(64, 48, 3, 3, dtype=dtype)
        ref = np.einsum("ik,ockl,jl->ijoc", G, w.astype(np.float64), G).reshape(16, 64, 48).astype(dtype)
        got = WG.transform_weight(w)
        assert got.dtype == dtype and got.flags.c_contiguous and got.shape == (16, 64, 48)
        np.testing.assert_array_equal(got, ref)
