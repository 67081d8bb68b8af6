"""A dense conv writing NCHW16c on the packed-panel SGEMM's register tile (``kernels/sgemm.py``): 6
output pixels of a row x one 16-channel block (two 8-lane vectors) in 12 accumulators; per tap
(input channel, ky, kx) two weight loads and six broadcasts of input values for 12 FMAs, each broadcast
shared by both halves of the block (the 8-lane NCHW16c kernels run each half on its own and broadcast
twice). The input is read through a zero-bordered copy (per call, the calling thread's scratch), so a
tap is one offset from a table. For convs of few input channels (stems), where it is timed beside
``dense_nchw16c`` and its 8-lane twin; bias, relu / relu6 clamp and leaky relu in the stores.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from srcore.plugin import simd_vec as _sv

from .jit import JIT
from .sgemm import _rows

(fptr, vadd, vbcast, vclamp, vfma, vleaky, vload, vsplat, vstore) = (getattr(_sv, n) for n in (
    "fptr", "vadd", "vbcast", "vclamp", "vfma", "vleaky", "vload", "vsplat", "vstore"))

_inline = njit(forceinline=True, nogil=True, error_model="numpy", fastmath={"contract"})


@_inline
def _dput2(po, o, c0, c1, bias0, bias1, lo, hi, slope, leaky, L):
    c0 = vclamp(vadd(c0, bias0), lo, hi)
    c1 = vclamp(vadd(c1, bias1), lo, hi)
    if leaky:
        c0 = vleaky(c0, slope)
        c1 = vleaky(c1, slope)
    vstore(po, o, c0)
    vstore(po, o + L, c1)


@_inline
def _dtile6(px, a, sw, pt, pw, wo, K, po, oo, pb, bo, lo, hi, slope, leaky, L, z):
    """6 output pixels (input offsets ``a + i * sw``) x one 16-channel block: 12 accumulators."""
    c00 = z
    c01 = z
    c10 = z
    c11 = z
    c20 = z
    c21 = z
    c30 = z
    c31 = z
    c40 = z
    c41 = z
    c50 = z
    c51 = z
    a1 = a + 1 * sw
    a2 = a + 2 * sw
    a3 = a + 3 * sw
    a4 = a + 4 * sw
    a5 = a + 5 * sw
    for k in range(K):
        t = pt[k]
        b = wo + k * 2 * L
        b0 = vload(pw, b, z)
        b1 = vload(pw, b + L, z)
        x = vbcast(px, a + t, z)
        c00 = vfma(x, b0, c00)
        c01 = vfma(x, b1, c01)
        x = vbcast(px, a1 + t, z)
        c10 = vfma(x, b0, c10)
        c11 = vfma(x, b1, c11)
        x = vbcast(px, a2 + t, z)
        c20 = vfma(x, b0, c20)
        c21 = vfma(x, b1, c21)
        x = vbcast(px, a3 + t, z)
        c30 = vfma(x, b0, c30)
        c31 = vfma(x, b1, c31)
        x = vbcast(px, a4 + t, z)
        c40 = vfma(x, b0, c40)
        c41 = vfma(x, b1, c41)
        x = vbcast(px, a5 + t, z)
        c50 = vfma(x, b0, c50)
        c51 = vfma(x, b1, c51)
    bias0 = vload(pb, bo, z)
    bias1 = vload(pb, bo + L, z)
    _dput2(po, oo, c00, c01, bias0, bias1, lo, hi, slope, leaky, L)
    _dput2(po, oo + 1 * 2 * L, c10, c11, bias0, bias1, lo, hi, slope, leaky, L)
    _dput2(po, oo + 2 * 2 * L, c20, c21, bias0, bias1, lo, hi, slope, leaky, L)
    _dput2(po, oo + 3 * 2 * L, c30, c31, bias0, bias1, lo, hi, slope, leaky, L)
    _dput2(po, oo + 4 * 2 * L, c40, c41, bias0, bias1, lo, hi, slope, leaky, L)
    _dput2(po, oo + 5 * 2 * L, c50, c51, bias0, bias1, lo, hi, slope, leaky, L)


@_inline
def _dtile4(px, a, sw, pt, pw, wo, K, po, oo, pb, bo, lo, hi, slope, leaky, L, z):
    """4 output pixels (input offsets ``a + i * sw``) x one 16-channel block: 8 accumulators."""
    c00 = z
    c01 = z
    c10 = z
    c11 = z
    c20 = z
    c21 = z
    c30 = z
    c31 = z
    a1 = a + 1 * sw
    a2 = a + 2 * sw
    a3 = a + 3 * sw
    for k in range(K):
        t = pt[k]
        b = wo + k * 2 * L
        b0 = vload(pw, b, z)
        b1 = vload(pw, b + L, z)
        x = vbcast(px, a + t, z)
        c00 = vfma(x, b0, c00)
        c01 = vfma(x, b1, c01)
        x = vbcast(px, a1 + t, z)
        c10 = vfma(x, b0, c10)
        c11 = vfma(x, b1, c11)
        x = vbcast(px, a2 + t, z)
        c20 = vfma(x, b0, c20)
        c21 = vfma(x, b1, c21)
        x = vbcast(px, a3 + t, z)
        c30 = vfma(x, b0, c30)
        c31 = vfma(x, b1, c31)
    bias0 = vload(pb, bo, z)
    bias1 = vload(pb, bo + L, z)
    _dput2(po, oo, c00, c01, bias0, bias1, lo, hi, slope, leaky, L)
    _dput2(po, oo + 1 * 2 * L, c10, c11, bias0, bias1, lo, hi, slope, leaky, L)
    _dput2(po, oo + 2 * 2 * L, c20, c21, bias0, bias1, lo, hi, slope, leaky, L)
    _dput2(po, oo + 3 * 2 * L, c30, c31, bias0, bias1, lo, hi, slope, leaky, L)


@_inline
def _dtile2(px, a, sw, pt, pw, wo, K, po, oo, pb, bo, lo, hi, slope, leaky, L, z):
    """2 output pixels (input offsets ``a + i * sw``) x one 16-channel block: 4 accumulators."""
    c00 = z
    c01 = z
    c10 = z
    c11 = z
    a1 = a + 1 * sw
    for k in range(K):
        t = pt[k]
        b = wo + k * 2 * L
        b0 = vload(pw, b, z)
        b1 = vload(pw, b + L, z)
        x = vbcast(px, a + t, z)
        c00 = vfma(x, b0, c00)
        c01 = vfma(x, b1, c01)
        x = vbcast(px, a1 + t, z)
        c10 = vfma(x, b0, c10)
        c11 = vfma(x, b1, c11)
    bias0 = vload(pb, bo, z)
    bias1 = vload(pb, bo + L, z)
    _dput2(po, oo, c00, c01, bias0, bias1, lo, hi, slope, leaky, L)
    _dput2(po, oo + 1 * 2 * L, c10, c11, bias0, bias1, lo, hi, slope, leaky, L)


@_inline
def _dtile1(px, a, sw, pt, pw, wo, K, po, oo, pb, bo, lo, hi, slope, leaky, L, z):
    """1 output pixels (input offsets ``a + i * sw``) x one 16-channel block: 2 accumulators."""
    c00 = z
    c01 = z
    for k in range(K):
        t = pt[k]
        b = wo + k * 2 * L
        b0 = vload(pw, b, z)
        b1 = vload(pw, b + L, z)
        x = vbcast(px, a + t, z)
        c00 = vfma(x, b0, c00)
        c01 = vfma(x, b1, c01)
    bias0 = vload(pb, bo, z)
    bias1 = vload(pb, bo + L, z)
    _dput2(po, oo, c00, c01, bias0, bias1, lo, hi, slope, leaky, L)


@njit(**JIT)
def pad_into(x, xp, C, H, W, pt, pl, Hp, Wp):
    """One image's NCHW planes into ``xp`` (C, Hp, Wp) at row ``pt``, column ``pl``, zeros around."""
    pad_rows(x, xp, C, H, W, pt, pl, Hp, Wp, 0, Hp)


@njit(**JIT)
def pad_rows(x, xp, C, H, W, pt, pl, Hp, Wp, i0, i1):
    """Padded rows ``i0 <= i < i1`` of :func:`pad_into`'s copy."""
    px, pp = fptr(x), fptr(xp)
    for c in range(C):
        for i in range(i0, i1):
            d = (c * Hp + i) * Wp
            si = i - pt
            if si < 0 or si >= H:
                for j in range(Wp):
                    pp[d + j] = 0.0
                continue
            s = (c * H + si) * W
            for j in range(pl):
                pp[d + j] = 0.0
            for j in range(W):
                pp[d + pl + j] = px[s + j]
            for j in range(pl + W, Wp):
                pp[d + j] = 0.0


@_inline
def _rows_of(xp, wq, taps, out, sh, sw, Ho, Wo, OB, Wp, bias, lo, hi, slope, leaky, L, tag, r0, r1):
    """Output rows ``r0 <= oy < r1`` of every block from the padded copy ``xp``: the same tiles in the same
    order whatever the range."""
    z = vsplat(tag, np.float32(0.0))
    K = taps.shape[0]
    px, pw, po, pb = fptr(xp), fptr(wq), fptr(out), fptr(bias)
    for ob in range(OB):
        wo = ob * K * 2 * L
        for oy in range(r0, r1):
            row = oy * sh * Wp
            ox = 0
            while ox < Wo:
                R = _rows(Wo - ox)
                a = row + ox * sw
                oo = ((ob * Ho + oy) * Wo + ox) * 2 * L
                bo = ob * 2 * L
                if R == 6:
                    _dtile6(px, a, sw, taps, pw, wo, K, po, oo, pb, bo, lo, hi, slope, leaky, L, z)
                elif R == 4:
                    _dtile4(px, a, sw, taps, pw, wo, K, po, oo, pb, bo, lo, hi, slope, leaky, L, z)
                elif R == 2:
                    _dtile2(px, a, sw, taps, pw, wo, K, po, oo, pb, bo, lo, hi, slope, leaky, L, z)
                else:
                    _dtile1(px, a, sw, taps, pw, wo, K, po, oo, pb, bo, lo, hi, slope, leaky, L, z)
                ox += R


@njit(**JIT)
def dense_rows(x, xp, wq, taps, out, C, H, W, pt, pl, Hp, Wp, sh, sw, Ho, Wo, OB, bias, lo, hi, slope, leaky, L,
               tag):
    """One image: ``out`` (OB, Ho, Wo, 16) = act(conv(x) + bias), ``x`` (C, H, W) flat, ``wq`` (OB, K, 16) the
    weight per block and tap, ``taps`` (K,) each tap's offset in the padded copy ``xp`` (C x Hp x Wp)."""
    pad_into(x, xp, C, H, W, pt, pl, Hp, Wp)
    _rows_of(xp, wq, taps, out, sh, sw, Ho, Wo, OB, Wp, bias, lo, hi, slope, leaky, L, tag, 0, Ho)


@njit(**JIT)
def dense_range(x, xp, wq, taps, out, C, H, W, pt, pl, Hp, Wp, sh, sw, Ho, Wo, OB, bias, lo, hi, slope, leaky, L,
                tag, span, r0, r1):
    """Output rows ``r0 <= oy < r1`` of :func:`dense_rows` (every block), the same tiles in the same order:
    a split of an image in row ranges gives its bits (``range_split.py``). Only the padded rows those
    read (``span``: a tap's reach in rows) are written into this part's ``xp``."""
    pad_rows(x, xp, C, H, W, pt, pl, Hp, Wp, r0 * sh, min(Hp, (r1 - 1) * sh + span))
    _rows_of(xp, wq, taps, out, sh, sw, Ho, Wo, OB, Wp, bias, lo, hi, slope, leaky, L, tag, r0, r1)
