"""trt_like conv tactics against torch.nn.functional.conv2d (+ bias, + residual, + relu) in float64."""
from __future__ import annotations

import threading
from unittest import mock

import numpy as np
import pytest
import threadpoolctl
from hypothesis import given, settings
from hypothesis import strategies as st

from srcore.errors import SrcoreError
from srcore_trt_like.conv import gemm as conv_gemm
from srcore.plugin import simd_depthwise
from srcore_trt_like.conv import (ConvSpec, DepthwiseBlockedTactic, DepthwiseChannelsLastTactic, DepthwiseDirectTactic,
                                  DepthwiseSimd8Tactic, DepthwiseSimdTactic,
                                  Gemm1x1Tactic, Im2colGemmTactic, Simd1x1Tactic, WinogradTactic, conv_tactic_builders,
                                  conv_tactics)
from srcore_trt_like.errors import TacticSpecError
from srcore_trt_like.tactics.timing import time_tactics
from srcore_trt_like.kernels.winograd_math import F2, F4, toom_cook, transform_weight

torch = pytest.importorskip("torch")

#: kernels and compiled programs are called directly: the executor and the memory planner play no part
pytestmark = pytest.mark.one_pass
F = torch.nn.functional


def _data(spec: ConvSpec, seed: int, relu_input: bool = False):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(spec.x_shape, np.float32)
    if relu_input:
        x = np.maximum(x, 0)
    fan_in = spec.weight_shape[1] * spec.kernel[0] * spec.kernel[1]
    w = (rng.standard_normal(spec.weight_shape) / np.sqrt(fan_in)).astype(np.float32)
    b = (0.1 * rng.standard_normal(spec.out_channels)).astype(np.float32)
    res = rng.standard_normal(spec.out_shape, np.float32) if spec.residual else None
    return x, w, b, res


def _reference(spec: ConvSpec, x, w, b, res):
    """float64 torch: conv2d + bias (+ residual) (+ relu)."""
    t = lambda a: torch.from_numpy(np.asarray(a, np.float64))  # noqa: E731
    y = F.conv2d(t(x), t(w), None if b is None else t(b), stride=spec.stride, padding=spec.padding,
                 dilation=spec.dilation, groups=spec.groups)
    if res is not None:
        y = y + t(res)
    if spec.relu:
        y = torch.relu(y)
    return y.numpy()


def _run(tactic, x, res):
    out = np.full(tactic.out_shape, np.nan, np.float32)    # every element must be written
    tactic(x, out, res)
    return out


def _rel_err(got, ref):
    return float(np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-30))


@st.composite
def conv_specs(draw):
    groups_kind = draw(st.sampled_from(["one", "grouped", "depthwise"]))
    g = 1 if groups_kind == "one" else draw(st.integers(2, 3))
    cg = 1 if groups_kind == "depthwise" else draw(st.integers(1, 3))
    C = g * cg
    O = g * draw(st.integers(1, 3))
    kh, kw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    dh, dw = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    ph, pw = draw(st.integers(0, 2)), draw(st.integers(0, 2))
    H = draw(st.integers(max(1, dh * (kh - 1) + 1 - 2 * ph), 11))
    W = draw(st.integers(max(1, dw * (kw - 1) + 1 - 2 * pw), 11))
    return ConvSpec((draw(st.integers(1, 2)), C, H, W), O, (kh, kw), (draw(st.integers(1, 2)), draw(st.integers(1, 2))),
                    (ph, pw), (dh, dw), g, relu=draw(st.booleans()), residual=draw(st.booleans()))


@st.composite
def winograd_specs(draw):
    """3x3 stride-1 convs: odd and tiny sizes (partial tiles, output smaller than a tile)."""
    p = draw(st.integers(0, 2))
    H, W = draw(st.integers(max(1, 3 - 2 * p), 13)), draw(st.integers(max(1, 3 - 2 * p), 13))
    return ConvSpec((draw(st.integers(1, 2)), draw(st.integers(1, 5)), H, W), draw(st.integers(1, 5)), 3, 1, p,
                    relu=draw(st.booleans()), residual=draw(st.booleans()))


@settings(max_examples=150, deadline=None)
@given(spec=conv_specs(), seed=st.integers(0, 2**16))
def test_every_tactic_matches_torch(spec, seed):
    x, w, b, res = _data(spec, seed)
    ref = _reference(spec, x, w, b, res)
    tactics = conv_tactics(spec, w, b)
    assert tactics[-1].name == "im2col_gemm"
    for t in tactics:
        assert t.out_shape == ref.shape
        np.testing.assert_allclose(_run(t, x, res), ref, rtol=1e-5, atol=1e-5, err_msg=f"{t!r}")


@settings(max_examples=100, deadline=None)
@given(spec=winograd_specs(), seed=st.integers(0, 2**16), m=st.sampled_from([2, 4]))
def test_winograd_matches_torch_on_odd_sizes_and_every_padding(spec, seed, m):
    x, w, b, res = _data(spec, seed)
    got = _run(WinogradTactic(spec, w, b, m=m), x, res)
    np.testing.assert_allclose(got, _reference(spec, x, w, b, res), rtol=1e-5, atol=1e-5)


@settings(max_examples=60, deadline=None)
@given(spec=conv_specs(), seed=st.integers(0, 2**16), cap=st.sampled_from([1, 300, 1 << 20]))
def test_im2col_row_copies_in_chunks_match_torch(spec, seed, cap):
    """The row-copy gather (outputs wider than PLANNED_MAX_WIDTH), in chunks of 1 row up to the whole
    image; the small shapes above take the planned (indexed) gather."""
    x, w, b, res = _data(spec, seed)
    with mock.patch.object(conv_gemm, "PLANNED_MAX_WIDTH", 0), mock.patch.object(conv_gemm, "COLS_CAP_BYTES", cap):
        t = Im2colGemmTactic(spec, w, b)
    assert t.plan is None
    np.testing.assert_allclose(_run(t, x, res), _reference(spec, x, w, b, res), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("spec", [
    ConvSpec((2, 21, 9, 9), 21, 5, 2, 2, groups=21, relu=True),               # MobileNetV3's 5x5 s2, odd channels
    ConvSpec((1, 36, 14, 14), 36, 3, 1, 1, groups=36, residual=True),
    ConvSpec((1, 13, 7, 10), 26, (3, 5), (1, 2), (2, 1), (2, 1), groups=13),  # channel multiplier 2, dilated
])
@pytest.mark.parametrize("tactic", [DepthwiseChannelsLastTactic, DepthwiseSimdTactic, DepthwiseSimd8Tactic,
                                    DepthwiseBlockedTactic])
def test_depthwise_tactics_match_torch_on_mobile_shapes(spec, tactic):
    """Channel counts that are no multiple of the vector width, batch 2, the channel multiplier."""
    x, w, b, res = _data(spec, 3)
    if tactic is DepthwiseBlockedTactic and spec.out_channels != spec.x_shape[1]:
        with pytest.raises(TacticSpecError, match="depthwise_simd_blocked: needs out channels == in channels"):
            tactic(spec, w, b)
        return
    got = _run(tactic(spec, w, b), x, res)
    np.testing.assert_allclose(got, _reference(spec, x, w, b, res), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("spec", [
    ConvSpec((2, 32, 15, 15), 32, 3, 2, 1, groups=4, relu=True),    # ResNet-D's / RegNet's group width 8, s2
    ConvSpec((1, 6, 5, 7), 9, (3, 1), 1, (1, 0), (2, 1), groups=3, residual=True),   # 2 in, 3 out a group, dilated
])
def test_the_block_diagonal_dense_conv_matches_torch_and_takes_its_stored_layout_back(spec):
    x, w, b, res = _data(spec, 5)
    ref = _reference(spec, x, w, b, res)
    (build,) = [build for name, build in conv_tactic_builders(spec, w, b) if name == "conv_nchwc_planes_blockdiag"]
    t = build()
    np.testing.assert_allclose(_run(t, x, res), ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(_run(build(t.layout()), x, res), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("spec", [
    ConvSpec((2, 64, 8, 8), 64, 3, 2, 1, groups=32, relu=True),                 # ResNeXt's 2 per group, s2
    ConvSpec((1, 24, 7, 9), 24, 3, 1, 1, groups=3, residual=True, relu=True),  # 8 per group, a residual
    ConvSpec((1, 12, 6, 6), 12, (3, 5), 1, (1, 2), (1, 2), groups=4, activation="silu"),
])
def test_grouped_depthwise_matches_torch_and_takes_its_stored_layout_back(spec):
    from srcore_trt_like.conv.grouped import GroupedDepthwiseTactic

    x, w, b, res = _data(spec, 3)
    ref = _reference(spec, x, w, b, res)
    if spec.activation == "silu":
        ref = ref / (1.0 + np.exp(-ref))
    t = GroupedDepthwiseTactic(spec, w, b)
    for _ in range(2):   # a second call on the same buffers (the kernels keep their last binding)
        np.testing.assert_allclose(_run(t, x, res), ref, rtol=1e-5, atol=1e-5)
    again = GroupedDepthwiseTactic(spec, np.zeros_like(w), b, layout=t.layout())
    np.testing.assert_allclose(_run(again, x, res), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("spec", [
    ConvSpec((1, 3, 32, 32), 16, 4, 4),                                   # ConvNeXt's stem
    ConvSpec((2, 3, 35, 33), 32, 16, 16),                                 # ViT's, rows and columns left over
    ConvSpec((2, 5, 12, 18), 7, (2, 3), (2, 3), relu=True, residual=True),  # 7 = 4 + 3 channels, 24 pixels
    ConvSpec((1, 4, 8, 8), 6, 2, 2, activation="gelu"),
    ConvSpec((1, 2, 6, 3), 3, 3, 3),                                      # fewer than 4 channels and pixels
])
def test_patchify_tactics_match_torch_and_take_their_stored_layout_back(spec):
    from srcore_trt_like.conv.patchify import PatchifyDirectTactic, PatchifyDotsTactic, PatchifyGemmTactic

    x, w, b, res = _data(spec, 4)
    ref = _reference(spec, x, w, b, res)
    if spec.activation == "gelu":
        ref = np.asarray(F.gelu(torch.from_numpy(ref)))
    for cls in (PatchifyGemmTactic, PatchifyDirectTactic, PatchifyDotsTactic):
        t = cls(spec, w, b)
        assert t.name in [n for n, _ in conv_tactic_builders(spec, w, b)]
        for _ in range(2):
            np.testing.assert_allclose(_run(t, x, res), ref, rtol=1e-5, atol=1e-5)
        again = cls(spec, np.zeros_like(w), b, layout=t.layout())
        np.testing.assert_allclose(_run(again, x, res), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("spec", [ConvSpec((1, 3, 8, 8), 4, 4, 2), ConvSpec((1, 3, 8, 8), 4, 2, 2, 1),
                                  ConvSpec((1, 4, 8, 8), 4, 2, 2, groups=2), ConvSpec((1, 3, 8, 8), 4, 1, 1)])
def test_patchify_tactics_refuse_overlapping_padded_grouped_or_1x1_convs(spec):
    from srcore_trt_like.conv.patchify import PatchifyDirectTactic, PatchifyDotsTactic, PatchifyGemmTactic

    x, w, b, _ = _data(spec, 0)
    assert not {"patchify_gemm", "patchify_direct", "patchify_dots"} & {n for n, _ in conv_tactic_builders(spec, w, b)}
    for cls in (PatchifyGemmTactic, PatchifyDirectTactic, PatchifyDotsTactic):
        with pytest.raises(TacticSpecError, match="kernel == stride"):
            cls(spec, w, b)


def test_depthwise_simd_takes_its_stored_layout_back_and_splits_channels():
    """A serialized plan rebuilds the tactic from its (O, KH, KW) weight; 2 threads agree with 1."""
    spec = ConvSpec((1, 10, 12, 12), 10, 3, 2, 1, groups=10, relu=True)
    x, w, b, _ = _data(spec, 2)
    t = DepthwiseSimdTactic(spec, w, b)
    again = DepthwiseSimdTactic(spec, np.zeros_like(w), b, layout=t.layout(), threads=2)
    np.testing.assert_array_equal(_run(again, x, None), _run(t, x, None))
    np.testing.assert_allclose(_run(t, x, None), _reference(spec, x, w, b, None), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("spec", [
    ConvSpec((2, 40, 14, 14), 13, 1, residual=True),              # 14x14: a partial last vector, batch 2
    ConvSpec((1, 96, 7, 7), 100, 1, relu=True),                   # MobileNetV3's 7x7 expand
    ConvSpec((1, 5, 2, 3), 7, 1),                                 # smaller than one vector
])
def test_pointwise_simd_matches_torch_and_takes_its_stored_layout_back(spec):
    x, w, b, res = _data(spec, 4)
    t = Simd1x1Tactic(spec, w, b)
    got = _run(t, x, res)
    np.testing.assert_allclose(got, _reference(spec, x, w, b, res), rtol=1e-5, atol=1e-5)
    again = Simd1x1Tactic(spec, np.zeros_like(w), b, layout=t.layout(), threads=2)
    np.testing.assert_array_equal(_run(again, x, res), got)


def test_pointwise_simd_needs_stride_1():
    spec = ConvSpec((1, 4, 8, 8), 6, 1, 2, 0)
    with pytest.raises(TacticSpecError, match="pointwise_simd: needs a 1x1 kernel, stride 1"):
        Simd1x1Tactic(spec, *_data(spec, 0)[1:3])


def test_depthwise_channels_last_takes_its_stored_layout_back():
    """A serialized plan rebuilds the tactic from its (KH, KW, O) weight; a wrong one is an error."""
    spec = ConvSpec((1, 6, 5, 5), 12, 3, 1, 1, groups=6)
    x, w, b, _ = _data(spec, 1)
    t = DepthwiseChannelsLastTactic(spec, w, b)
    assert t.layout()["w"].shape == (3, 3, 12)
    again = DepthwiseChannelsLastTactic(spec, np.zeros_like(w), b, layout=t.layout())
    np.testing.assert_array_equal(_run(again, x, None), _run(t, x, None))
    with pytest.raises(TacticSpecError, match="depthwise_channels_last: stored layout 'w'"):
        DepthwiseChannelsLastTactic(spec, w, b, layout={"w": np.zeros((12, 3, 3), np.float32)})


def test_im2col_gather_paths_by_width():
    wide, narrow = ConvSpec((1, 3, 40, 70), 4, 3, 1, 1), ConvSpec((1, 3, 40, 20), 4, 3, 1, 1)
    assert Im2colGemmTactic(wide, _data(wide, 0)[1], None).plan is None
    assert Im2colGemmTactic(narrow, _data(narrow, 0)[1], None).plan.shape == (9, 40 * 20)


def test_conv_tactics_offers_what_applies(monkeypatch):
    from srcore.plugin import simd_conv

    from srcore_trt_like.kernels import threads

    # at one intra-op thread (the OpenMP twins offered at more: test_simd_direct_omp.py)
    monkeypatch.setattr(threads, "count", lambda: 1)

    names = lambda spec: [t.name for t in conv_tactics(spec, *_data(spec, 0)[1:3])]  # noqa: E731
    # the oc-lanes block and the 8-lane kernel beside the widest: on a 16-lane CPU only (the NCHW16c dense
    # kernel's 8-lane tiles, conv_nchwc_planes_h8, on every CPU)
    simd = ["simd_direct", "simd_direct_rows"]
    planes = ["conv_nchwc_planes", "conv_nchwc_planes_h8"]
    if simd_conv.lanes() == 16:
        simd += ["simd_direct_oc", "simd_direct_8"]
    assert names(ConvSpec((1, 4, 8, 8), 4, 3, 1, 1)) == ["winograd_f4x4_packed", "winograd_f2x2_packed",
                                                          "winograd_f4x4", "winograd_f2x2",
                                                          "winograd_f4x4_sgemm", "winograd_f2x2_sgemm", *simd,
                                                          *planes, "packed_gemm", "im2col_gemm"]
    assert names(ConvSpec((1, 4, 8, 8), 6, 1, 2, 0)) == ["gemm_1x1", *simd, *planes, "packed_gemm",
                                                         "im2col_gemm"]
    assert names(ConvSpec((1, 4, 8, 8), 6, 1)) == ["gemm_1x1", "pointwise_simd",
                                                   *(["pointwise_simd8"] if simd_depthwise.lanes() == 16 else []),
                                                   *simd, "packed_gemm", "im2col_gemm"]
    # the 8-lane depthwise kernel beside the 16-lane one where the CPU has AVX-512 (a feature test)
    simd8 = ["depthwise_simd8"] if simd_depthwise.lanes() == 16 else []
    assert names(ConvSpec((1, 4, 8, 8), 8, 3, 2, 1, groups=4)) == ["depthwise_direct", "depthwise_channels_last",
                                                                   "depthwise_simd", *simd8, "im2col_gemm"]
    assert names(ConvSpec((1, 4, 8, 8), 4, 3, 2, 1, groups=4)) == ["depthwise_direct", "depthwise_channels_last",
                                                                   "depthwise_simd", *simd8, "depthwise_simd_blocked",
                                                                   "im2col_gemm"]
    # 2-4 groups: the dense kernel on the block-diagonal weight too (conv_nchwc_planes_blockdiag)
    assert names(ConvSpec((1, 4, 8, 8), 8, 3, 2, 1, groups=2)) == [*simd, "conv_nchwc_planes", "im2col_gemm"]
    # 2 to 8 channels per group, out == in: the depthwise passes too
    assert names(ConvSpec((1, 4, 8, 8), 4, 3, 2, 1, groups=2)) == ["grouped_depthwise", *simd, "conv_nchwc_planes",
                                                                   "im2col_gemm"]
    assert names(ConvSpec((1, 10, 8, 8), 20, 3, 2, 1, groups=5)) == [*simd, "im2col_gemm"]   # over 4 groups
    assert names(ConvSpec((1, 4, 8, 8), 8, 1, groups=2)) == [*simd, "im2col_gemm"]           # a 1x1 stride 1
    assert names(ConvSpec((1, 4, 8, 8), 4, 3, 2, 1)) == [*simd, *planes, "packed_gemm",
                                                         "im2col_gemm"]
    assert names(ConvSpec((1, 4, 8, 8), 4, 1, 1, 1)) == [*simd, *planes, "packed_gemm",
                                                         "im2col_gemm"]  # padded 1x1
    # one input channel, one group (a grayscale stem, audio's first 1-D conv): dense, so the SIMD conv too
    assert names(ConvSpec((1, 1, 8, 8), 4, 3, 2, 1)) == [*simd, *planes, "packed_gemm",
                                                         "im2col_gemm"]
    # rows longer than ROW_TILE outputs: in pieces too (a 1-D conv is one long row)
    long_row = ConvSpec((1, 4, 1, 2 * simd_conv.ROW_TILE + 10), 4, (1, 3), (1, 2), (0, 1))
    assert names(long_row) == [simd[0], simd[1], "simd_direct_tiled", *simd[2:], *planes, "packed_gemm",
                               "im2col_gemm"]


@pytest.mark.parametrize("shape", [(1, 64, 28, 28), (1, 128, 14, 14), (1, 256, 7, 7)])
def test_winograd_accuracy_on_resnet_like_layers(shape):
    """relu'd inputs, fan-in scaled weights, a residual and relu: max|dy| / max|y| vs float64 stays
    far below the 1e-5 per-layer bar (F(4x4) ~1e-6 with its points (0, +-3/2, +-2/3), F(2x2) ~3e-7)."""
    spec = ConvSpec(shape, shape[1], 3, 1, 1, relu=True, residual=True)
    x, w, b, res = _data(spec, 1, relu_input=True)
    ref = _reference(spec, x, w, b, res)
    assert _rel_err(_run(WinogradTactic(spec, w, b, m=4), x, res), ref) < 4e-6
    assert _rel_err(_run(WinogradTactic(spec, w, b, m=2), x, res), ref) < 1.5e-6
    assert _rel_err(_run(Im2colGemmTactic(spec, w, b), x, res), ref) < 1.5e-6


def test_winograd_matrices_are_exact_and_the_weight_transform_is_g_w_gt():
    rng = np.random.default_rng(0)
    for mats in (F2, F4, toom_cook((0, 1, -1, 2, -2), 4)):
        d, g = rng.standard_normal(mats.n), rng.standard_normal(3)
        y = mats.AT @ ((mats.G @ g) * (mats.BT @ d))
        np.testing.assert_allclose(y, np.correlate(d, g, "valid"), rtol=0, atol=1e-13)
    w = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    u = transform_weight(w, F4)
    expect = np.einsum("ik,ockl,jl->ijoc", F4.G, w.astype(np.float64), F4.G).reshape(36, 3, 2)
    assert u.dtype == np.float32 and u.flags.c_contiguous
    np.testing.assert_array_equal(u, expect.astype(np.float32))
    with pytest.raises(ValueError, match="distinct"):
        toom_cook((0, 1, 1), 2)


def test_no_bias_and_every_epilogue_combination():
    for relu in (False, True):
        for residual in (False, True):
            spec = ConvSpec((2, 3, 9, 7), 4, 3, 1, 1, relu=relu, residual=residual)
            x, w, _, res = _data(spec, 3)
            ref = _reference(spec, x, w, None, res)
            for t in conv_tactics(spec, w, None):
                np.testing.assert_allclose(_run(t, x, res), ref, rtol=1e-5, atol=1e-5, err_msg=t.name)


def test_relu_keeps_nan_like_torch():
    spec = ConvSpec((1, 1, 4, 4), 1, 1, relu=True)
    x = np.zeros(spec.x_shape, np.float32)
    x[0, 0, 1, 2] = np.nan
    for t in conv_tactics(spec, np.ones(spec.weight_shape, np.float32), None):
        out = _run(t, x, None)
        assert np.isnan(out[0, 0, 1, 2]) and np.count_nonzero(np.isnan(out)) == 1, t.name


def test_concurrent_calls_from_two_threads_match_a_single_thread():
    specs = [ConvSpec((1, 32, 29, 27), 32, 3, 1, 1, relu=True, residual=True),
             ConvSpec((2, 6, 12, 12), 6, 3, 2, 1, groups=6), ConvSpec((1, 8, 10, 10), 5, 1, 2, 0)]
    work = []
    for spec in specs:
        for k in range(2):
            x, w, b, res = _data(spec, 10 + k)
            for t in conv_tactics(spec, w, b):
                work.append((t, x, res, _run(t, x, res)))
    errors = []

    def hammer(offset):
        try:
            for _ in range(10):
                for t, x, res, expect in work[offset::2] + work[1 - offset::2]:
                    got = _run(t, x, res)
                    if not np.array_equal(got, expect):
                        errors.append(t.name)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(repr(exc))

    threads = [threading.Thread(target=hammer, args=(i,)) for i in range(2)]
    # BLAS on one thread: what is checked is that the tactics share no state between Python threads
    # (their scratch is per thread); OpenBLAS's own threading may split a GEMM differently when two
    # callers meet, which changes the last bit of im2col_gemm's sums (seen once in a parallel run)
    with threadpoolctl.threadpool_limits(1, user_api="blas"):
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    assert not errors


def test_time_tactics_returns_every_tactic_fastest_first():
    spec = ConvSpec((1, 8, 12, 12), 8, 3, 1, 1, residual=True)
    _, w, b, _ = _data(spec, 0)
    tactics = conv_tactics(spec, w, b)
    timed = time_tactics(tactics, spec, rounds=2)
    assert sorted(n for n, _ in timed) == sorted(t.name for t in tactics)
    assert [s for _, s in timed] == sorted(s for _, s in timed) and all(s > 0 for _, s in timed)
    with pytest.raises(TacticSpecError, match="no tactics"):
        time_tactics([], spec)


def test_time_tactics_charges_each_tactic_for_streaming_its_weights():
    spec = ConvSpec((1, 8, 6, 6), 8, 3, 1, 1)
    _, w, b, _ = _data(spec, 0)
    f4, im2col = WinogradTactic(spec, w, b, m=4), Im2colGemmTactic(spec, w, b)
    assert f4.weight_bytes == 36 * 8 * 8 * 4 + 8 * 4                          # G g G^T and the bias
    assert im2col.weight_bytes == 9 * 8 * 8 * 4 + 8 * 4 + im2col.plan.nbytes         # and its gather plan
    hot = dict(time_tactics([f4, im2col], spec, rounds=1, weight_bandwidth=None))
    slow_memory = dict(time_tactics([f4, im2col], spec, rounds=1, weight_bandwidth=1e3))
    assert slow_memory["winograd_f4x4"] > f4.weight_bytes / 1e3 > slow_memory["im2col_gemm"] - 1
    assert all(v < 1 for v in hot.values())


@pytest.mark.parametrize("kwargs, match", [
    (dict(x_shape=(1, 4, 8, 8), out_channels=4, kernel=3, groups=3), "groups 3 must divide in channels 4"),
    (dict(x_shape=(1, 4, 8, 8), out_channels=5, kernel=3, groups=2), "out_channels 5"),
    (dict(x_shape=(1, 4, 2, 8), out_channels=4, kernel=3), "larger than the padded input"),
    (dict(x_shape=(1, 4, 8, 8), out_channels=4, kernel=3, padding=-1), "padding .* must be >= 0"),
    (dict(x_shape=(1, 4, 8, 8), out_channels=4, kernel=3, stride=0), "stride .* must be >= 1"),
    (dict(x_shape=(1, 4, 8), out_channels=4, kernel=3), "4-D"),
    (dict(x_shape=(1, 4, 8, 8), out_channels=4, kernel=(3, 3, 3)), "kernel must be a pair"),
    (dict(x_shape=(1, 0, 8, 8), out_channels=4, kernel=1), "empty dimension"),
])
def test_bad_specs_raise_a_srcore_error_naming_the_field(kwargs, match):
    with pytest.raises(TacticSpecError, match=match) as info:
        ConvSpec(**kwargs)
    assert isinstance(info.value, SrcoreError)


def test_tactics_reject_specs_they_do_not_compute_and_bad_weights():
    s3 = ConvSpec((1, 4, 8, 8), 4, 3, 2, 1)
    w3 = np.zeros(s3.weight_shape, np.float32)
    with pytest.raises(TacticSpecError, match="winograd_f4x4: needs a 3x3 kernel, stride 1"):
        WinogradTactic(s3, w3, None)
    with pytest.raises(TacticSpecError, match="gemm_1x1: needs a 1x1 kernel"):
        Gemm1x1Tactic(s3, w3, None)
    with pytest.raises(TacticSpecError, match="depthwise_direct: needs groups == in channels"):
        DepthwiseDirectTactic(s3, w3, None)
    with pytest.raises(TacticSpecError, match=r"weight shape \(4, 4, 3\) does not match"):
        Im2colGemmTactic(s3, w3[..., 0], None)
    with pytest.raises(TacticSpecError, match=r"bias shape \(3,\) must be \(4,\)"):
        Im2colGemmTactic(s3, w3, np.zeros(3, np.float32))
    with pytest.raises(TacticSpecError, match="m must be 2 or 4"):
        WinogradTactic(ConvSpec((1, 4, 8, 8), 4, 3, 1, 1), w3, None, m=3)


def test_calls_with_arrays_that_contradict_the_spec_raise():
    spec = ConvSpec((1, 2, 6, 6), 3, 3, 1, 1, residual=True)
    x, w, b, res = _data(spec, 0)
    t = WinogradTactic(spec, w, b)
    out = np.empty(t.out_shape, np.float32)
    with pytest.raises(TacticSpecError, match=r"x must be a C-contiguous float32 array of shape \(1, 2, 6, 6\), "
                                              r"got float64"):
        t(x.astype(np.float64), out, res)
    with pytest.raises(TacticSpecError, match="out must be .* non-contiguous"):
        t(x, np.empty((1, 3, 6, 12), np.float32)[..., ::2], res)
    with pytest.raises(TacticSpecError, match="residual must be"):
        t(x, out)
    t_nores = WinogradTactic(ConvSpec((1, 2, 6, 6), 3, 3, 1, 1), w, b)
    with pytest.raises(TacticSpecError, match="residual=False"):
        t_nores(x, out, res)


def test_simd_direct_rebuilt_from_its_stored_layout_computes_the_same():
    from srcore_trt_like.conv.simd_direct import SimdDirectRowsTactic, SimdDirectTactic

    spec = ConvSpec((2, 5, 13, 17), 7, 3, 2, 1, relu=True, residual=True)
    x, w, b, res = _data(spec, 3)
    t = SimdDirectTactic(spec, w, b)
    again = SimdDirectTactic(spec, np.zeros_like(w), None, layout={k: v.copy() for k, v in t.layout().items()})
    assert sorted(t.layout()) == ["bp", "wp"]
    np.testing.assert_array_equal(_run(again, x, res), _run(t, x, res))
    # the row-interleaved input copy: the same weights layout, the same bits
    rows = SimdDirectRowsTactic(spec, np.zeros_like(w), None, layout={k: v.copy() for k, v in t.layout().items()})
    np.testing.assert_array_equal(_run(rows, x, res), _run(t, x, res))
    assert _rel_err(_run(t, x, res), _reference(spec, x, w, b, res)) < 1e-5


@pytest.mark.parametrize("name", ["simd_direct_oc", "simd_direct_8"])
def test_simd_direct_widths_rebuilt_from_an_unaligned_layout_give_the_same_bits(name):
    """The oc-lanes block and the 8-lane kernel (offered on 16-lane CPUs, constructible anywhere):
    the bits of ``simd_direct`` (the same sums in the same order), also from a stored layout that
    starts off a 64-byte line (the kernels' weights are realigned)."""
    from srcore_trt_like.conv.simd_direct import SimdDirect8Tactic, SimdDirectOcTactic, SimdDirectTactic

    cls = {"simd_direct_oc": SimdDirectOcTactic, "simd_direct_8": SimdDirect8Tactic}[name]
    spec = ConvSpec((1, 6, 9, 11), 37, 3, 2, 1, relu=True, residual=True)
    x, w, b, res = _data(spec, 4)
    t = cls(spec, w, b)
    shifted = {}
    for k, v in t.layout().items():
        raw = np.empty(v.size + 1, np.float32)
        shifted[k] = raw[1:] if raw[1:].ctypes.data % 64 else raw[:-1]
        shifted[k][...] = v
    again = cls(spec, np.zeros_like(w), None, layout=shifted)
    np.testing.assert_array_equal(_run(again, x, res), _run(t, x, res))
    np.testing.assert_array_equal(_run(t, x, res), _run(SimdDirectTactic(spec, w, b), x, res))
    assert _rel_err(_run(t, x, res), _reference(spec, x, w, b, res)) < 1e-5


def test_simd_direct_tiled_on_a_long_row_gives_simd_direct_bits():
    """A 1-D conv's long row in pieces (``simd_direct_tiled``), with residual and relu, against whole-row
    tasks (``simd_direct``: the same sums, the same bits) and float64 torch."""
    from srcore_trt_like.conv import SimdDirectTactic, SimdDirectTiledTactic

    spec = ConvSpec((1, 8, 1, 1500), 11, (1, 3), (1, 2), (0, 1), relu=True, residual=True)
    x, w, b, res = _data(spec, 3)
    tiled, whole = SimdDirectTiledTactic(spec, w, b), SimdDirectTactic(spec, w, b)
    assert tiled.conv.row_tile > 0 and whole.conv.row_tile == 0
    out = _run(tiled, x, res)
    np.testing.assert_array_equal(out, _run(whole, x, res))
    np.testing.assert_allclose(out, _reference(spec, x, w, b, res), rtol=1e-5, atol=1e-4)
