"""Max and average pooling with column stride 2 on explicit 16-lane vectors (resnet's 3x3/2 pool after
the stem, DenseNet's and ResNet-D's 2x2/2 average pools).

Per channel, each input row is copied into a row buffer with -inf margins, split into its even
and odd columns by register shuffles, and reduced across the kernel's columns 16 outputs per
vector op (tap j of output w reads phase j % 2 at w + j // 2); each output row is then the max of
its window's reduced rows. NaN propagates like torch's (:func:`srcore_trt_like.simd.vmax_nan`).
The scalar kernel in ``pool.py`` did the phase split element by element: 0.60 ms against
torch's 5.0 on 1x64x112x112.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .jit import JIT
from .simd import vadd, vdeinterleave2, vload, vmax_nan, vsplat_value, vstore, vstore_lanes

_NEG_INF = np.float32(-np.inf)
_ZERO = np.float32(0.0)


@njit(**JIT)
def pool_s2(x, is_max, kh, kw, sh, ph, pw, div, out, c0, c1):
    """``out[n, c] =`` the max (``is_max``) or the sum over the window divided by ``div`` (an
    (Ho, Wo) plane) for column stride 2, dilation 1, channels [c0, c1); windows with no input
    element give -inf (max) or 0 (sum)."""
    # the body inlined once per constant flag: no test in the inner loops (the flag tested there
    # cost the max pool 3-7%)
    if is_max:
        _pool_s2(x, True, kh, kw, sh, ph, pw, div, out, c0, c1)
    else:
        _pool_s2(x, False, kh, kw, sh, ph, pw, div, out, c0, c1)


@njit(inline="always", **JIT)
def _pool_s2(x, is_max, kh, kw, sh, ph, pw, div, out, c0, c1):
    N, C, H, W = x.shape
    Ho, Wo = out.shape[2], out.shape[3]
    init = _NEG_INF if is_max else _ZERO
    nv = (Wo + 15) // 16                     # output vectors per row
    nq = nv + (kw - 1) // 2 + 1              # phase vectors a row needs (tap j reads w + j // 2)
    buf = np.full(32 * nq, init, np.float32)
    ph2 = np.empty(32 * nq, np.float32)      # even columns, then odd
    rows = np.empty((H, 16 * nv), np.float32)
    wc = min(W, 32 * nq - pw)
    vinit = vsplat_value(init)
    for n in range(N):
        for c in range(c0, c1):
            for h in range(H):
                src = x[n, c, h]
                dst = buf[pw:pw + wc]
                for w in range(wc):
                    dst[w] = src[w]
                for j in range(nq):
                    p = vdeinterleave2(buf, 32 * j)
                    vstore(ph2, 16 * j, p[0])
                    vstore(ph2, 16 * (nq + j), p[1])
                r = rows[h]
                for v in range(nv):
                    acc = vinit
                    for j in range(kw):
                        acc = _combine(is_max, acc, vload(ph2, 16 * ((j % 2) * nq + v) + j // 2))
                    vstore(r, 16 * v, acc)
            of = out[n, c].reshape(-1)
            for ho in range(Ho):
                for v in range(nv):
                    acc = vinit
                    for i in range(kh):
                        h = ho * sh - ph + i
                        if 0 <= h < H:
                            acc = _combine(is_max, acc, vload(rows[h], 16 * v))
                    vstore_lanes(of, ho * Wo + 16 * v, acc, min(16, Wo - 16 * v))
                if not is_max:
                    for k in range(Wo):
                        of[ho * Wo + k] /= div[ho, k]


@njit(inline="always", **JIT)
def _combine(is_max, a, b):
    return vmax_nan(a, b) if is_max else vadd(a, b)


@njit(**JIT)
def max_pool_s2(x, kh, kw, sh, ph, pw, out, c0, c1):
    """:func:`pool_s2`'s max."""
    pool_s2(x, True, kh, kw, sh, ph, pw, np.ones((1, 1), np.float32), out, c0, c1)


@njit(**JIT)
def max_pool_blocked(x, kh, kw, sh, sw, ph, pw, out, blocked_out, C, Ho, Wo, lanes):
    """Max pool of an NCHW16c tensor ``x`` (N, CB, H, W, 16): 16 channels a vector op, any stride.
    ``out`` is flat: (N, CB, Ho, Wo, 16) when ``blocked_out``, else the C channels' NCHW planes
    (through ``lanes``, 16 floats). Windows with no input element give -inf; NaN as torch's."""
    N, CB, H, W = x.shape[0], x.shape[1], x.shape[2], x.shape[3]
    xf = x.reshape(-1)
    ninf = vsplat_value(_NEG_INF)
    for n in range(N):
        for cb in range(CB):
            base = (n * CB + cb) * H
            for ho in range(Ho):
                h0 = ho * sh - ph
                i0, i1 = max(0, -h0), min(kh, H - h0)
                for wo in range(Wo):
                    w0 = wo * sw - pw
                    j0, j1 = max(0, -w0), min(kw, W - w0)
                    if kh == 3 and kw == 3 and i1 - i0 == 3 and j1 - j0 == 3:
                        # a whole 3x3 window (the stems' pool): straight-line taps, no loop control
                        # (~12 instructions a tap in the loops: 2.9 us for shufflenet's stem pool)
                        r0 = ((base + h0) * W + w0) * 16
                        r1, r2 = r0 + 16 * W, r0 + 32 * W
                        acc = vmax_nan(vmax_nan(vload(xf, r0), vload(xf, r0 + 16)), vload(xf, r0 + 32))
                        acc = vmax_nan(vmax_nan(vmax_nan(acc, vload(xf, r1)), vload(xf, r1 + 16)), vload(xf, r1 + 32))
                        acc = vmax_nan(vmax_nan(vmax_nan(acc, vload(xf, r2)), vload(xf, r2 + 16)), vload(xf, r2 + 32))
                    else:
                        acc = ninf
                        for i in range(i0, i1):
                            row = ((base + h0 + i) * W + w0) * 16
                            for j in range(j0, j1):
                                acc = vmax_nan(acc, vload(xf, row + 16 * j))
                    if blocked_out:
                        vstore(out, (((n * CB + cb) * Ho + ho) * Wo + wo) * 16, acc)
                    else:
                        vstore(lanes, 0, acc)
                        for e in range(min(16, C - 16 * cb)):
                            out[((n * C + 16 * cb + e) * Ho + ho) * Wo + wo] = lanes[e]
