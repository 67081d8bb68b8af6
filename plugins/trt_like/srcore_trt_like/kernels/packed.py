"""numba kernels around the packed GEMM (``gemm_kernels.py``) for convolutions: the im2col gather
that writes the packed operand ``(blocks, K, 6)`` directly, and the epilogue that turns the GEMM's
pixel-major ``C^T`` into NCHW while adding bias and residual and applying relu.

Column order: ``k = (c * kh + i) * kw + j`` (the weight's ``(O, C * kh * kw)`` order). Column block
``pb`` holds output pixels ``6 pb .. 6 pb + 5`` of the flattened (Ho * Wo) image. The input is first
split into its column-stride phases with zero margins (:func:`split_phases`), so each run of a
block's pixels within one output row reads one contiguous run of a phase row per tap: one masked
16-lane load and store (:func:`srcore_trt_like.simd.vcopy_lanes`), with no bounds checks and no
index tables.

All kernels are ``nogil`` with ranges (channels, blocks or rows) so callers may split them.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from . import epilogue
from .jit import JIT, plain_args
from .simd import prefer_512, vadd, vcopy_lanes, vload, vrelu, vsplat_value, vstore, vtranspose16, vzero_lanes

_ZERO = np.float32(0.0)


def segments(Ho: int, Wo: int) -> np.ndarray:
    """(blocks, S, 4) int32: the runs of output pixels of each column block (6 consecutive pixels of
    the flattened Ho x Wo image) that lie in one output row, as (ho, wo0, lane0, n); unused entries
    have n = 0. S = 2 when Wo >= 6 (a block spans at most two rows)."""
    P = Ho * Wo
    nb = -(-P // 6)
    S = 1 + -(-5 // Wo) if Wo < 6 else 2
    seg = np.zeros((nb, S, 4), np.int32)
    for pb in range(nb):
        p, s, lane = 6 * pb, 0, 0
        while lane < 6 and p < P:
            ho, wo = divmod(p, Wo)
            n = min(6 - lane, Wo - wo, P - p)
            seg[pb, s] = (ho, wo, lane, n)
            s, lane, p = s + 1, lane + n, p + n
    return seg


def tap_offsets(kw, sw, pw, dw, pad, L) -> np.ndarray:
    """(kw,) int64: where tap column j of output column 0 reads in a phase-split row (see
    :func:`split_phases`): ``r_j * L + pad + (off_j - r_j) // sw`` for off_j = j * dw - pw, r_j = off_j mod sw."""
    off = np.arange(kw) * dw - pw
    r = off % sw
    return (r * L + pad + (off - r) // sw).astype(np.int64)


@plain_args
@njit(**JIT)
def split_phases(x, n, sw, pad, rows, xph, c0, c1):
    """``xph[c, h, r, pad + q] = x[n, c, h, q * sw + r]``, zeros around (``pad`` each side of every
    phase row), for the input rows h in ``rows`` (the ones some tap reads): every tap row of a
    strided conv becomes a contiguous run, every tap in bounds."""
    prefer_512()
    W = x.shape[3]
    L = xph.shape[3]
    for c in range(c0, c1):
        for h in rows:
            src = x[n, c, h]
            for r in range(sw):
                dst = xph[c, h, r]
                m = (W - r + sw - 1) // sw if r < W else 0
                for q in range(pad):
                    dst[q] = _ZERO
                if sw == 1:
                    for q in range(m):
                        dst[pad + q] = src[q]
                else:
                    for q in range(m):
                        dst[pad + q] = src[q * sw + r]
                for q in range(pad + m, L):
                    dst[q] = _ZERO


@plain_args
@njit(**JIT)
def gather(xph, kh, kw, sh, ph, dh, joff, seg, pb0, pb1, xp, xb0, c0, c1):
    """The packed operand of column blocks [pb0, pb1), channels [c0, c1):
    ``xp[pb - xb0, (c * kh + i) * kw + j, e]`` = the input element tap (i, j) of the block's pixel e
    reads (0 in the padding), from the phase-split input ``xph``. Each run of a block's pixels
    within one output row is one masked 16-lane copy per tap; lanes past the last pixel are zero."""
    prefer_512()
    C, H, R, L = xph.shape
    K = xp.shape[1]
    T = kh * kw
    S = seg.shape[1]
    xf = xp.reshape(-1)
    sf = xph.reshape(-1)
    for pb in range(pb0, pb1):
        blk = (pb - xb0) * K * 6
        used = 0
        for s in range(S):
            ho, wo0, lane0, n = seg[pb, s, 0], seg[pb, s, 1], seg[pb, s, 2], seg[pb, s, 3]
            if n == 0:
                break
            used = lane0 + n
            for c in range(c0, c1):
                for i in range(kh):
                    h = ho * sh - ph + i * dh
                    d = blk + (c * T + i * kw) * 6
                    if h < 0 or h >= H:
                        for j in range(kw):
                            vzero_lanes(xf, d + 6 * j, lane0, n)
                        continue
                    base = (c * H + h) * R * L + wo0
                    for j in range(kw):
                        vcopy_lanes(sf, base + joff[j], xf, d + 6 * j, lane0, n)
        if used < 6:
            for k in range(c0 * T, c1 * T):
                vzero_lanes(xf, blk + 6 * k, used, 6 - used)


@plain_args
@njit(**JIT)
def epilogue_t(cf, c0, ldc, rows, row_len, row_stride, out, n, p0, bias, res, has_res, relu, o0, o1):
    """``out[n, o, p0 + r * row_len + w] = relu?(C^T[r * row_stride + w, o] + bias[o] (+ res))`` for
    rows r < ``rows``, w < ``row_len`` and output channels [o0, o1); C^T is flat from ``cf[c0]`` with
    leading dimension ``ldc``, transposed 16 x 16 at a time in registers; ragged edges element by
    element."""
    O = out.shape[1]
    P = out.shape[2] * out.shape[3]
    of = out.reshape(-1)
    rf = res.reshape(-1)
    obase = n * O * P
    o16 = o0 + (o1 - o0) // 16 * 16
    for r in range(rows):
        q = c0 + r * row_stride * ldc
        p = p0 + r * row_len
        w16 = row_len // 16 * 16
        for w in range(0, w16, 16):
            for ob in range(o0, o16, 16):
                t = vtranspose16(cf, q + w * ldc + ob, ldc)
                for i in range(16):
                    o = ob + i
                    d = obase + o * P + p + w
                    v = vadd(t[i], vsplat_value(bias[o]))
                    if has_res:
                        v = vadd(v, vload(rf, d))
                    if relu:
                        v = vrelu(v)
                    vstore(of, d, v)
            for o in range(o16, o1):
                epilogue.column(cf, q + w * ldc + o, ldc, of, obase + o * P + p + w, 16, bias[o], rf, has_res, relu)
        for o in range(o0, o1):
            epilogue.column(cf, q + w16 * ldc + o, ldc, of, obase + o * P + p + w16, row_len - w16, bias[o], rf,
                             has_res, relu)

