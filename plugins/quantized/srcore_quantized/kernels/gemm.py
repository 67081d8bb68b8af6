"""Exact integer GEMM and fbgemm's requantization, shared by linear and conv.

numpy has no int8 GEMM. The products of zero-point-shifted 8-bit values are integers below 2^16 in
magnitude, so a float64 matmul (BLAS) sums them exactly for any realistic depth (exact while
K * 2^16 < 2^53): the int32 accumulators fbgemm computes, with no int16 saturation (fbgemm's AVX2
kernels saturate pairs of products at int16 when activations use all 8 bits; torch's x86 qconfigs
keep activations to 7 bits (reduce_range) so that they never do; on VNNI CPUs fbgemm is exact too).
"""
from __future__ import annotations

import numpy as np

from srcore.plugin import QDTYPES

from ._common import F32


def shifted(q: np.ndarray, zero_point) -> np.ndarray:
    """``q - zero_point`` as float64 (exact integers); ``zero_point`` may be per row (broadcast)."""
    return q.astype(np.float64) - zero_point


def weight_params(w) -> tuple[np.ndarray, np.ndarray]:
    """(scales float32, zero points float64) per output channel (axis 0) of a quantized weight."""
    n = w.shape[0]
    q = w.qparams
    if q.axis is None:
        return np.full(n, F32(q.scale), F32), np.full(n, float(q.zero_point))
    if q.axis != 0:
        from srcore.plugin import KernelError
        raise KernelError(f"weights quantized per channel along axis {q.axis}; expected axis 0 (output channels)")
    return np.asarray(q.scale, np.float64).astype(F32), np.asarray(q.zero_point, np.float64)


def requantize(acc: np.ndarray, x_scale: float, w_scales: np.ndarray, bias, y_scale: float, y_zero_point: int,
               qdtype: str, relu: bool, out: np.ndarray) -> np.ndarray:
    """fbgemm's ``ReQuantizeOutput`` with a float bias: per output channel ``j`` (the last axis of
    ``acc``), ``act_times_w = float(x_scale) * w_scale[j]``, ``raw = float(acc) + bias[j] / act_times_w``,
    ``y = nearbyint(raw * (act_times_w / y_scale)) + y_zero_point``, clamped (to ``y_zero_point`` from
    below with relu)."""
    info = QDTYPES[qdtype]
    act_w = F32(x_scale) * w_scales
    mult = act_w / F32(y_scale)
    raw = acc.astype(F32)
    if bias is not None:
        raw += np.asarray(bias, F32) / act_w
    r = np.rint(raw * mult).astype(np.float64)
    r += y_zero_point
    np.clip(r, y_zero_point if relu else info.qmin, info.qmax, out=r)
    out[...] = r
    return out


def dequantize_acc(acc: np.ndarray, x_scale: float, w_scales: np.ndarray, bias, relu: bool) -> np.ndarray:
    """fbgemm's ``ReQuantizeForFloat``: ``fma(float(acc), x_scale * w_scale[j], bias[j])`` in float32
    (the fused multiply-add done in float64, whose product of two float32 values is exact)."""
    mult = (F32(x_scale) * w_scales).astype(np.float64)
    res = acc.astype(F32).astype(np.float64) * mult
    if bias is not None:
        res += np.asarray(bias, F32).astype(np.float64)
    res = res.astype(F32)
    if relu:
        np.maximum(res, F32(0), out=res)
    return res
