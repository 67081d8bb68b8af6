"""The NCHW16c layout (``srcore.plugin.nchwc``) and the kernels that read and write it: the 1x1 conv
(``srcore.plugin.simd_pointwise_blocked``; on 8-lane vectors ``simd_pointwise_halves``, and
``simd_halves`` for the depthwise and dense-from-NCHW kernels, ``simd_dense_nchwc_halves``), the channel-blocked depthwise conv with either side
blocked (``simd_depthwise_blocked``), the dense conv from NCHW (``simd_dense_blocked``) and the dense
conv with either side blocked (``simd_dense_nchwc``), against
torch: channel counts below, at and past a block of 16, plane sizes that leave every pixel tail (12, 4,
1; the 8-lane 1x1's 6, 4, 1), a residual in the output's layout, the fused epilogue, the same bits as the NCHW kernels, and
bad shapes named."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import example, given, settings
from hypothesis import strategies as st

from srcore import SrcoreError
from srcore.plugin import (nchwc, simd_dense_blocked, simd_dense_nchwc, simd_depthwise_blocked, simd_pointwise,
                           simd_dense_nchwc_halves, simd_halves, simd_pointwise_blocked, simd_pointwise_halves)

from _depthwise_cases import ACTS, act_args, depthwise_cases, reference

pytestmark = pytest.mark.one_pass

#: the NCHW16c 1x1 convs: 16-lane vectors, and 8-lane ones two a block (the same arguments and bits)
POINTWISE = {"blocked": lambda: simd_pointwise_blocked.BlockedPointwiseConv,
             "halves": lambda: simd_pointwise_halves.HalvesPointwiseConv}
#: the channel-blocked depthwise convs (the 8-lane one with both sides NCHW16c only)
DEPTHWISE = {"blocked": lambda: simd_depthwise_blocked.BlockedDepthwiseConv,
             "halves": lambda: simd_halves.HalvesDepthwiseConv}
#: the dense convs from NCHW into NCHW16c
DENSE = {"blocked": lambda: simd_dense_blocked.BlockedDenseConv, "halves": lambda: simd_halves.HalvesDenseConv}
#: the dense convs with either side NCHW16c: 16-lane tiles, 8-lane ones (the same arguments and bits)
DENSE_NCHWC = {"blocked": lambda: simd_dense_nchwc.NchwcDenseConv,
               "halves": lambda: simd_dense_nchwc_halves.HalvesNchwcDenseConv}


def test_layout_round_trip_pads_with_zeros():
    x = np.arange(2 * 20 * 3 * 5, dtype=np.float32).reshape(2, 20, 3, 5)
    b = nchwc.to_blocked(x, 16)
    assert b.shape == nchwc.blocked_shape(x.shape, 16) == (2, 2, 3, 5, 16)
    assert b[1, 1, 2, 4, 3] == x[1, 19, 2, 4] and b[0, 0, 1, 2, 7] == x[0, 7, 1, 2]
    assert not b[:, 1, :, :, 4:].any()
    np.testing.assert_array_equal(nchwc.from_blocked(b, 20), x)


def _pw_ref(x, w, b, res, lo, hi, act):
    y = F.conv2d(torch.from_numpy(x), torch.from_numpy(w[:, :, None, None]), torch.from_numpy(b))
    if res is not None:
        y = y + torch.from_numpy(res)
    y = torch.clamp(y, lo, hi)
    return (getattr(F, act)(y) if act else y).numpy()


@pytest.mark.parametrize("kind", sorted(POINTWISE))
@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 2), C=st.integers(1, 40), O=st.integers(1, 40), H=st.integers(1, 9), W=st.integers(1, 9),
       blocked_in=st.booleans(), blocked_out=st.booleans(), residual=st.booleans(),
       act=st.sampled_from(["none", "relu", "relu6", "hardswish", "hardsigmoid"]), seed=st.integers(0, 2**16))
def test_pointwise_matches_torch_in_every_layout(kind, n, C, O, H, W, blocked_in, blocked_out, residual, act, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, C, H, W), np.float32)
    w = rng.standard_normal((O, C), np.float32)
    b = rng.standard_normal(O).astype(np.float32)
    res = rng.standard_normal((n, O, H, W), np.float32) if residual else None
    lo, hi, _, after = act_args(act)
    conv = POINTWISE[kind]()(w, b, lo, hi, after, blocked_in=blocked_in, blocked_out=blocked_out)
    out = np.full(conv.out_shape(x.shape), np.nan, np.float32)
    to = (lambda a: nchwc.to_blocked(a, 16)) if blocked_out else (lambda a: a)
    conv(nchwc.to_blocked(x, 16) if blocked_in else x, out, None if res is None else to(res))
    got = nchwc.from_blocked(out, O) if blocked_out else out
    np.testing.assert_allclose(got, _pw_ref(x, w, b, res, lo, hi, after), rtol=1e-5, atol=1e-4)
    if blocked_out:   # the padding channels hold the epilogue of 0: finite
        assert np.isfinite(out).all()


@pytest.mark.parametrize("kind", sorted(POINTWISE))
@pytest.mark.parametrize("C, O, hw", [(72, 24, 28), (96, 576, 7), (576, 96, 7), (16, 16, 4), (40, 33, 5)])
def test_pointwise_gives_the_nchw_kernels_bits_on_two_threads(kind, C, O, hw):
    """The sums run over the input channels in order from the bias, as srcore.conv.pointwise's."""
    rng = np.random.default_rng(C)
    x = rng.standard_normal((1, C, hw, hw), np.float32)
    w = rng.standard_normal((O, C), np.float32)
    b = rng.standard_normal(O).astype(np.float32)
    want = np.empty((1, O, hw, hw), np.float32)
    simd_pointwise.SimdPointwiseConv(w, b, lo=0.0)(x, want)
    conv = POINTWISE[kind]()(w, b, lo=0.0)
    out = np.empty(conv.out_shape(x.shape), np.float32)
    conv(nchwc.to_blocked(x, 16), out, threads=2)
    np.testing.assert_array_equal(nchwc.from_blocked(out, O), want)
    plain = POINTWISE[kind]()(w, b, lo=0.0, blocked_in=False, blocked_out=False)
    got = np.empty_like(want)
    plain(x, got)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("kind", sorted(DEPTHWISE))
@settings(max_examples=40, deadline=None)
@given(case=depthwise_cases(40, [1]), seed=st.integers(0, 2**16), act=st.sampled_from(sorted(ACTS)),
       residual=st.booleans(), blocked_in=st.booleans(), blocked_out=st.booleans())
def test_depthwise_matches_torch_in_every_layout(kind, case, seed, act, residual, blocked_in, blocked_out):
    n, C, _, k, s, d, p, (H, W) = case
    if kind == "halves":
        blocked_in = blocked_out = True
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, C, H, W), np.float32)
    w = rng.standard_normal((C, 1, *k), np.float32)
    b = rng.standard_normal(C).astype(np.float32)
    lo, hi, slope, after = act_args(act)
    conv = DEPTHWISE[kind]()(w, b, s, p, d, lo=lo, hi=hi, negative_slope=slope, activation=after,
                             blocked_in=blocked_in, blocked_out=blocked_out)
    shape = conv.out_shape(x.shape)
    res = rng.standard_normal(shape, np.float32) if residual else None
    to = (lambda a: nchwc.to_blocked(a, 16)) if blocked_out else (lambda a: a)
    out = np.full(to(np.zeros(shape, np.float32)).shape, np.nan, np.float32)
    conv(nchwc.to_blocked(x, 16) if blocked_in else x, out, None if res is None else to(res))
    got = nchwc.from_blocked(out, C) if blocked_out else out
    np.testing.assert_allclose(got, reference(x, w, b, s, p, d, res, lo, hi, slope, after), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("C, hw, k, s", [(16, 112, 3, 2), (72, 56, 3, 2), (88, 28, 3, 1), (40, 7, 5, 1)])
def test_depthwise_layouts_give_the_same_bits_on_two_threads(C, hw, k, s):
    rng = np.random.default_rng(C)
    x = rng.standard_normal((1, C, hw, hw), np.float32)
    w = rng.standard_normal((C, 1, k, k), np.float32)
    b = rng.standard_normal(C).astype(np.float32)
    plain = simd_depthwise_blocked.BlockedDepthwiseConv(w, b, s, k // 2, activation="hardswish")
    want = np.empty(plain.out_shape(x.shape), np.float32)
    plain(x, want)
    for kind in sorted(DEPTHWISE):
        conv = DEPTHWISE[kind]()(w, b, s, k // 2, activation="hardswish", blocked_in=True, blocked_out=True)
        out = np.empty(nchwc.blocked_shape(want.shape, 16), np.float32)
        for _ in range(2):   # the per-thread buffers are reused: a second call sees the first's
            conv(nchwc.to_blocked(x, 16), out, threads=2)
            np.testing.assert_array_equal(nchwc.from_blocked(out, C), want)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 2), C=st.integers(1, 5), O=st.integers(1, 40),
       k=st.tuples(*[st.sampled_from([1, 2, 3, 5])] * 2), s=st.tuples(*[st.integers(1, 3)] * 2),
       d=st.tuples(*[st.integers(1, 2)] * 2), p=st.tuples(*[st.integers(0, 2)] * 2),
       size=st.tuples(*[st.integers(1, 40)] * 2),
       act=st.sampled_from(["none", "relu", "relu6", "hardswish", "hardsigmoid"]), seed=st.integers(0, 2**16))
@example(n=2, C=3, O=16, k=(3, 3), s=(2, 2), d=(1, 1), p=(1, 1), size=(40, 40), act="relu", seed=0)
@pytest.mark.parametrize("kind", sorted(DENSE))
def test_dense_from_nchw_matches_torch(kind, n, C, O, k, s, d, p, size, act, seed):
    """Every pixel tail (12, 4, the row interior's last 4 overlapping the pixels before them, 1) and
    kernel rows and columns in the padding on either side (the example: a 20-pixel row, 1 + 12 + 4
    + the last 4 over 3 of them)."""
    H, W = (max(sz, dd * (kk - 1) + 1 - 2 * pp) for sz, kk, dd, pp in zip(size, k, d, p))
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, C, H, W), np.float32)
    w = rng.standard_normal((O, C, *k), np.float32)
    b = rng.standard_normal(O).astype(np.float32)
    lo, hi, _, after = act_args(act)
    conv = DENSE[kind]()(w, b, s, p, d, lo, hi, after)
    out = np.full(conv.out_shape(x.shape), np.nan, np.float32)
    conv(x, out, threads=2)
    if kind == "halves":   # the 16-lane kernel's bits
        want = np.full_like(out, np.nan)
        simd_dense_blocked.BlockedDenseConv(w, b, s, p, d, lo, hi, after)(x, want)
        np.testing.assert_array_equal(out, want)
    y = torch.clamp(F.conv2d(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b), s, p, d), lo, hi)
    want = (getattr(F, after)(y) if after else y).numpy()
    np.testing.assert_allclose(nchwc.from_blocked(out, O), want, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("kind", sorted(DENSE_NCHWC))
@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 2), C=st.integers(1, 40), O=st.integers(1, 80),
       k=st.tuples(*[st.sampled_from([1, 2, 3, 5])] * 2), s=st.tuples(*[st.integers(1, 3)] * 2),
       d=st.tuples(*[st.integers(1, 2)] * 2), p=st.tuples(*[st.integers(0, 2)] * 2),
       size=st.tuples(*[st.integers(1, 30)] * 2), blocked_in=st.booleans(), blocked_out=st.booleans(),
       residual=st.booleans(), act=st.sampled_from(["none", "relu", "relu6", "leaky", "hardswish", "hardsigmoid"]),
       seed=st.integers(0, 2**16))
def test_dense_nchwc_matches_torch_in_every_layout(kind, n, C, O, k, s, d, p, size, blocked_in, blocked_out, residual,
                                                   act, seed):
    """Block groups of 4, 2 and 1 (up to 80 out channels), every pixel tile (12/6, 4, 1), input
    channels not a multiple of 16, kernel rows and columns in the padding, either side blocked."""
    H, W = (max(sz, dd * (kk - 1) + 1 - 2 * pp) for sz, kk, dd, pp in zip(size, k, d, p))
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, C, H, W), np.float32)
    w = rng.standard_normal((O, C, *k), np.float32)
    b = rng.standard_normal(O).astype(np.float32)
    lo, hi, slope, after = act_args(act)
    conv = DENSE_NCHWC[kind]()(w, b, s, p, d, lo, hi, slope, after, blocked_in=blocked_in, blocked_out=blocked_out)
    out = np.full(conv.out_shape(x.shape), np.nan, np.float32)
    y = F.conv2d(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b), s, p, d)
    res = rng.standard_normal(tuple(y.shape), np.float32) if residual else None
    to = (lambda a: nchwc.to_blocked(a, 16)) if blocked_out else (lambda a: a)
    conv(nchwc.to_blocked(x, 16) if blocked_in else x, out, None if res is None else to(res), threads=2)
    if res is not None:
        y = y + torch.from_numpy(res)
    if slope is not None:
        y = F.leaky_relu(y, slope)
    y = torch.clamp(y, lo, hi)
    want = (getattr(F, after)(y) if after else y).numpy()
    got = nchwc.from_blocked(out, O) if blocked_out else out
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    if blocked_out:   # the padding channels hold the epilogue of 0 (+ the residual's padding: 0): finite
        assert np.isfinite(out).all()


@pytest.mark.parametrize("C, O, hw, s", [(16, 32, 60, 2), (32, 64, 30, 1), (64, 128, 16, 1), (40, 24, 9, 1)])
def test_dense_nchwc_layouts_and_threads_give_the_same_bits(C, O, hw, s):
    """The input's layout changes only where the taps are read (a blocked input in place, away from
    the side padding; an NCHW one from the window) and the output's only the stores: the same sums in
    the same order; two threads split the rows without changing them."""
    rng = np.random.default_rng(C)
    x = rng.standard_normal((2, C, hw, hw), np.float32)
    w = rng.standard_normal((O, C, 3, 3), np.float32)
    outs = []
    for kind, bi, bo in [(k, *b) for k in sorted(DENSE_NCHWC) for b in ((True, True), (False, True), (True, False),
                                                                         (False, False))]:
        conv = DENSE_NCHWC[kind]()(w, None, s, 1, blocked_in=bi, blocked_out=bo)
        out = np.empty(conv.out_shape(x.shape), np.float32)
        for threads in (1, 2):
            conv(nchwc.to_blocked(x, 16) if bi else x, out, threads=threads)
            outs.append(nchwc.from_blocked(out, O) if bo else out.copy())
    for got in outs[1:]:
        np.testing.assert_array_equal(got, outs[0])


def test_bad_shapes_are_named():
    w = np.ones((20, 8), np.float32)
    conv = simd_pointwise_blocked.BlockedPointwiseConv(w, None)
    x = nchwc.to_blocked(np.ones((1, 8, 4, 4), np.float32), 16)
    with pytest.raises(SrcoreError, match="BlockedPointwiseConv"):
        conv(x[:, :, :, :, :8], np.empty((1, 2, 4, 4, 16), np.float32))
    with pytest.raises(SrcoreError, match="out / residual"):
        conv(x, np.empty((1, 20, 4, 4), np.float32))
    with pytest.raises(SrcoreError, match="activation"):
        simd_pointwise_blocked.BlockedPointwiseConv(w, None, activation="gelu")
    dw = simd_depthwise_blocked.BlockedDepthwiseConv(np.ones((8, 1, 3, 3), np.float32), None, 1, 1,
                                                     blocked_in=True)
    with pytest.raises(SrcoreError, match="NCHW16c"):
        dw(np.ones((1, 8, 4, 4), np.float32), np.empty((1, 8, 4, 4), np.float32))
    nc = simd_dense_nchwc.NchwcDenseConv(np.ones((8, 20, 3, 3), np.float32), None, 2, 1)
    with pytest.raises(SrcoreError, match="NchwcDenseConv: an NCHW16c input of 20 channels"):
        nc(np.ones((1, 20, 8, 8), np.float32), np.empty((1, 1, 4, 4, 16), np.float32))
    with pytest.raises(SrcoreError, match=r"NchwcDenseConv: out / residual must be C-contiguous \(1, 1, 4, 4, 16\)"):
        nc(np.ones((1, 2, 8, 8, 16), np.float32), np.empty((1, 8, 4, 4), np.float32))
    dense = simd_dense_blocked.BlockedDenseConv(np.ones((8, 3, 3, 3), np.float32), None, 2, 1)
    with pytest.raises(SrcoreError, match="BlockedDenseConv: out must be"):
        dense(np.ones((1, 3, 8, 8), np.float32), np.empty((1, 1, 8, 8, 16), np.float32))
    with pytest.raises(SrcoreError, match="no residual"):
        dense(np.ones((1, 3, 8, 8), np.float32), np.empty((1, 1, 4, 4, 16), np.float32), np.ones(1, np.float32))
    with pytest.raises(SrcoreError, match="HalvesDepthwiseConv: needs both sides NCHW16c"):
        simd_halves.HalvesDepthwiseConv(np.ones((8, 1, 3, 3), np.float32), None, 1, 1, blocked_in=True)
    with pytest.raises(SrcoreError, match="HalvesDenseConv: takes no residual"):
        simd_halves.HalvesDenseConv(np.ones((8, 3, 3, 3), np.float32), None, 2, 1)(
            np.ones((1, 3, 8, 8), np.float32), np.empty((1, 1, 4, 4, 16), np.float32), np.ones(1, np.float32))


def test_a_call_on_the_same_arrays_reuses_its_binding_and_sees_new_values():
    """The kernels keep their last bound call for the same array objects (an engine's arena): new
    values in them are read, a non-contiguous input (copied when bound) is bound again every call."""
    rng = np.random.default_rng(5)
    w = rng.standard_normal((8, 1, 3, 3), np.float32)
    conv = simd_depthwise_blocked.BlockedDepthwiseConv(w, None, 1, 1)
    x = rng.standard_normal((2, 8, 6, 6), np.float32)
    xt = np.swapaxes(rng.standard_normal((2, 8, 6, 6), np.float32), 2, 3)
    out = np.empty((2, 8, 6, 6), np.float32)
    # (from the second call on the same arrays a single-thread call skips numba's dispatch: four calls)
    for src in (x, xt):
        for _ in range(4):
            src[...] = rng.standard_normal(src.shape, np.float32)
            conv(src, out)
            np.testing.assert_allclose(out, reference(src, w, np.zeros(8, np.float32), (1, 1), (1, 1), (1, 1)),
                                       rtol=1e-5, atol=1e-5)
    wp = rng.standard_normal((20, 8), np.float32)
    pw = simd_pointwise_blocked.BlockedPointwiseConv(wp, None)
    xb = nchwc.to_blocked(x, 16)
    ob = np.empty(pw.out_shape(x.shape), np.float32)
    for _ in range(4):
        xb[...] = nchwc.to_blocked(rng.standard_normal(x.shape, np.float32), 16)
        pw(xb, ob)
        want = np.einsum("oc,nchw->nohw", wp, nchwc.from_blocked(xb, 8))
        np.testing.assert_allclose(nchwc.from_blocked(ob, 20), want, rtol=1e-4, atol=1e-4)
    wd = rng.standard_normal((20, 3, 3, 3), np.float32)
    dense = simd_dense_blocked.BlockedDenseConv(wd, None, 2, 1)
    xd = np.empty((2, 3, 9, 7), np.float32)
    od = np.empty(dense.out_shape(xd.shape), np.float32)
    for _ in range(4):
        xd[...] = rng.standard_normal(xd.shape, np.float32)
        dense(xd, od)
        want = F.conv2d(torch.from_numpy(xd), torch.from_numpy(wd), stride=2, padding=1).numpy()
        np.testing.assert_allclose(nchwc.from_blocked(od, 20), want, rtol=1e-4, atol=1e-4)
