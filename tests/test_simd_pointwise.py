"""srcore.conv.pointwise (``srcore.plugin.simd_pointwise``): the explicit-SIMD 1x1 conv against
torch's conv2d over channel counts (none a multiple of the 6-channel block needed), plane sizes
below, at and between whole vectors, both vector widths, relu/relu6, a residual (also the output
buffer itself), batch, and threads."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from srcore import SrcoreError
from srcore.plugin import simd_pointwise

pytestmark = pytest.mark.one_pass


def _reference(x, w, b, res=None, lo=-math.inf, hi=math.inf, act=None):
    t = lambda a: torch.from_numpy(np.asarray(a, np.float64))  # noqa: E731
    y = F.conv2d(t(x), t(w)[:, :, None, None], t(b))
    if res is not None:
        y = y + t(res)
    y = torch.clamp(y, lo, hi)
    return (getattr(F, act)(y) if act else y).numpy()


@settings(max_examples=30, deadline=None)
@given(C=st.integers(1, 40), O=st.integers(1, 20), H=st.integers(1, 9), W=st.integers(1, 40),
       n=st.integers(1, 2), seed=st.integers(0, 2**16), lanes=st.sampled_from([8, 16]),
       act=st.sampled_from(["none", "relu", "relu6", "hardswish", "hardsigmoid"]),
       residual=st.sampled_from(["none", "separate", "in_place"]), threads=st.sampled_from([1, 2]))
def test_matches_torch(C, O, H, W, n, seed, lanes, act, residual, threads):
    """Planes from 1 pixel to several blocks of 4 vectors, the last vector partial or whole."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, C, H, W), np.float32)
    w = rng.standard_normal((O, C), np.float32)
    b = rng.standard_normal(O).astype(np.float32)
    lo, hi = {"relu": (0.0, math.inf), "relu6": (0.0, 6.0)}.get(act, (-math.inf, math.inf))
    after = act if act.startswith("hard") else None
    conv = simd_pointwise.SimdPointwiseConv(w, b, lo=lo, hi=hi, lanes_=lanes, activation=after)
    res = None if residual == "none" else rng.standard_normal((n, O, H, W), np.float32)
    want = _reference(x, w, b, res, lo, hi, after)
    out = res if residual == "in_place" else np.full((n, O, H, W), np.nan, np.float32)
    conv(x, out, res, threads=threads)
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4 * math.sqrt(C))


def test_mobile_shapes_and_a_4d_weight():
    """MobileNetV3's expand/project layers (7x7 and 14x14 planes: a partial last vector)."""
    rng = np.random.default_rng(0)
    for C, O, H in [(96, 576, 7), (240, 40, 14), (16, 72, 56)]:
        x = rng.standard_normal((1, C, H, H), np.float32)
        w = rng.standard_normal((O, C, 1, 1), np.float32) / np.float32(math.sqrt(C))
        b = rng.standard_normal(O).astype(np.float32)
        out = np.empty((1, O, H, H), np.float32)
        simd_pointwise.SimdPointwiseConv(w, b, lo=0.0)(x, out)
        np.testing.assert_allclose(out, _reference(x, w[:, :, 0, 0], b, lo=0.0), rtol=1e-5, atol=1e-5)


def test_bad_weight_or_channels_name_the_problem():
    with pytest.raises(SrcoreError, match=r"weight must be \(O, C\) or \(O, C, 1, 1\)"):
        simd_pointwise.SimdPointwiseConv(np.ones((2, 3, 3, 3), np.float32), None)
    conv = simd_pointwise.SimdPointwiseConv(np.ones((2, 3), np.float32), None)
    with pytest.raises(SrcoreError, match="input has 4 channels, the weight 3"):
        conv(np.ones((1, 4, 8, 8), np.float32), np.empty((1, 2, 8, 8), np.float32))
