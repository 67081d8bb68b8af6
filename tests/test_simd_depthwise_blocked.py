"""srcore.conv.depthwise_blocked (``srcore.plugin.simd_depthwise_blocked``): the channel-blocked
float32 depthwise conv against torch's grouped conv2d: channel counts below, at and past a block of
16, planes narrower and wider than a vector, strides, padding, dilation, kernels 1-5, batch, the
fused epilogue, a residual that is the output buffer, non-contiguous inputs."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from srcore import SrcoreError
from srcore.plugin import simd_depthwise_blocked

from _depthwise_cases import ACTS, check_case, depthwise_cases

pytestmark = pytest.mark.one_pass


@settings(max_examples=40, deadline=None)
@given(case=depthwise_cases(40, [1]), seed=st.integers(0, 2**16), act=st.sampled_from(sorted(ACTS)),
       residual=st.booleans(), transposed=st.booleans())
def test_matches_torch(case, seed, act, residual, transposed):
    check_case(lambda w, b, s, p, d, lo, hi, slope, after: simd_depthwise_blocked.BlockedDepthwiseConv(
        w, b, s, p, d, lo=lo, hi=hi, negative_slope=slope, activation=after),
        case, seed, act, residual, transposed)


@pytest.mark.parametrize("C, hw, k, s", [(21, 9, 5, 2), (40, 7, 5, 1), (33, 30, 3, 2), (16, 14, 3, 1)])
def test_mobile_layers_residual_in_place_two_threads_asymmetric_padding_and_nan(C, hw, k, s):
    """MobileNet-like planes, channel blocks split over 2 threads, the residual read from the output
    buffer itself (each element read before it is written), unequal padding, a NaN propagated."""
    rng = np.random.default_rng(C)
    x = rng.standard_normal((2, C, hw, hw), np.float32)
    x[1, 3, 2, 4] = np.nan
    w = rng.standard_normal((C, 1, k, k), np.float32)
    b = rng.standard_normal(C).astype(np.float32)
    pads = ((k // 2, k // 2 - 1), (k // 2 - 1, k // 2))
    conv = simd_depthwise_blocked.BlockedDepthwiseConv(w, b, s, pads, 1, lo=0.0, hi=6.0)
    res = rng.standard_normal(conv.out_shape(x.shape), np.float32)
    out = res.copy()
    conv(x, out, out, threads=2)
    y = F.conv2d(F.pad(torch.from_numpy(x), (k // 2 - 1, k // 2, k // 2, k // 2 - 1)), torch.from_numpy(w),
                 torch.from_numpy(b), s, 0, 1, C)
    ref = torch.clamp(y + torch.from_numpy(res), 0.0, 6.0).numpy()
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-4, equal_nan=True)
    assert np.isnan(out[1, 3]).any() and not np.isnan(out[0]).any()


def test_bad_arguments_are_named():
    w = np.zeros((8, 1, 3, 3), np.float32)
    with pytest.raises(SrcoreError, match=r"weight must be \(C, 1, kh, kw\)"):
        simd_depthwise_blocked.BlockedDepthwiseConv(np.zeros((8, 2, 3, 3), np.float32), None)
    with pytest.raises(SrcoreError, match="activation 'gelu' is not one of"):
        simd_depthwise_blocked.BlockedDepthwiseConv(w, None, activation="gelu")
    conv = simd_depthwise_blocked.BlockedDepthwiseConv(w, None, 1, 1)
    with pytest.raises(SrcoreError, match="input has 4 channels, the weight 8"):
        conv(np.zeros((1, 4, 5, 5), np.float32), np.zeros((1, 8, 5, 5), np.float32))
