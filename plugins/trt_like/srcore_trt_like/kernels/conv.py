"""numba kernels of the GEMM and direct conv tactics: the im2col gather (padding folded in), the
strided 1x1 gather, the in-place epilogue after a GEMM, and the depthwise direct convolution.

All are ``nogil`` and take a range of output rows or channels, so a caller can split a call.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from . import epilogue as _ep
from .activation import apply_span
from .jit import JIT

_ZERO = np.float32(0.0)


@njit(inline="always", **JIT)
def _copy(src, dst):
    """``dst[:] = src`` as a loop over ``range``: numba knows that index is >= 0 and skips its
    negative-index wraparound, so the loop vectorises (10x faster than ``dst[k + shift]``)."""
    for k in range(dst.shape[0]):
        dst[k] = src[k]


@njit(inline="always", **JIT)
def _valid_range(off, stride, size, n_out):
    """Output indices o in [lo, hi) whose input index o * stride + off lies in [0, size)."""
    lo = 0 if off >= 0 else (-off + stride - 1) // stride
    hi = 0 if size - 1 - off < 0 else (size - 1 - off) // stride + 1
    return lo, max(lo, min(hi, n_out))


@njit(**JIT)
def im2col(x, n, kh, kw, sh, sw, ph, pw, dh, dw, ho0, ho1, wo_n, cols, c0, c1):
    """``cols[c, i, j, p] = x[n, c, ho * sh - ph + i * dh, wo * sw - pw + j * dw]`` (0 outside), for
    output rows ``ho`` in [ho0, ho1), p = (ho - ho0) * wo_n + wo and channels c in [c0, c1);
    ``cols`` is (C, kh, kw, P).

    With a column stride ``sw > 1`` the input rows a channel needs are first split into their
    ``sw`` phases (``x[..., q * sw + r]`` at ``[r, q]``), so every tap row is a contiguous copy:
    strided loads do not vectorise, and the split is one pass over the rows instead of ``kw``.
    """
    H, W = x.shape[2], x.shape[3]
    h_lo = max(0, ho0 * sh - ph)
    h_hi = min(H, (ho1 - 1) * sh - ph + (kh - 1) * dh + 1)
    wq = (W + sw - 1) // sw
    phases = np.empty((max(h_hi - h_lo, 0) if sw > 1 else 0, sw, wq), np.float32)
    for c in range(c0, c1):
        if sw > 1:
            for h in range(h_lo, h_hi):
                src, dst = x[n, c, h], phases[h - h_lo]
                if sw == 2:
                    d0, d1 = dst[0], dst[1]
                    for q in range(W // 2):
                        d0[q] = src[2 * q]
                        d1[q] = src[2 * q + 1]
                    if W % 2:
                        d0[W // 2] = src[W - 1]
                else:
                    for w in range(W):
                        dst[w % sw, w // sw] = src[w]
        for i in range(kh):
            for j in range(kw):
                dst = cols[c, i, j]
                off = j * dw - pw
                lo, hi = _valid_range(off, sw, W, wo_n)
                r = off % sw                 # the phase of tap j (Python's modulo: r >= 0)
                shift = (off - r) // sw      # and its offset in phase units
                for ho in range(ho0, ho1):
                    row = dst[(ho - ho0) * wo_n:(ho - ho0 + 1) * wo_n]
                    h = ho * sh - ph + i * dh
                    if h < 0 or h >= H:
                        row[:] = _ZERO
                        continue
                    src = x[n, c, h] if sw == 1 else phases[h - h_lo, r]
                    _copy(src[lo + shift:hi + shift], row[lo:hi])
                    row[:lo] = _ZERO
                    row[hi:] = _ZERO


def gather_plan(H, W, kh, kw, sh, sw, ph, pw, dh, dw, Ho, Wo) -> np.ndarray:
    """(kh * kw, Ho * Wo) uint32 indices into an input plane flattened with one zero appended:
    entry [i * kw + j, ho * Wo + wo] is the element tap (i, j) of output (ho, wo) reads, or H * W
    (the zero) where it falls in the padding. Built once per layer (numpy)."""
    hi = (np.arange(Ho) * sh - ph)[None, :, None] + (np.arange(kh) * dh)[:, None, None]      # (kh, Ho, 1)
    wi = (np.arange(Wo) * sw - pw)[None, :] + (np.arange(kw) * dw)[:, None]                # (kw, Wo)
    h = hi[:, None, :, :]                                                                  # (kh, 1, Ho, 1)
    w = wi[None, :, None, :]                                                               # (1, kw, 1, Wo)
    inside = (h >= 0) & (h < H) & (w >= 0) & (w < W)
    idx = np.where(inside, h * W + w, H * W)
    return np.ascontiguousarray(idx.reshape(kh * kw, Ho * Wo), dtype=np.uint32)


@njit(**JIT)
def im2col_planned(x, n, plan, cols, c0, c1):
    """``cols[c, t, p] = plane_c[plan[t, p]]`` with ``plane_c`` = x[n, c] flattened plus a zero: one
    indexed load per element (vectorised as gathers), for outputs too narrow for row copies to pay.
    Channels [c0, c1)."""
    HW = x.shape[2] * x.shape[3]
    T, P = plan.shape
    plane = np.empty(HW + 1, np.float32)
    plane[HW] = _ZERO
    for c in range(c0, c1):
        _copy(x[n, c].ravel(), plane[:HW])
        for t in range(T):
            dst, ix = cols[c, t], plan[t]
            for p in range(P):
                dst[p] = plane[ix[p]]


@njit(**JIT)
def subsample(x, n, sh, sw, ho_n, wo_n, dst, c0, c1):
    """``dst[c, ho * wo_n + wo] = x[n, c, ho * sh, wo * sw]`` for c in [c0, c1): a strided 1x1 conv's
    GEMM operand."""
    for c in range(c0, c1):
        for ho in range(ho_n):
            src = x[n, c, ho * sh, ::sw]
            row = dst[c, ho * wo_n:(ho + 1) * wo_n]
            for wo in range(wo_n):
                row[wo] = src[wo]


@njit(**JIT)
def epilogue(out, res, has_res, bias, relu, act, slope, n, p0, p1, o0, o1):
    """In place on ``out`` (N, O, P): ``out[n, o, p0:p1] = act(relu?(out + bias (+ res)))``, o in
    [o0, o1); ``act`` an :data:`.activation.CODES` code (0: none), ``slope`` leaky relu's."""
    for o in range(o0, o1):
        orow = out[n, o, p0:p1]
        rrow = res[n, o, p0:p1]
        _ep.row(orow, orow, rrow, bias[o], has_res, relu, p1 - p0)
        if act != 0:
            apply_span(orow, 0, p1 - p0, act, slope)


@njit(**JIT)
def depthwise(x, w, bias, res, has_res, relu, out, sh, sw, ph, pw, dh, dw, o0, o1):
    """Grouped conv with one input channel per group (groups == C, O = C * mult), output channels
    [o0, o1): per output row, one multiply-add pass per tap over the valid columns (no padding
    copy), then the epilogue."""
    N, O, Ho, Wo = out.shape
    C, H, W = x.shape[1], x.shape[2], x.shape[3]
    kh, kw = w.shape[1], w.shape[2]
    mult = O // C
    acc = np.empty(Wo, np.float32)
    for n in range(N):
        for o in range(o0, o1):
            c = o // mult
            for ho in range(Ho):
                acc[:] = _ZERO
                for i in range(kh):
                    h = ho * sh - ph + i * dh
                    if h < 0 or h >= H:
                        continue
                    src = x[n, c, h]
                    for j in range(kw):
                        off = j * dw - pw
                        lo, hi = _valid_range(off, sw, W, Wo)
                        wt = w[o, i, j]
                        if sw == 1:
                            for wo in range(lo, hi):
                                acc[wo] += wt * src[wo + off]
                        else:
                            for wo in range(lo, hi):
                                acc[wo] += wt * src[wo * sw + off]
                _ep.row(acc, out[n, o, ho], res[n, o, ho], bias[o], has_res, relu, Wo)


@njit(**JIT)
def depthwise_channels_last(x, wt, bias, res, has_res, relu, out, sh, sw, ph, pw, dh, dw):
    """The depthwise conv of :func:`depthwise` vectorized over channels instead of output columns:
    per image the input is packed once, padded, to ``(Hp, Wp, O)`` (channel ``o`` holds input
    channel ``o // mult``), then each tap of an output row is one multiply-add over the contiguous
    channels of each pixel (``wt`` is (KH, KW, O)). Mobile nets' late layers have 7x7 or 14x14
    planes and hundreds of channels: rows too short for a column loop, channels long enough.
    The epilogue writes the row back to NCHW from the small (Wo, O) accumulator."""
    N, O, Ho, Wo = out.shape
    C, H, W = x.shape[1], x.shape[2], x.shape[3]
    KH, KW = wt.shape[0], wt.shape[1]
    mult = O // C
    Hp, Wp = H + 2 * ph, W + 2 * pw
    xt = np.empty((Hp, Wp, O), np.float32)      # the border zeroed once; the interior rewritten per image
    xt[:ph] = _ZERO
    xt[ph + H:] = _ZERO
    xt[:, :pw] = _ZERO
    xt[:, pw + W:] = _ZERO
    acc = np.empty((Wo, O), np.float32)
    for n in range(N):
        for h in range(H):
            drow = xt[h + ph]
            for o in range(O):     # contiguous reads of the input row; the writes stay in one packed row
                src = x[n, o // mult, h]
                for w in range(W):
                    drow[w + pw, o] = src[w]
        for ho in range(Ho):
            for wo in range(Wo):
                a = acc[wo]
                for o in range(O):
                    a[o] = bias[o]
            # two pixels at a time, every tap: each weight vector loaded once for both
            for wo in range(0, Wo - 1, 2):
                a, b = acc[wo], acc[wo + 1]
                for i in range(KH):
                    r = ho * sh + i * dh
                    for j in range(KW):
                        wrow = wt[i, j]
                        s0 = xt[r, wo * sw + j * dw]
                        s1 = xt[r, (wo + 1) * sw + j * dw]
                        for o in range(O):
                            a[o] += wrow[o] * s0[o]
                            b[o] += wrow[o] * s1[o]
            if Wo % 2:
                a = acc[Wo - 1]
                for i in range(KH):
                    r = ho * sh + i * dh
                    for j in range(KW):
                        wrow = wt[i, j]
                        src = xt[r, (Wo - 1) * sw + j * dw]
                        for o in range(O):
                            a[o] += wrow[o] * src[o]
            for o in range(O):
                orow = out[n, o, ho]
                for wo in range(Wo):
                    z = acc[wo, o]
                    if has_res:
                        z += res[n, o, ho, wo]
                    if relu and z < _ZERO:
                        z = _ZERO
                    orow[wo] = z
