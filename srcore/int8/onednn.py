"""oneDNN's requantization, for the convolutions and linears whose weights torch packs for oneDNN
(``srcore.plugin.int8_onednn``: quantized_cpu's kernels and trt_like's int8 layers share it).

torch packs a quantized conv's weights for oneDNN with engine ``onednn``, and with engine ``x86`` on a
CPU with AVX512-VNNI when the weights are symmetric (the importer records which, as the ops' ``arith``
argument; docs/quantization.md). The integer accumulators are the same as fbgemm's (exact int32 sums;
VNNI has no int16 saturation); the float epilogue differs. oneDNN computes, per output channel ``j``::

    y = float(acc) * (src_scale * wei_scale[j]) + bias[j]     # float32, each step rounded
    [y = y + sum_scale * (float(accum) - sum_zp)]              # conv2d_add's sum post-op
    [y = max(y, 0)]                                            # relu post-op
    q = nearbyint(y * (1 / dst_scale) + zp), saturated

with the scales that reach it through torch and ideep, which pass each one as its reciprocal (float32)
and invert it again: ``src_scale = 1 / f32(1 / s_x)``, ``dst_scale = 1 / f32(1 / s_y)``; a conv's weight
scale is ``s_w`` itself, a linear's ``1 / f32(1 / s_w)``. Each round trip may move a scale by one ulp,
which is why this is not fbgemm's ``nearbyint((acc + bias / (s_x s_w)) * (s_x s_w / s_y)) + zp``.
"""
from __future__ import annotations

import numpy as np

from ..ir.quant import QDTYPES

F32 = np.float32


def _round_trip(scale) -> np.ndarray:
    """A scale passed to oneDNN as its float32 reciprocal and inverted back (ideep's convention)."""
    return F32(1.0) / np.asarray(1.0 / np.asarray(scale, np.float64), F32)


def act_times_w(x_scale: float, w_scales: np.ndarray, kind: str) -> np.ndarray:
    """oneDNN's per-channel ``src_scale * wei_scale`` (float32); ``kind`` "conv" or "linear"."""
    w = np.asarray(w_scales, F32)
    if kind == "linear":  # torch's linear prepack stores 1 / s_w; ideep inverts it
        w = _round_trip(w)
    return (_round_trip(x_scale) * w).astype(F32)


def dst_multiplier(y_scale: float) -> np.float32:
    """oneDNN's ``1 / dst_scale`` (float32)."""
    return F32(F32(1.0) / _round_trip(y_scale))


def scaled(acc: np.ndarray, x_scale: float, w_scales: np.ndarray, bias, kind: str) -> np.ndarray:
    """``float(acc) * (src_scale * wei_scale) + bias`` in float32; channels on the last axis of ``acc``."""
    y = acc.astype(F32) * act_times_w(x_scale, w_scales, kind)
    if bias is not None:
        y += np.asarray(bias, F32)
    return y


def requantize(y: np.ndarray, y_scale: float, y_zero_point: int, qdtype: str, relu: bool,
               out: np.ndarray) -> np.ndarray:
    """oneDNN's output stage on the float32 ``y`` (after bias and sum): relu, ``* (1 / dst_scale)``,
    ``+ zp``, round half to even, saturate; written into ``out``."""
    info = QDTYPES[qdtype]
    if relu:
        y = np.maximum(y, F32(0))
    r = y * dst_multiplier(y_scale)
    r += F32(y_zero_point)
    r = np.rint(r)
    np.clip(r, info.qmin, info.qmax, out=r)
    out[...] = r
    return out
