"""numba kernels of the pools (:mod:`srcore_trt_like.conv.pool`): separable windowed max/sum over a
channel range, plane scaling, global and adaptive average.

Per channel, each input row is reduced across the ``kw`` taps into a row of output width (for a
column stride > 1 after splitting the row into its stride phases, so every tap is a contiguous,
vectorised pass), then the output row across the ``kh`` rows. ``nogil`` loops over a channel range.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .jit import JIT

_NEG_INF = np.float32(-np.inf)
_ZERO = np.float32(0.0)


@njit(inline="always", **JIT)
def _valid_range(off, stride, size, n_out):
    """Output indices o in [lo, hi) whose input index o * stride + off lies in [0, size)."""
    lo = 0 if off >= 0 else (-off + stride - 1) // stride
    hi = 0 if size - 1 - off < 0 else (size - 1 - off) // stride + 1
    return lo, max(lo, min(hi, n_out))


@njit(**JIT)
def pool_rows(x, is_max, kh, kw, sh, sw, ph, pw, dh, dw, out, c0, c1):
    """``out[n, c] = reduce over the window`` (max, or the sum for avg pooling), channels [c0, c1);
    windows with no input element give -inf (max) or 0 (sum)."""
    N, C, H, W = x.shape
    Ho, Wo = out.shape[2], out.shape[3]
    init = _NEG_INF if is_max else _ZERO
    wq = (W + sw - 1) // sw
    phases = np.empty((sw, wq), np.float32)
    hrows = np.empty((H, Wo), np.float32)          # each input row reduced across the kw taps
    for n in range(N):
        for c in range(c0, c1):
            for h in range(H):
                src = x[n, c, h]
                if sw == 1:
                    phases[0, :] = src
                elif sw == 2:
                    d0, d1 = phases[0], phases[1]
                    for q in range(W // 2):
                        d0[q] = src[2 * q]
                        d1[q] = src[2 * q + 1]
                    if W % 2:
                        d0[W // 2] = src[W - 1]
                else:
                    for w in range(W):
                        phases[w % sw, w // sw] = src[w]
                acc = hrows[h]
                acc[:] = init
                for j in range(kw):
                    off = j * dw - pw
                    lo, hi = _valid_range(off, sw, W, Wo)
                    r = off % sw
                    seg = phases[r, lo + (off - r) // sw:hi + (off - r) // sw]
                    dst = acc[lo:hi]
                    if is_max:
                        for k in range(hi - lo):
                            v = seg[k]
                            if v > dst[k] or v != v:
                                dst[k] = v
                    else:
                        for k in range(hi - lo):
                            dst[k] += seg[k]
            for ho in range(Ho):
                orow = out[n, c, ho]
                orow[:] = init
                for i in range(kh):
                    h = ho * sh - ph + i * dh
                    if h < 0 or h >= H:
                        continue
                    src = hrows[h]
                    if is_max:
                        for k in range(Wo):
                            v = src[k]
                            if v > orow[k] or v != v:
                                orow[k] = v
                    else:
                        for k in range(Wo):
                            orow[k] += src[k]


@njit(**JIT)
def scale_planes(out, scale, c0, c1):
    """``out[n, c] *= scale`` (an (Ho, Wo) plane of reciprocal divisors) for channels [c0, c1)."""
    N, C, Ho, Wo = out.shape
    for n in range(N):
        for c in range(c0, c1):
            for ho in range(Ho):
                orow, srow = out[n, c, ho], scale[ho]
                for k in range(Wo):
                    orow[k] = orow[k] / srow[k]


@njit(**JIT, inline="always")
def row_sum8(x, r, c, n):
    """The float32 sum of ``x[r, c, :n]`` (indices, not a view: a view per plane costs more than
    a 7x7 plane's sum) in 8 interleaved accumulators added pairwise at the end.
    One running sum is a chain of dependent adds (~4 cycles each) that LLVM keeps scalar without
    reassociation; this way the adds overlap (and the sum is closer to the float64 one)."""
    n8 = n - n % 8
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = _ZERO
    for i in range(0, n8, 8):
        a0 += x[r, c, i]
        a1 += x[r, c, i + 1]
        a2 += x[r, c, i + 2]
        a3 += x[r, c, i + 3]
        a4 += x[r, c, i + 4]
        a5 += x[r, c, i + 5]
        a6 += x[r, c, i + 6]
        a7 += x[r, c, i + 7]
    for i in range(n8, n):
        a0 += x[r, c, i]
    return ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7))


@njit(**JIT)
def global_avg(x, out, c0, c1):
    """``out[n, c, 0, 0] = mean(x[n, c])`` for channels [c0, c1): per plane, float32 sums in 8
    interleaved accumulators added pairwise at the end (as the squeeze-excite pool). One running
    sum is a chain of dependent adds that LLVM keeps scalar without reassociation, and reshaping
    each plane cost more than a 7x7 plane's sum: x is viewed as (N, C, H*W) once. Loaded 2-core
    machine, before -> after: 1x2048x7x7 350 -> 40 us, 1x576x7x7 67 -> 6, 1x16x56x56 93 -> 9."""
    N, C, H, W = x.shape
    HW = H * W
    xf = x.reshape(N, C, HW)
    for n in range(N):
        for c in range(c0, c1):
            out[n, c, 0, 0] = row_sum8(xf, n, c, HW) / np.float32(HW)


@njit(**JIT)
def adaptive_avg(x, h0, h1, w0, w1, out, c0, c1):
    """``out[n, c, i, j] = mean(x[n, c, h0[i]:h1[i], w0[j]:w1[j]])`` for channels [c0, c1)."""
    N, C, H, W = x.shape
    Ho, Wo = out.shape[2], out.shape[3]
    colsum = np.empty(W, np.float32)
    for n in range(N):
        for c in range(c0, c1):
            for i in range(Ho):
                colsum[:] = _ZERO
                for h in range(h0[i], h1[i]):
                    src = x[n, c, h]
                    for k in range(W):
                        colsum[k] += src[k]
                rows = h1[i] - h0[i]
                for j in range(Wo):
                    s = _ZERO
                    for w in range(w0[j], w1[j]):
                        s += colsum[w]
                    out[n, c, i, j] = s / np.float32(rows * (w1[j] - w0[j]))
