"""numba kernels of quantized_cpu that follow torch's x86 arithmetic (the depthwise convolution and
``quantized::add``'s vectorized path); imported on first use. The int8 GEMM itself is srcore's
(``srcore.plugin.int8_gemm``)."""
from __future__ import annotations

import numba
import numpy as np

#: adding and subtracting 1.5 * 2^23 rounds a float32 below 2^22 to the nearest integer, ties to even
_ROUND = np.float32(12582912.0)


#: int32 sums of one run of output pixels in the stride-1 depthwise loop (4 zmm registers' worth)
_DW_RUN = 64


@numba.njit(cache=True, nogil=True, boundscheck=False)
def depthwise_nhwc_u8(x, zx, w, kh, kw, sh, sw, ph, pw, dh, dw, out, bias_div, mult, y_zp, lo, hi):
    """A depthwise 2-d convolution (one filter per channel), channels-last: ``x`` (N, H, W, C) uint8,
    ``w`` (kh * kw, C) int32 holding ``w - zw`` per channel, exact in int32 (``sum (x - zx)(w -
    zw)``; padding contributes real zeros), then fbgemm's requantization as srcore.int8's
    gemm_requantize (float32, the same operations per element) into ``out`` (N, OH, OW, C) uint8.
    Every loop over channels is contiguous: LLVM vectorizes the int32 multiply-adds and the float32
    requantization whatever the stride (the NCHW loop before it strided along a row: 3-12x slower).
    With stride 1 along the row (and no dilation along it) the interior pixels go in runs of
    ``r = 64 / C`` (at least 1): their windows' rows are ``r * C`` contiguous bytes, multiplied by
    the tap's weights repeated ``r`` times, so a layer of few channels (16: one vector) still runs
    loops of 64 lanes (its per-pixel loop was 4x the run's time)."""
    n, h, wd, c = x.shape
    oh, ow = out.shape[1], out.shape[2]
    acc = np.empty(c, np.int32)
    yz = np.float32(y_zp)
    flo = np.float32(lo)
    fhi = np.float32(hi)
    taps = kh * kw
    r = max(1, _DW_RUN // c) if sw == 1 and dw == 1 else 1
    run = r * c if r > 1 else 0          # no runs: nothing repeated
    wr = np.empty((taps, run), np.int32)
    br = np.empty(run, np.float32)
    mr = np.empty(run, np.float32)
    for q in range(run):
        for t in range(taps):
            wr[t, q] = w[t, q % c]
        br[q] = bias_div[q % c]
        mr[q] = mult[q % c]
    accr = np.empty(run, np.int32)
    xf = x.reshape(n, h, wd * c)
    of = out.reshape(n, oh, ow * c)
    # the pixels whose windows lie inside the row: ox - pw >= 0 and ox - pw + kw - 1 < wd
    in_lo = min(ow, pw)
    in_hi = max(in_lo, min(ow, wd + pw - kw + 1))
    for b in range(n):
        for oy in range(oh):
            ox = 0
            while ox < ow:
                if r > 1 and in_lo <= ox and ox + r <= in_hi:
                    for q in range(run):
                        accr[q] = 0
                    for i in range(kh):
                        iy = oy * sh - ph + i * dh
                        if iy < 0 or iy >= h:
                            continue
                        xrow = xf[b, iy]
                        for j in range(kw):
                            wt = wr[i * kw + j]
                            xs = xrow[(ox - pw + j) * c:(ox - pw + j) * c + run]
                            for q in range(run):
                                accr[q] += (np.int32(xs[q]) - zx) * wt[q]
                    orow = of[b, oy, ox * c:ox * c + run]
                    for q in range(run):
                        v = ((np.float32(accr[q]) + br[q]) * mr[q] + _ROUND) - _ROUND + yz
                        v = min(max(v, flo), fhi)
                        orow[q] = np.uint8(v)
                    ox += r
                    continue
                for ch in range(c):
                    acc[ch] = 0
                for i in range(kh):
                    iy = oy * sh - ph + i * dh
                    if iy < 0 or iy >= h:
                        continue                # padding: (x - zx) is a real zero
                    for j in range(kw):
                        ix = ox * sw - pw + j * dw
                        if ix < 0 or ix >= wd:
                            continue
                        t = i * kw + j
                        for ch in range(c):
                            acc[ch] += (np.int32(x[b, iy, ix, ch]) - zx) * w[t, ch]
                for ch in range(c):
                    v = ((np.float32(acc[ch]) + bias_div[ch]) * mult[ch] + _ROUND) - _ROUND + yz
                    v = min(max(v, flo), fhi)
                    out[b, oy, ox, ch] = np.uint8(v)
                ox += 1


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
    float64 (exact: one rounding, as the fma), clamped. Returns False where ``x`` holds a NaN (the
    caller then takes numpy's path over all of ``out``, whose conversion of NaN this does not
    reproduce). ``nearbyint`` by the 1.5 * 2^23 trick and the NaN test as a flag, not an early
    exit: LLVM vectorizes the loop (``np.rint`` is a libm call per element: 3x slower on a
    64 x 4096 activation)."""
    bad = False
    for i in range(x.shape[0]):
        v = np.float32(np.float64(x[i]) * inv + zp)
        bad |= v != v
        # exact below 2^22 in magnitude; beyond, the value clamps to lo or hi either way
        r = (v + _ROUND) - _ROUND
        out[i] = min(max(r, lo), hi)
    return not bad


@numba.njit(cache=True, nogil=True, boundscheck=False)
def dequantize_u8(q, zp, scale, out):
    """torch's per-tensor ``dequantize``: ``float32(q - zp) * scale`` (``_common.dequant_scalar``)."""
    for i in range(q.shape[0]):
        out[i] = np.float32(np.int64(q[i]) - zp) * scale
