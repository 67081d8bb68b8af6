"""Shared by the depthwise kernels' tests (pixel-blocked and channel-blocked): the hypothesis case
strategy, the fused activations as (lo, hi) clamps, and torch's grouped conv2d as the reference."""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from hypothesis import strategies as st

#: test name -> the fused clamp (lo, hi); "leaky" adds a slope, names ending in hardswish/hardsigmoid
#: that activation after the clamp
ACTS = {"none": (-math.inf, math.inf), "relu": (0.0, math.inf), "relu6": (0.0, 6.0), "leaky": (-math.inf, math.inf),
        "hardswish": (-math.inf, math.inf), "hardsigmoid": (-math.inf, math.inf), "relu_hardswish": (0.0, math.inf)}


@st.composite
def depthwise_cases(draw, max_channels, multipliers):
    """``(batch, channels, multiplier, kernel, stride, dilation, pads, (H, W))``: kernels 1-5, strides
    1-3, dilation 1-2, padding 0-2, planes up to 40 wide (at least one output pixel)."""
    k = tuple(draw(st.sampled_from([1, 2, 3, 5])) for _ in range(2))
    s = tuple(draw(st.integers(1, 3)) for _ in range(2))
    d = tuple(draw(st.integers(1, 2)) for _ in range(2))
    p = tuple(draw(st.integers(0, 2)) for _ in range(2))
    size = tuple(draw(st.integers(max(1, dd * (kk - 1) + 1 - 2 * pp), 40)) for kk, dd, pp in zip(k, d, p))
    return (draw(st.integers(1, 2)), draw(st.integers(1, max_channels)), draw(st.sampled_from(multipliers)), k, s, d,
            p, size)


def act_args(act):
    """``(lo, hi, negative_slope, activation)`` of an :data:`ACTS` name."""
    lo, hi = ACTS[act]
    slope = 0.1 if act == "leaky" else None
    after = act.split("_")[-1] if act.endswith(("hardswish", "hardsigmoid")) else None
    return lo, hi, slope, after


def reference(x, w, b, s, p, d, res=None, lo=-math.inf, hi=math.inf, slope=None, act=None):
    """torch: ``act(clamp(leaky(conv2d(x, groups=C) + b (+ res)), lo, hi))``."""
    y = F.conv2d(torch.from_numpy(np.ascontiguousarray(x)), torch.from_numpy(w), torch.from_numpy(b), s, p, d,
                 x.shape[1])
    if res is not None:
        y = y + torch.from_numpy(res)
    if slope is not None:
        y = F.leaky_relu(y, slope)
    y = torch.clamp(y, lo, hi)
    if act is not None:
        y = getattr(F, act)(y)
    return y.numpy()


def check_case(make, case, seed, act, residual, transposed):
    """A depthwise conv from ``make(w, b, stride, pads, dilation, lo, hi, slope, activation)`` on a
    :func:`depthwise_cases` case (random data from ``seed``; ``transposed``: a non-contiguous input,
    the last two axes swapped in memory) into a NaN-filled output, against :func:`reference`."""
    n, C, mult, k, s, d, p, (H, W) = case
    rng = np.random.default_rng(seed)
    x = (np.swapaxes(rng.standard_normal((n, C, W, H), np.float32), -1, -2) if transposed
         else rng.standard_normal((n, C, H, W), np.float32))
    w = rng.standard_normal((C * mult, 1, *k), np.float32)
    b = rng.standard_normal(C * mult).astype(np.float32)
    lo, hi, slope, after = act_args(act)
    conv = make(w, b, s, p, d, lo, hi, slope, after)
    out_shape = conv.out_shape(x.shape)
    res = rng.standard_normal(out_shape, np.float32) if residual else None
    out = np.full(out_shape, np.nan, np.float32)
    conv(x, out, res)
    np.testing.assert_allclose(out, reference(x, w, b, s, p, d, res, lo, hi, slope, after), rtol=1e-5, atol=1e-4)
