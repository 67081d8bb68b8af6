"""Exact integer GEMM and fbgemm's requantization, shared by linear and conv.

numpy has no int8 GEMM. The operands are zero-point-shifted 8-bit integers (``|a| <= amax``,
``|b| <= bmax``, at most 255), held in float32: a float32 matmul (SGEMM, BLAS) sums their products
exactly as long as every partial sum stays below 2^24, which ``K * amax * bmax < 2^24`` guarantees
whatever order BLAS adds in (K <= 518 for 8-bit activations and symmetric int8 weights). A deeper
contraction is cut into equal chunks that each satisfy it, and the chunks' results (exact integers)
are summed in float64 (exact to 2^53). The result is the int32 accumulator fbgemm computes, with no
int16 saturation (fbgemm's AVX2 kernels saturate pairs of products at int16 when activations use
all 8 bits; torch's x86 qconfigs keep activations to 7 bits (reduce_range) so that they never do;
on VNNI CPUs fbgemm is exact too). Weights are shifted and converted once, at their first use
(:func:`packed`), and kept with the weight.
"""
from __future__ import annotations

import attrs
import numpy as np

from srcore.plugin import QDTYPES

from ._common import F32, ints


#: float32 sums integers exactly below this
F32_EXACT = 1 << 24


@attrs.frozen(eq=False)
class PackedWeight:
    """A quantized weight ready for :func:`int_matmul`: ``rows`` (out channels, K) float32 holds
    ``q - zero_point`` (exact), ``bmax`` its largest magnitude, ``scales`` float32 per out channel."""

    rows: np.ndarray
    bmax: float
    scales: np.ndarray


def packed(w) -> PackedWeight:
    """The weight's :class:`PackedWeight`, made at its first use and kept on the weight object
    (weights are constants: the runtime passes the same object on every call)."""
    p = getattr(w, "_srcore_packed", None)
    if p is not None:
        return p
    scales, zps = weight_params(w)
    rows = ints(w).reshape(w.shape[0], -1).astype(F32)
    rows -= zps.astype(F32)[:, None]
    p = PackedWeight(np.ascontiguousarray(rows), float(np.abs(rows).max()) if rows.size else 0.0, scales)
    try:
        w._srcore_packed = p
    except AttributeError:  # a plain array: packed again on every call
        pass
    return p


def packed_int8(w, conv_taps: int = 0):
    """The weight packed for the int8 GEMM (``srcore.plugin.int8_gemm``), made at its first use and kept
    on the weight object. ``conv_taps`` (the kernel's positions) reorders each row's depth from
    torch's (channel, tap) to channels-last (tap, channel), the order the convolution gathers in."""
    from srcore.plugin import int8_gemm

    key = f"_srcore_packed_int8_{conv_taps}"
    p = getattr(w, key, None)
    if p is not None:
        return p
    rows = ints(w).reshape(w.shape[0], -1)
    if conv_taps > 1:
        rows = rows.reshape(w.shape[0], -1, conv_taps).transpose(0, 2, 1).reshape(w.shape[0], -1)
    p = int8_gemm.pack(rows, weight_params(w)[1])
    try:
        setattr(w, key, p)
    except AttributeError:  # a plain array: packed again on every call
        pass
    return p


def act_bound(zero_point: int, qdtype: str) -> float:
    """The largest ``|q - zero_point|`` of a ``qdtype`` value."""
    info = QDTYPES[qdtype]
    return float(max(zero_point - info.qmin, info.qmax - zero_point))


def int_matmul(lhs: np.ndarray, rhs: np.ndarray, bound: float) -> np.ndarray:
    """``lhs @ rhs`` of float32 integers whose products are at most ``bound`` in magnitude, exactly:
    one SGEMM when ``K * bound < 2^24``, else K cut into equal chunks that are, summed in float64.
    Returns float32 or float64 holding the exact integers."""
    k = lhs.shape[-1]
    step = max(1, int((F32_EXACT - 1) // max(bound, 1.0)))
    if k <= step:
        return np.matmul(lhs, rhs)
    n = -(-k // step)
    edges = [k * i // n for i in range(n + 1)]
    acc = None
    for k0, k1 in zip(edges[:-1], edges[1:]):
        part = np.matmul(lhs[..., k0:k1], rhs[..., k0:k1, :])
        if acc is None:
            acc = part.astype(np.float64)
        else:
            acc += part
    return acc


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
               qdtype: str, relu: bool, out: np.ndarray, axis: int = -1) -> np.ndarray:
    """fbgemm's ``ReQuantizeOutput`` with a float bias: per output channel ``j`` (axis ``axis`` of
    ``acc``), ``act_times_w = float(x_scale) * w_scale[j]``, ``raw = float(acc) + bias[j] / act_times_w``,
    ``y = nearbyint(raw * (act_times_w / y_scale)) + y_zero_point``, clamped (to ``y_zero_point`` from
    below with relu)."""
    info = QDTYPES[qdtype]
    shape = [1] * acc.ndim
    shape[axis] = -1
    act_w = F32(x_scale) * w_scales
    mult = (act_w / F32(y_scale)).reshape(shape)
    if bias is not None:   # float(acc) + bias / act_w, in float32: one new array either way
        raw = np.add(acc.astype(F32, copy=False), (np.asarray(bias, F32) / act_w).reshape(shape), dtype=F32)
    else:
        raw = acc.astype(F32)   # a copy, or float(acc) of float64 integers: float32 as fbgemm's
    raw *= mult
    np.rint(raw, out=raw)
    if qdtype == "qint32":   # beyond float32's integers: add the zero point in float64
        r = raw.astype(np.float64)
        r += y_zero_point
    else:
        r = raw
        r += F32(y_zero_point)
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
