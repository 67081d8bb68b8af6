"""numba kernels of quantized_cpu that follow torch's x86 arithmetic (the depthwise convolution and
``quantized::add``'s vectorized path); imported on first use. The int8 GEMM itself is srcore's
(``srcore.plugin.int8_gemm``)."""
from __future__ import annotations

import numba
import numpy as np

#: adding and subtracting 1.5 * 2^23 rounds a float32 below 2^22 to the nearest integer, ties to even
_ROUND = np.float32(12582912.0)


@numba.njit(cache=True, nogil=True, boundscheck=False)
def depthwise_requantize_u8(x, zx, w, zw, kh, kw, sh, sw, ph, pw, dh, dw, out, bias_div, mult, y_zp, lo, hi):
    """A depthwise 2-d convolution (one filter per channel) of ``x`` (N, C, H, W) uint8 with ``w``
    (C, kh * kw) int32, exact in int32 (``sum (x - zx)(w - zw[c])``; padding contributes real
    zeros), then fbgemm's requantization as srcore.int8 gemm_requantize into ``out`` (N, C, OH, OW)."""
    n, c, h, wd = x.shape
    oh, ow = out.shape[2], out.shape[3]
    acc = np.empty(ow, np.int32)
    yz = np.float32(y_zp)
    flo = np.float32(lo)
    fhi = np.float32(hi)
    for b in range(n):
        for ch in range(c):
            bj = bias_div[ch]
            mj = mult[ch]
            for oy in range(oh):
                acc[:] = 0
                for i in range(kh):
                    iy = oy * sh - ph + i * dh
                    if iy < 0 or iy >= h:
                        continue
                    for j in range(kw):
                        wv = np.int32(w[ch, i * kw + j] - zw[ch])
                        off = j * dw - pw
                        # the outputs whose input column is inside: ox * sw + off in [0, wd)
                        lo_x = 0 if off >= 0 else (-off + sw - 1) // sw
                        hi_x = min(ow, (wd - 1 - off) // sw + 1) if wd - 1 - off >= 0 else 0
                        for ox in range(lo_x, hi_x):
                            acc[ox] += (np.int32(x[b, ch, iy, ox * sw + off]) - zx) * wv
                for ox in range(ow):
                    v = ((np.float32(acc[ox]) + bj) * mj + _ROUND) - _ROUND + yz
                    v = min(max(v, flo), fhi)
                    out[b, ch, oy, ox] = np.uint8(v)


@numba.njit(cache=True, nogil=True, boundscheck=False)
def add_vec_u8(a, b, sa, pa, sb, pb, inv, zp, lo, hi, out):
    """torch's vectorized ``quantized::add(_relu)`` path over flat 8-bit arrays (``binary._add``
    does the same in numpy): each input dequantized as ``fma(float(q), s, s * -zp)`` rounded once
    to float32 (the float64 product of an 8-bit integer and a float32 is exact), the float32 sum,
    relu by clamping ``lo`` at ``zp``, then ``nearbyint(float32(c * inv)) + zp`` clamped."""
    for i in range(a.shape[0]):
        c = np.float32(np.float64(a[i]) * sa + pa) + np.float32(np.float64(b[i]) * sb + pb)
        r = np.float64(np.rint(c * inv)) + zp
        r = min(max(r, lo), hi)
        out[i] = r


@numba.njit(cache=True, nogil=True, boundscheck=False)
def quantize_u8(x, inv, zp, lo, hi, out):
    """fbgemm's ``Quantize`` over flat float32 ``x`` into 8-bit ``out`` (``_common.quant_tensor``
    does the same in numpy): ``nearbyint(float32(x * inv + zp))`` with the product and sum in
    float64 (exact: one rounding, as the fma), clamped. Returns False, having stopped, at a NaN
    (the caller then takes numpy's path, whose conversion of NaN this does not reproduce)."""
    for i in range(x.shape[0]):
        r = np.rint(np.float32(np.float64(x[i]) * inv + zp))
        if r != r:
            return False
        out[i] = min(max(r, lo), hi)
    return True


@numba.njit(cache=True, nogil=True, boundscheck=False)
def dequantize_u8(q, zp, scale, out):
    """torch's per-tensor ``dequantize``: ``float32(q - zp) * scale`` (``_common.dequant_scalar``)."""
    for i in range(q.shape[0]):
        out[i] = np.float32(np.int64(q[i]) - zp) * scale
