"""srcore.conv.depthwise (``srcore.plugin.simd_depthwise``): the explicit-SIMD float32 depthwise conv
against torch's grouped conv2d over planes narrower and wider than a vector, strides 1-3, padding,
dilation, kernels 1-5, channel multipliers, batch, non-contiguous inputs, both vector widths."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from srcore import SrcoreError
from srcore.plugin import simd_depthwise

from _depthwise_cases import ACTS, check_case, depthwise_cases, reference

pytestmark = pytest.mark.one_pass


@settings(max_examples=40, deadline=None)
@given(case=depthwise_cases(19, [1, 1, 2]), seed=st.integers(0, 2**16), lanes=st.sampled_from([8, 16]),
       act=st.sampled_from(sorted(ACTS)), residual=st.booleans(), transposed=st.booleans())
def test_matches_torch(case, seed, lanes, act, residual, transposed):
    check_case(lambda w, b, s, p, d, lo, hi, slope, after: simd_depthwise.SimdDepthwiseConv(
        w, b, s, p, d, lo=lo, hi=hi, lanes_=lanes, negative_slope=slope, activation=after),
        case, seed, act, residual, transposed)


@pytest.mark.parametrize("C, hw, k, s", [(21, 9, 5, 2), (40, 7, 3, 1), (13, 30, 3, 2)])
def test_mobile_layers_two_threads_asymmetric_padding_and_nan(C, hw, k, s):
    """Odd channel counts on MobileNet-like planes (narrower and wider than a vector), channels split
    over 2 threads, padding (top, bottom), (left, right) unequal, a NaN propagated as torch does."""
    rng = np.random.default_rng(C)
    x = rng.standard_normal((2, C, hw, hw), np.float32)
    x[1, 3, 2, 4] = np.nan
    w = rng.standard_normal((C, 1, k, k), np.float32)
    b = rng.standard_normal(C).astype(np.float32)
    pads = ((k // 2, k // 2 - 1), (k // 2 - 1, k // 2))
    conv = simd_depthwise.SimdDepthwiseConv(w, b, s, pads, 1, lo=0.0)
    out = np.empty(conv.out_shape(x.shape), np.float32)
    conv(x, out, threads=2)
    xp = np.pad(x, ((0, 0), (0, 0), pads[0], pads[1]))
    ref = reference(xp, w, b, s, 0, 1, lo=0.0)
    assert out.shape == ref.shape
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-4, equal_nan=True)
    assert np.isnan(out).any()


def test_vector_width_follows_cpu_features():
    w = np.ones((4, 1, 3, 3), np.float32)
    assert simd_depthwise.SimdDepthwiseConv(w, None, lanes_=16).tag.ndim == 2
    assert simd_depthwise.SimdDepthwiseConv(w, None, lanes_=8).tag.ndim == 1
    assert simd_depthwise.SimdDepthwiseConv(w, None).nl == simd_depthwise.lanes()


def test_bad_shapes_are_errors():
    with pytest.raises(SrcoreError, match=r"\(O, 1, kh, kw\)"):
        simd_depthwise.SimdDepthwiseConv(np.ones((4, 2, 3, 3), np.float32), None)
    conv = simd_depthwise.SimdDepthwiseConv(np.ones((6, 1, 3, 3), np.float32), None)
    with pytest.raises(SrcoreError, match="not a multiple"):
        conv(np.ones((1, 4, 5, 5), np.float32), np.empty((1, 6, 3, 3), np.float32))
    with pytest.raises(SrcoreError, match="stride"):
        simd_depthwise.SimdDepthwiseConv(np.ones((4, 1, 3, 3), np.float32), None, stride=0)
    with pytest.raises(SrcoreError, match="activation 'gelu'"):
        simd_depthwise.SimdDepthwiseConv(np.ones((4, 1, 3, 3), np.float32), None, activation="gelu")


def test_one_conv_on_several_input_sizes_and_from_two_threads():
    """The per-shape plan and the per-call buffer: larger then smaller planes, and two
    threads calling one conv at once, each matching torch."""
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(5)
    w = rng.standard_normal((12, 1, 3, 3), np.float32)
    b = rng.standard_normal(12).astype(np.float32)
    conv = simd_depthwise.SimdDepthwiseConv(w, b, 2, 1, 1, lo=0.0, hi=6.0)
    xs = [rng.standard_normal((1, 12, hw, hw), np.float32) for hw in (33, 9, 20, 9, 33)]

    def run(x):
        out = np.empty(conv.out_shape(x.shape), np.float32)
        return conv(x, out)
    for x in xs:
        np.testing.assert_allclose(run(x), reference(x, w, b, 2, 1, 1, lo=0.0, hi=6.0), rtol=1e-5, atol=1e-4)
    with ThreadPoolExecutor(2) as pool:
        for x, got in zip(xs * 4, pool.map(run, xs * 4)):
            np.testing.assert_allclose(got, reference(x, w, b, 2, 1, 1, lo=0.0, hi=6.0), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("stride, mult", [(1, 1), (2, 2)])
def test_bound_call_in_ranges_on_threads_gives_the_call_bits(stride, mult):
    """``bind``: each image's output channels by ragged ranges run at once on threads (each copies
    the input channels it reads into its own buffer; with a channel multiplier a range may start
    or end inside an input channel's outputs) write the bits of ``conv(x, out)``; leaky relu and a
    residual in the stores. There is no copy step ahead of the tasks (``channels == 0``)."""
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(stride)
    x = rng.standard_normal((2, 10, 13, 13), np.float32)
    w = rng.standard_normal((10 * mult, 1, 3, 3), np.float32)
    b = rng.standard_normal(10 * mult).astype(np.float32)
    conv = simd_depthwise.SimdDepthwiseConv(w, b, stride, 1, 1, negative_slope=0.2)
    res = rng.standard_normal(conv.out_shape(x.shape), np.float32)
    want = np.empty_like(res)
    conv(x, want, res)
    out = np.full_like(res, np.nan)
    run = conv.bind(x, out, res)
    assert (run.images, run.channels, run.tasks) == (2, 0, 10 * mult)
    cuts = lambda total: [(0, 1), (1, total // 3), (total // 3, total - 2), (total - 2, total)]
    with ThreadPoolExecutor(4) as pool:
        for n in range(run.images):
            run.fill(n, 0, run.channels)
            list(pool.map(lambda r, n=n: run.run_tasks(n, *r), cuts(run.tasks)[::-1]))
    np.testing.assert_array_equal(out, want)
    ref = F.leaky_relu(F.conv2d(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b), stride, 1, 1, 10)
                       + torch.from_numpy(res), 0.2).numpy()
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-4)


def test_masked_vector_load_and_store_touch_only_their_lanes():
    """``vload_n`` / ``vstore_n`` (srcore.conv.simd), the depthwise copy's narrow rows and the
    stores at a row's end: the first ``n`` lanes, zeros after them on load, nothing else written."""
    import numba

    from srcore.conv.simd import vadd, vload_n, vsplat, vstore_n

    @numba.njit
    def shifted_plus_one(a, out, n, tag):
        vstore_n(out, 1, vadd(vload_n(a, 3, n, vsplat(tag, 0.0)), vsplat(tag, 1.0)), n)

    for tag, lanes in ((np.zeros(1, np.float32), 8), (np.zeros((1, 1), np.float32), 16)):
        for n in range(lanes + 1):
            a = np.arange(3 + n, dtype=np.float32)       # nothing to read past a[3 + n - 1]
            out = np.full(lanes + 2, -7.0, np.float32)
            shifted_plus_one(a, out, n, tag)
            want = np.full(lanes + 2, -7.0, np.float32)
            want[1:1 + n] = a[3:3 + n] + 1
            np.testing.assert_array_equal(out, want)
