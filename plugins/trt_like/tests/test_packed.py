"""The packed numba GEMM (explicit 16-lane vectors), the packed_gemm conv tactic and Winograd on it, against
numpy and torch.nn.functional.conv2d in float64."""
from __future__ import annotations

from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import njit

from srcore_trt_like.conv import ConvSpec
from srcore_trt_like.conv import packed as conv_packed
from srcore_trt_like.conv import winograd_packed
from srcore_trt_like.conv.packed import PackedGemmTactic
from srcore_trt_like.conv.winograd_packed import WinogradPackedTactic
from srcore_trt_like.kernels import gemm as gk
from srcore_trt_like.kernels import packed as pk
from srcore_trt_like.kernels.simd import vcopy_lanes, vstore, vtranspose16, vzero_lanes

torch = pytest.importorskip("torch")

#: kernels and compiled programs are called directly: the executor and the memory planner play no part
pytestmark = pytest.mark.one_pass
F = torch.nn.functional


def _pack_operand(x: np.ndarray) -> np.ndarray:
    K, N = x.shape
    xp = np.zeros((gk.blocks(N), K, 6), np.float32)
    for pb in range(xp.shape[0]):
        cols = x[:, 6 * pb:6 * pb + 6]
        xp[pb, :, :cols.shape[1]] = cols
    return xp


@settings(max_examples=40, deadline=None)
@given(M=st.integers(1, 150), K=st.integers(1, 400), N=st.integers(1, 30), seed=st.integers(0, 2**16))
def test_packed_gemm_matches_numpy(M, K, N, seed):
    """Any M (zero rows pad to 64), K across several K blocks, N with partial column blocks."""
    rng = np.random.default_rng(seed)
    w, x = rng.standard_normal((M, K), np.float32), rng.standard_normal((K, N), np.float32)
    wp, xp = gk.pack_weight(w), _pack_operand(x)
    mb, nb = wp.shape[0], xp.shape[0]
    ct = np.full((nb * 6 + 1, mb * 64), np.nan, np.float32)       # a spare row: nothing writes past C^T
    gk.gemm(wp.reshape(-1), 0, xp.reshape(-1), 0, ct.reshape(-1), 0, K, mb, 0, mb, 0, nb, 64 * mb)
    ref = w.astype(np.float64) @ x.astype(np.float64)
    np.testing.assert_allclose(ct[:N, :M].T, ref, rtol=1e-4, atol=1e-4 * np.sqrt(K))
    assert np.all(ct[:nb * 6, M:] == 0) and np.all(np.isnan(ct[-1]))


def test_packed_gemm_ranges_and_offsets_cover_disjoint_tiles():
    rng = np.random.default_rng(0)
    M, K, N = 130, 70, 20
    w, x = rng.standard_normal((M, K), np.float32), rng.standard_normal((K, N), np.float32)
    wp, xp = gk.pack_weight(w), _pack_operand(x)
    mb, nb = wp.shape[0], xp.shape[0]
    wf = np.concatenate([np.zeros(5, np.float32), wp.reshape(-1)])       # offsets into bigger arrays
    xf = np.concatenate([np.zeros(3, np.float32), xp.reshape(-1)])
    ct = np.zeros(7 + nb * 6 * mb * 64, np.float32)
    for ob0, ob1, pb0, pb1 in [(0, 1, 0, 2), (1, mb, 0, 2), (0, mb, 2, nb)]:
        gk.gemm(wf, 5, xf, 3, ct, 7, K, mb, ob0, ob1, pb0, pb1, 64 * mb)
    got = ct[7:].reshape(nb * 6, mb * 64)[:N, :M].T
    np.testing.assert_allclose(got, w.astype(np.float64) @ x, rtol=1e-4, atol=1e-3)


@njit(cache=True)
def _transpose_block(a, b):
    t = vtranspose16(a.reshape(-1), 3, 20)
    bf = b.reshape(-1)
    for i in range(16):
        vstore(bf, 16 * i, t[i])


@njit(cache=True)
def _copy_lanes(src, s, dst, d, lane0, n):
    vcopy_lanes(src, s, dst, d, lane0, n)


@njit(cache=True)
def _zero_lanes(dst, d, lane0, n):
    vzero_lanes(dst, d, lane0, n)


def test_vector_transpose_and_masked_copies():
    a = np.arange(20 * 20, dtype=np.float32).reshape(20, 20)
    b = np.empty((16, 16), np.float32)
    _transpose_block(a, b)            # rows start at element 3, 20 apart
    np.testing.assert_array_equal(b, a.reshape(-1)[3:3 + 16 * 20].reshape(16, 20)[:, :16].T)
    src, dst = np.arange(10, dtype=np.float32), np.full(12, -1, np.float32)
    _copy_lanes(src, 7, dst, 2, 5, 3)           # masked lanes may lie past both arrays' ends
    np.testing.assert_array_equal(dst, [-1] * 7 + [7, 8, 9] + [-1] * 2)
    _zero_lanes(dst, 0, 8, 2)
    np.testing.assert_array_equal(dst, [-1] * 7 + [7, 0, 0] + [-1] * 2)


@pytest.mark.parametrize("Ho, Wo", [(7, 7), (3, 1), (2, 5), (4, 13), (1, 6)])
def test_segments_cover_every_pixel_once_in_order(Ho, Wo):
    seg = pk.segments(Ho, Wo)
    pixels = []
    for blk in seg:
        lane = 0
        for ho, wo0, lane0, n in blk:
            if n == 0:
                continue
            assert lane0 == lane and 0 <= wo0 and wo0 + n <= Wo
            pixels += [ho * Wo + wo0 + e for e in range(n)]
            lane += n
    assert pixels == list(range(Ho * Wo))


def _reference(spec, x, w, b, res):
    t = lambda a: torch.from_numpy(np.asarray(a, np.float64))  # noqa: E731
    y = F.conv2d(t(x), t(w), t(b), stride=spec.stride, padding=spec.padding, dilation=spec.dilation)
    if res is not None:
        y = y + t(res)
    return (torch.relu(y) if spec.relu else y).numpy()


@st.composite
def specs(draw):
    kh, kw = draw(st.integers(1, 7)), draw(st.integers(1, 7))
    dh, dw = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    ph, pw = draw(st.integers(0, 3)), draw(st.integers(0, 3))
    H = draw(st.integers(max(1, dh * (kh - 1) + 1 - 2 * ph), 20))
    W = draw(st.integers(max(1, dw * (kw - 1) + 1 - 2 * pw), 20))
    return ConvSpec((draw(st.integers(1, 2)), draw(st.integers(1, 20)), H, W), draw(st.integers(1, 70)), (kh, kw),
                    (draw(st.integers(1, 3)), draw(st.integers(1, 3))), (ph, pw), (dh, dw),
                    relu=draw(st.booleans()), residual=draw(st.booleans()))


@settings(max_examples=60, deadline=None)
@given(spec=specs(), seed=st.integers(0, 2**16), chunk=st.sampled_from([1, 5000, 1 << 20]))
def test_packed_gemm_tactic_matches_torch(spec, seed, chunk):
    """Any kernel, stride, padding and dilation; output channels over one row block; the image in
    chunks of one column block up to all of it."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(spec.x_shape, np.float32)
    w = (rng.standard_normal(spec.weight_shape) / np.sqrt(np.prod(spec.weight_shape[1:]))).astype(np.float32)
    b = rng.standard_normal(spec.out_channels).astype(np.float32)
    res = rng.standard_normal(spec.out_shape, np.float32) if spec.residual else None
    with mock.patch.object(conv_packed, "CHUNK_BYTES", chunk):
        t = PackedGemmTactic(spec, w, b)
    out = np.full(spec.out_shape, np.nan, np.float32)
    t(x, out, res)
    np.testing.assert_allclose(out, _reference(spec, x, w, b, res), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape, O, k, s, p", [((1, 3, 64, 64), 64, 7, 2, 3),        # resnet's stem, smaller
                                               ((1, 256, 7, 7), 130, 3, 1, 1),      # K blocks, ragged O
                                               ((1, 64, 14, 14), 128, 1, 2, 0)])
def test_packed_gemm_tactic_on_resnet_like_layers(shape, O, k, s, p):
    spec = ConvSpec(shape, O, k, s, p, relu=True, residual=s == 1)
    rng = np.random.default_rng(1)
    x = np.maximum(rng.standard_normal(shape, np.float32), 0)
    w = (rng.standard_normal(spec.weight_shape) / np.sqrt(np.prod(spec.weight_shape[1:]))).astype(np.float32)
    b = rng.standard_normal(O).astype(np.float32)
    res = rng.standard_normal(spec.out_shape, np.float32) if spec.residual else None
    out = np.empty(spec.out_shape, np.float32)
    PackedGemmTactic(spec, w, b)(x, out, res)
    ref = _reference(spec, x, w, b, res)
    assert np.abs(out - ref).max() / np.abs(ref).max() < 1.5e-6


@st.composite
def winograd_specs(draw):
    p = draw(st.integers(0, 2))
    H, W = draw(st.integers(max(1, 3 - 2 * p), 40)), draw(st.integers(max(1, 3 - 2 * p), 40))
    return ConvSpec((draw(st.integers(1, 2)), draw(st.integers(1, 40)), H, W), draw(st.integers(1, 70)), 3, 1, p,
                    relu=draw(st.booleans()), residual=draw(st.booleans()))


@settings(max_examples=60, deadline=None)
@given(spec=winograd_specs(), seed=st.integers(0, 2**16), m=st.sampled_from([2, 4]),
       chunk=st.sampled_from([1, 20000, 1 << 20]))
def test_winograd_packed_matches_torch(spec, seed, m, chunk):
    """Both tile sizes, odd sizes (partial tiles), every padding, batches, ragged channel counts, the
    image in chunks of one tile row up to all of it."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(spec.x_shape, np.float32)
    w = (rng.standard_normal(spec.weight_shape) / np.sqrt(9 * spec.x_shape[1])).astype(np.float32)
    b = rng.standard_normal(spec.out_channels).astype(np.float32)
    res = rng.standard_normal(spec.out_shape, np.float32) if spec.residual else None
    with mock.patch.object(winograd_packed, "CHUNK_BYTES", chunk):
        t = WinogradPackedTactic(spec, w, b, m=m, threads=1)
    out = np.full(spec.out_shape, np.nan, np.float32)
    t(x, out, res)
    np.testing.assert_allclose(out, _reference(spec, x, w, b, res), rtol=1e-5, atol=2e-5)


@pytest.mark.parametrize("shape", [(1, 64, 28, 28), (1, 128, 14, 14), (1, 256, 7, 7)])
def test_winograd_packed_accuracy_on_resnet_like_layers(shape):
    spec = ConvSpec(shape, shape[1], 3, 1, 1, relu=True, residual=True)
    rng = np.random.default_rng(1)
    x = np.maximum(rng.standard_normal(shape, np.float32), 0)
    w = (rng.standard_normal(spec.weight_shape) / np.sqrt(9 * shape[1])).astype(np.float32)
    b = rng.standard_normal(shape[1]).astype(np.float32)
    res = rng.standard_normal(spec.out_shape, np.float32)
    ref = _reference(spec, x, w, b, res)
    for m, bound in ((4, 4e-6), (2, 1.5e-6)):
        out = np.empty(spec.out_shape, np.float32)
        WinogradPackedTactic(spec, w, b, m=m)(x, out, res)
        assert np.abs(out - ref).max() / np.abs(ref).max() < bound
    x[0, 0, 1, 2] = np.nan                    # NaN in, NaN out where it reaches (relu keeps it)
    out = np.empty(spec.out_shape, np.float32)
    WinogradPackedTactic(spec, w, b, m=4)(x, out, res)
    assert np.isnan(out[0, :, 1, 2]).all()
