"""Channel-blocked explicit-SIMD float32 depthwise convolution: one vector holds 16 channels of
one pixel (ONNX Runtime's NCHWc layout), inside a kernel that takes and returns NCHW.

The pixel-blocked kernel (:mod:`.depthwise`) puts a row of output pixels in a vector, so a 7x7
plane fills 7 of 16 lanes and a 14x14 one 14; here every lane is busy at any plane width, and a
stride-2 tap is a plain vector load (no phase split). Per block of 16 channels the input planes are
transposed into a padded ``(Hp, Wp, 16)`` buffer (16x16 transposes in registers: 4 rounds of lane
interleaves, :func:`_t16`; zeroed once per call, only the interior rewritten), 8 output pixels of a
row are held in registers (per tap one weight vector, 8 loads, 8 FMAs; a row's last block overlaps
the one before), their vectors go to a small pixel-major buffer, and that is transposed back to the
NCHW planes with bias (the accumulators' start), residual, leaky relu, clamp and hardswish /
hardsigmoid (torch's float32 formulas) in the stores. Channels past the last full block read zeros
and are not stored. The transposes cost about a third of a cycle per element, so on large planes
with few taps the pixel-blocked kernel is faster: callers time both on the real shape.

16 lanes only (AVX-512; on a narrower CPU LLVM splits each vector in two, still exact); one input
channel per output channel (no channel multiplier). Work is split by channel blocks.
"""
from __future__ import annotations

import math
import threading

import numba
import numpy as np

from ..errors import ShapeError
from ._jit import helper, plain_args
from .depthwise import check_args, finish, out_hw
from . import nchwc
from .direct import _JIT, SerialTasks, _tag, run_bound
from .simd import fptr, vfma, vload, vload_n, vsplat, vstore, vstore_n, vzip_hi, vzip_lo

#: channels per block (the vector's lanes)
LANES = 16
#: output pixels of a row per register block
SLOTS = 8


@helper
def _round(r):
    return (vzip_lo(r[0], r[8]), vzip_hi(r[0], r[8]), vzip_lo(r[1], r[9]), vzip_hi(r[1], r[9]),
            vzip_lo(r[2], r[10]), vzip_hi(r[2], r[10]), vzip_lo(r[3], r[11]), vzip_hi(r[3], r[11]),
            vzip_lo(r[4], r[12]), vzip_hi(r[4], r[12]), vzip_lo(r[5], r[13]), vzip_hi(r[5], r[13]),
            vzip_lo(r[6], r[14]), vzip_hi(r[6], r[14]), vzip_lo(r[7], r[15]), vzip_hi(r[7], r[15]))


@helper
def _t16(r):
    """The 16x16 transpose of 16 vectors (row ``i`` lane ``j`` -> row ``j`` lane ``i``): four rounds
    of interleaving row ``i`` with row ``i + 8`` (64 shuffles)."""
    return _round(_round(_round(_round(r))))


@helper
def _rows(p, src, step, m, cnt, z):
    """16 vectors: ``p[src + l * step:][:cnt]`` for rows ``l < m`` (masked), zeros for the rest."""
    return (vload_n(p, src, cnt, z), vload_n(p, src + step, cnt, z) if m > 1 else z,
            vload_n(p, src + 2 * step, cnt, z) if m > 2 else z, vload_n(p, src + 3 * step, cnt, z) if m > 3 else z,
            vload_n(p, src + 4 * step, cnt, z) if m > 4 else z, vload_n(p, src + 5 * step, cnt, z) if m > 5 else z,
            vload_n(p, src + 6 * step, cnt, z) if m > 6 else z, vload_n(p, src + 7 * step, cnt, z) if m > 7 else z,
            vload_n(p, src + 8 * step, cnt, z) if m > 8 else z, vload_n(p, src + 9 * step, cnt, z) if m > 9 else z,
            vload_n(p, src + 10 * step, cnt, z) if m > 10 else z,
            vload_n(p, src + 11 * step, cnt, z) if m > 11 else z,
            vload_n(p, src + 12 * step, cnt, z) if m > 12 else z,
            vload_n(p, src + 13 * step, cnt, z) if m > 13 else z,
            vload_n(p, src + 14 * step, cnt, z) if m > 14 else z,
            vload_n(p, src + 15 * step, cnt, z) if m > 15 else z)


@helper
def _put16(p, dst, t):
    """The 16 vectors of ``t`` to ``p[dst:dst + 256]``, one after another."""
    vstore(p, dst, t[0])
    vstore(p, dst + 16, t[1])
    vstore(p, dst + 32, t[2])
    vstore(p, dst + 48, t[3])
    vstore(p, dst + 64, t[4])
    vstore(p, dst + 80, t[5])
    vstore(p, dst + 96, t[6])
    vstore(p, dst + 112, t[7])
    vstore(p, dst + 128, t[8])
    vstore(p, dst + 144, t[9])
    vstore(p, dst + 160, t[10])
    vstore(p, dst + 176, t[11])
    vstore(p, dst + 192, t[12])
    vstore(p, dst + 208, t[13])
    vstore(p, dst + 224, t[14])
    vstore(p, dst + 240, t[15])


@helper
def _put8(p, px, a):
    """The 8 slot vectors ``a`` to pixels ``px`` of the pixel-major buffer ``p``."""
    vstore(p, px[0] * LANES, a[0])
    vstore(p, px[1] * LANES, a[1])
    vstore(p, px[2] * LANES, a[2])
    vstore(p, px[3] * LANES, a[3])
    vstore(p, px[4] * LANES, a[4])
    vstore(p, px[5] * LANES, a[5])
    vstore(p, px[6] * LANES, a[6])
    vstore(p, px[7] * LANES, a[7])


@helper
def _row_at(hp, xblk, ring, pt, H, Wp):
    """Where padded row ``hp`` starts in the input buffer: the whole padded plane, or (``xblk``) the
    ring of rows, with the zero row (index ``ring``) for rows outside the plane."""
    if not xblk:
        return hp * Wp * LANES
    if hp < pt or hp >= H + pt:
        return ring * Wp * LANES
    return (hp % ring) * Wp * LANES


@helper
def _fin8(p, o, a, leaky, slope, lo, hi, act, c3, c6):
    """The 8 slot vectors ``a`` (8 consecutive pixels) to ``p[o:]``, NCHW16c, the epilogue in the stores."""
    vstore(p, o, finish(a[0], p, o, LANES, False, leaky, slope, lo, hi, act, c3, c6))
    vstore(p, o + 16, finish(a[1], p, o, LANES, False, leaky, slope, lo, hi, act, c3, c6))
    vstore(p, o + 32, finish(a[2], p, o, LANES, False, leaky, slope, lo, hi, act, c3, c6))
    vstore(p, o + 48, finish(a[3], p, o, LANES, False, leaky, slope, lo, hi, act, c3, c6))
    vstore(p, o + 64, finish(a[4], p, o, LANES, False, leaky, slope, lo, hi, act, c3, c6))
    vstore(p, o + 80, finish(a[5], p, o, LANES, False, leaky, slope, lo, hi, act, c3, c6))
    vstore(p, o + 96, finish(a[6], p, o, LANES, False, leaky, slope, lo, hi, act, c3, c6))
    vstore(p, o + 112, finish(a[7], p, o, LANES, False, leaky, slope, lo, hi, act, c3, c6))


@helper
def _row3(p, r, w0, w1, w2, a0, a1, a2, a3, a4, a5, a6, a7):
    """One kernel row of width 3 for 8 consecutive output pixels: the 10 input vectors at ``p[r:]``
    each loaded once, 24 FMAs."""
    v = vload(p, r, w0)
    a0 = vfma(v, w0, a0)
    v = vload(p, r + 16, w0)
    a0, a1 = vfma(v, w1, a0), vfma(v, w0, a1)
    v = vload(p, r + 32, w0)
    a0, a1, a2 = vfma(v, w2, a0), vfma(v, w1, a1), vfma(v, w0, a2)
    v = vload(p, r + 48, w0)
    a1, a2, a3 = vfma(v, w2, a1), vfma(v, w1, a2), vfma(v, w0, a3)
    v = vload(p, r + 64, w0)
    a2, a3, a4 = vfma(v, w2, a2), vfma(v, w1, a3), vfma(v, w0, a4)
    v = vload(p, r + 80, w0)
    a3, a4, a5 = vfma(v, w2, a3), vfma(v, w1, a4), vfma(v, w0, a5)
    v = vload(p, r + 96, w0)
    a4, a5, a6 = vfma(v, w2, a4), vfma(v, w1, a5), vfma(v, w0, a6)
    v = vload(p, r + 112, w0)
    a5, a6, a7 = vfma(v, w2, a5), vfma(v, w1, a6), vfma(v, w0, a7)
    v = vload(p, r + 128, w0)
    a6, a7 = vfma(v, w2, a6), vfma(v, w1, a7)
    v = vload(p, r + 144, w0)
    a7 = vfma(v, w2, a7)
    return a0, a1, a2, a3, a4, a5, a6, a7


@helper
def _row5(p, r, w0, w1, w2, w3, w4, a0, a1, a2, a3, a4, a5, a6, a7):
    """One kernel row of width 5 for 8 consecutive output pixels: 12 input vectors, 40 FMAs."""
    v = vload(p, r, w0)
    a0 = vfma(v, w0, a0)
    v = vload(p, r + 16, w0)
    a0, a1 = vfma(v, w1, a0), vfma(v, w0, a1)
    v = vload(p, r + 32, w0)
    a0, a1, a2 = vfma(v, w2, a0), vfma(v, w1, a1), vfma(v, w0, a2)
    v = vload(p, r + 48, w0)
    a0, a1, a2, a3 = vfma(v, w3, a0), vfma(v, w2, a1), vfma(v, w1, a2), vfma(v, w0, a3)
    v = vload(p, r + 64, w0)
    a0, a1, a2, a3, a4 = vfma(v, w4, a0), vfma(v, w3, a1), vfma(v, w2, a2), vfma(v, w1, a3), vfma(v, w0, a4)
    v = vload(p, r + 80, w0)
    a1, a2, a3, a4, a5 = vfma(v, w4, a1), vfma(v, w3, a2), vfma(v, w2, a3), vfma(v, w1, a4), vfma(v, w0, a5)
    v = vload(p, r + 96, w0)
    a2, a3, a4, a5, a6 = vfma(v, w4, a2), vfma(v, w3, a3), vfma(v, w2, a4), vfma(v, w1, a5), vfma(v, w0, a6)
    v = vload(p, r + 112, w0)
    a3, a4, a5, a6, a7 = vfma(v, w4, a3), vfma(v, w3, a4), vfma(v, w2, a5), vfma(v, w1, a6), vfma(v, w0, a7)
    v = vload(p, r + 128, w0)
    a4, a5, a6, a7 = vfma(v, w4, a4), vfma(v, w3, a5), vfma(v, w2, a6), vfma(v, w1, a7)
    v = vload(p, r + 144, w0)
    a5, a6, a7 = vfma(v, w4, a5), vfma(v, w3, a6), vfma(v, w2, a7)
    v = vload(p, r + 160, w0)
    a6, a7 = vfma(v, w4, a6), vfma(v, w3, a7)
    v = vload(p, r + 176, w0)
    a7 = vfma(v, w4, a7)
    return a0, a1, a2, a3, a4, a5, a6, a7


@helper
def _row3s2(p, r, w0, w1, w2, a0, a1, a2, a3, a4, a5, a6, a7):
    """One kernel row of width 3 for 8 output pixels at stride 2: 17 input vectors, 24 FMAs."""
    v = vload(p, r, w0)
    a0 = vfma(v, w0, a0)
    v = vload(p, r + 16, w0)
    a0 = vfma(v, w1, a0)
    v = vload(p, r + 32, w0)
    a0, a1 = vfma(v, w2, a0), vfma(v, w0, a1)
    v = vload(p, r + 48, w0)
    a1 = vfma(v, w1, a1)
    v = vload(p, r + 64, w0)
    a1, a2 = vfma(v, w2, a1), vfma(v, w0, a2)
    v = vload(p, r + 80, w0)
    a2 = vfma(v, w1, a2)
    v = vload(p, r + 96, w0)
    a2, a3 = vfma(v, w2, a2), vfma(v, w0, a3)
    v = vload(p, r + 112, w0)
    a3 = vfma(v, w1, a3)
    v = vload(p, r + 128, w0)
    a3, a4 = vfma(v, w2, a3), vfma(v, w0, a4)
    v = vload(p, r + 144, w0)
    a4 = vfma(v, w1, a4)
    v = vload(p, r + 160, w0)
    a4, a5 = vfma(v, w2, a4), vfma(v, w0, a5)
    v = vload(p, r + 176, w0)
    a5 = vfma(v, w1, a5)
    v = vload(p, r + 192, w0)
    a5, a6 = vfma(v, w2, a5), vfma(v, w0, a6)
    v = vload(p, r + 208, w0)
    a6 = vfma(v, w1, a6)
    v = vload(p, r + 224, w0)
    a6, a7 = vfma(v, w2, a6), vfma(v, w0, a7)
    v = vload(p, r + 240, w0)
    a7 = vfma(v, w1, a7)
    v = vload(p, r + 256, w0)
    a7 = vfma(v, w2, a7)
    return a0, a1, a2, a3, a4, a5, a6, a7


@helper
def _row5s2(p, r, w0, w1, w2, w3, w4, a0, a1, a2, a3, a4, a5, a6, a7):
    """One kernel row of width 5 for 8 output pixels at stride 2: 19 input vectors, 40 FMAs."""
    v = vload(p, r, w0)
    a0 = vfma(v, w0, a0)
    v = vload(p, r + 16, w0)
    a0 = vfma(v, w1, a0)
    v = vload(p, r + 32, w0)
    a0, a1 = vfma(v, w2, a0), vfma(v, w0, a1)
    v = vload(p, r + 48, w0)
    a0, a1 = vfma(v, w3, a0), vfma(v, w1, a1)
    v = vload(p, r + 64, w0)
    a0, a1, a2 = vfma(v, w4, a0), vfma(v, w2, a1), vfma(v, w0, a2)
    v = vload(p, r + 80, w0)
    a1, a2 = vfma(v, w3, a1), vfma(v, w1, a2)
    v = vload(p, r + 96, w0)
    a1, a2, a3 = vfma(v, w4, a1), vfma(v, w2, a2), vfma(v, w0, a3)
    v = vload(p, r + 112, w0)
    a2, a3 = vfma(v, w3, a2), vfma(v, w1, a3)
    v = vload(p, r + 128, w0)
    a2, a3, a4 = vfma(v, w4, a2), vfma(v, w2, a3), vfma(v, w0, a4)
    v = vload(p, r + 144, w0)
    a3, a4 = vfma(v, w3, a3), vfma(v, w1, a4)
    v = vload(p, r + 160, w0)
    a3, a4, a5 = vfma(v, w4, a3), vfma(v, w2, a4), vfma(v, w0, a5)
    v = vload(p, r + 176, w0)
    a4, a5 = vfma(v, w3, a4), vfma(v, w1, a5)
    v = vload(p, r + 192, w0)
    a4, a5, a6 = vfma(v, w4, a4), vfma(v, w2, a5), vfma(v, w0, a6)
    v = vload(p, r + 208, w0)
    a5, a6 = vfma(v, w3, a5), vfma(v, w1, a6)
    v = vload(p, r + 224, w0)
    a5, a6, a7 = vfma(v, w4, a5), vfma(v, w2, a6), vfma(v, w0, a7)
    v = vload(p, r + 240, w0)
    a6, a7 = vfma(v, w3, a6), vfma(v, w1, a7)
    v = vload(p, r + 256, w0)
    a6, a7 = vfma(v, w4, a6), vfma(v, w2, a7)
    v = vload(p, r + 272, w0)
    a7 = vfma(v, w3, a7)
    v = vload(p, r + 288, w0)
    a7 = vfma(v, w4, a7)
    return a0, a1, a2, a3, a4, a5, a6, a7


@plain_args
@numba.njit(**_JIT)
def dwb_tasks(x, C, H, W, sh, sw, dh, dw, pt, pl, Hp, Wp, KH, KW, wc, bc, out, res, has_res, leaky, slope, lo, hi,
              act, Ho, Wo, tag, xblk, oblk, xb, tb, n, k0, k1):
    """Channel blocks ``k0 <= k < k1`` of image ``n``, every output row (:func:`dwb_range`)."""
    dwb_range(x, C, H, W, sh, sw, dh, dw, pt, pl, Hp, Wp, KH, KW, wc, bc, out, res, has_res, leaky, slope, lo, hi,
              act, Ho, Wo, tag, xblk, oblk, xb, tb, n, k0, k1, 0, Ho)


@numba.njit(**_JIT)
def dwb_images(x, C, H, W, sh, sw, dh, dw, pt, pl, Hp, Wp, KH, KW, wc, bc, out, res, has_res, leaky, slope, lo, hi,
               act, Ho, Wo, tag, xblk, oblk, xb, tb, n0, n1, k0, k1):
    """:func:`dwb_tasks` for images ``n0 <= n < n1`` (a batch in one call: :class:`.direct.SerialTasks`)."""
    for n in range(n0, n1):
        dwb_range(x, C, H, W, sh, sw, dh, dw, pt, pl, Hp, Wp, KH, KW, wc, bc, out, res, has_res, leaky, slope, lo,
                  hi, act, Ho, Wo, tag, xblk, oblk, xb, tb, n, k0, k1, 0, Ho)


@plain_args
@numba.njit(**_JIT)
def dwb_range(x, C, H, W, sh, sw, dh, dw, pt, pl, Hp, Wp, KH, KW, wc, bc, out, res, has_res, leaky, slope, lo, hi,
              act, Ho, Wo, tag, xblk, oblk, xb, tb, n, k0, k1, h0, h1):
    """Output rows ``h0 <= ho < h1`` (with ``xblk``: a thread of a split by rows reads only the input
    rows they need; without, the whole plane is transposed in) of channel blocks ``k0 <= k < k1``
    (channels ``16k .. 16k + 15``) of image ``n`` of ``x``
    ((N * C * H * W,), or with ``xblk`` NCHW16c: (N * blocks * H * W * 16,)); ``wc`` (blocks, KH * KW,
    16) and ``bc`` (blocks * 16,) flat, zero past C; ``out``/``res`` (N * C * Ho * Wo,), or with
    ``oblk`` NCHW16c (every lane of the last block stored: the lanes past C hold the epilogue of 0).
    ``xb``, ``tb``: the padded input and pixel-major output buffers (:meth:`BlockedDepthwiseConv.buffers`:
    kept per thread; only ``xb``'s interior is ever written, so its border stays zero)."""
    P = Ho * Wo
    ring = (KH - 1) * dh + 1 + sh   # padded rows in the ring (xblk; the zero row after them)
    # straight into an NCHW16c output: where no slot spills past its row and no residual is read
    # (a row's last block overlaps the one before; the residual may be the output's buffer)
    direct = oblk and not has_res and Wo >= SLOTS
    px, pb, pt_, pw, pbias, pout, pres = fptr(x), fptr(xb), fptr(tb), fptr(wc), fptr(bc), fptr(out), fptr(res)
    z = vsplat(tag, 0.0)
    c3, c6 = vsplat(tag, 3.0), vsplat(tag, 6.0)
    nt = KH * KW
    HW = H * W
    reuse = (sw == 1 or sw == 2) and dw == 1 and (KW == 3 or KW == 5)
    nb = -(-C // LANES)
    for k in range(k0, k1):
        c0 = k * LANES
        m = min(LANES, C - c0)
        # NCHW16c in: already pixel-major; each row is copied into a ring of padded rows just before
        # the first output row that reads it (the ring stays in L1; a whole padded plane of a
        # 112x112 input passed L2 and cost more than the taps); rows above and below the plane
        # read a zero row. NCHW in: the plane transposed into the whole padded buffer first.
        src = (n * nb + k) * HW * LANES
        filled = max(0, h0 * sh - pt)   # the first input row the band reads (the ring holds the rest)
        for p0 in range(0, HW if not xblk else 0, LANES):   # 16 pixels of the flat plane at a time
            cnt = min(LANES, HW - p0)
            t = _t16(_rows(px, (n * C + c0) * HW + p0, HW, m, cnt, z))
            h, w = p0 // W, p0 % W
            if cnt == LANES and w + LANES <= W:   # inside one row: 16 neighbours
                _put16(pb, ((h + pt) * Wp + pl + w) * LANES, t)
                continue
            for j in range(cnt):   # (a switch on j: the tuple stays in registers)
                vstore(pb, ((h + pt) * Wp + pl + w) * LANES, t[j])
                w += 1
                if w == W:
                    w = 0
                    h += 1
        bv = vload(pbias, c0, z)
        wk = k * nt * LANES
        for ho in range(h0, h1):
            if xblk:
                need = min(H, ho * sh + (KH - 1) * dh + 1 - pt)
                while filled < need:
                    d = (((filled + pt) % ring) * Wp + pl) * LANES
                    s = src + filled * W * LANES
                    for j in range(0, W * LANES, LANES):
                        vstore(pb, d + j, vload(px, s + j, z))
                    filled += 1
            for jb in range(0, Wo, SLOTS):
                j0 = max(0, min(jb, Wo - SLOTS))
                # the 8 slots' pixels (clamped to the row: a row narrower than the block repeats its last)
                w1, w2, w3 = min(j0 + 1, Wo - 1), min(j0 + 2, Wo - 1), min(j0 + 3, Wo - 1)
                w4, w5, w6, w7 = min(j0 + 4, Wo - 1), min(j0 + 5, Wo - 1), min(j0 + 6, Wo - 1), min(j0 + 7, Wo - 1)
                i0 = j0 * sw * LANES
                i1, i2, i3 = w1 * sw * LANES, w2 * sw * LANES, w3 * sw * LANES
                i4, i5 = w4 * sw * LANES, w5 * sw * LANES
                i6, i7 = w6 * sw * LANES, w7 * sw * LANES
                a0, a1, a2, a3, a4, a5, a6, a7 = bv, bv, bv, bv, bv, bv, bv, bv
                if reuse:   # consecutive slots: each input vector loaded once for every tap of the row it meets
                    for ky in range(KH):
                        r = _row_at(ho * sh + ky * dh, xblk, ring, pt, H, Wp) + i0
                        wr = wk + ky * KW * LANES
                        w0, w1, w2 = vload(pw, wr, z), vload(pw, wr + 16, z), vload(pw, wr + 32, z)
                        if KW == 3 and sw == 1:
                            a0, a1, a2, a3, a4, a5, a6, a7 = _row3(pb, r, w0, w1, w2, a0, a1, a2, a3, a4, a5, a6, a7)
                        elif KW == 3:
                            a0, a1, a2, a3, a4, a5, a6, a7 = _row3s2(pb, r, w0, w1, w2, a0, a1, a2, a3, a4, a5, a6,
                                                                     a7)
                        elif sw == 1:
                            a0, a1, a2, a3, a4, a5, a6, a7 = _row5(pb, r, w0, w1, w2, vload(pw, wr + 48, z),
                                                                   vload(pw, wr + 64, z), a0, a1, a2, a3, a4, a5, a6,
                                                                   a7)
                        else:
                            a0, a1, a2, a3, a4, a5, a6, a7 = _row5s2(pb, r, w0, w1, w2, vload(pw, wr + 48, z),
                                                                     vload(pw, wr + 64, z), a0, a1, a2, a3, a4, a5,
                                                                     a6, a7)
                    ob = ho * Wo + j0   # (slots past the row land on later rows' pixels, rewritten after)
                    if direct:
                        _fin8(pout, ((n * nb + k) * P + ob) * LANES, (a0, a1, a2, a3, a4, a5, a6, a7), leaky, slope,
                              lo, hi, act, c3, c6)
                        continue
                    _put8(pt_, (ob, ob + 1, ob + 2, ob + 3, ob + 4, ob + 5, ob + 6, ob + 7),
                          (a0, a1, a2, a3, a4, a5, a6, a7))
                    continue
                for ky in range(KH):
                    rb = _row_at(ho * sh + ky * dh, xblk, ring, pt, H, Wp)
                    for kx in range(KW):
                        off = rb + kx * dw * LANES
                        wv = vload(pw, wk + (ky * KW + kx) * LANES, z)
                        a0 = vfma(vload(pb, i0 + off, z), wv, a0)
                        a1 = vfma(vload(pb, i1 + off, z), wv, a1)
                        a2 = vfma(vload(pb, i2 + off, z), wv, a2)
                        a3 = vfma(vload(pb, i3 + off, z), wv, a3)
                        a4 = vfma(vload(pb, i4 + off, z), wv, a4)
                        a5 = vfma(vload(pb, i5 + off, z), wv, a5)
                        a6 = vfma(vload(pb, i6 + off, z), wv, a6)
                        a7 = vfma(vload(pb, i7 + off, z), wv, a7)
                ob = ho * Wo
                if direct:
                    _fin8(pout, ((n * nb + k) * P + ob + j0) * LANES, (a0, a1, a2, a3, a4, a5, a6, a7), leaky, slope,
                          lo, hi, act, c3, c6)
                    continue
                _put8(pt_, (ob + j0, ob + w1, ob + w2, ob + w3, ob + w4, ob + w5, ob + w6, ob + w7),
                      (a0, a1, a2, a3, a4, a5, a6, a7))
        if direct:
            continue
        if oblk:   # NCHW16c out: the pixel vectors as they are, the epilogue in the stores
            ob = (n * nb + k) * P * LANES
            for p in range(h0 * Wo * LANES, h1 * Wo * LANES, LANES):
                vstore(pout, ob + p, finish(vload(pt_, p, z), pres, ob + p, LANES, has_res, leaky, slope, lo, hi,
                                            act, c3, c6))
            continue
        # back to the NCHW planes, 16 pixels of 16 channels at a time, the epilogue in the stores
        for p0 in range(h0 * Wo, h1 * Wo, LANES):
            cnt = min(LANES, h1 * Wo - p0)
            t = _t16(_rows(pt_, p0 * LANES, LANES, LANES, LANES, z))
            for l in range(m):
                oi = (n * C + c0 + l) * P + p0
                v = finish(t[l], pres, oi, cnt, has_res, leaky, slope, lo, hi, act, c3, c6)
                if cnt == LANES:
                    vstore(pout, oi, v)
                else:
                    vstore_n(pout, oi, v, cnt)


class BlockedDepthwiseConv:
    """A depthwise conv (one input channel per output channel) with fixed weights on the
    channel-blocked kernel: ``conv(x, out, residual=None, threads=1)`` writes
    ``act(clamp(leaky(conv(x) + bias (+ residual)), lo, hi))`` into ``out`` (C-contiguous float32
    (N, C, Ho, Wo)); the arguments as :class:`.depthwise.SimdDepthwiseConv`'s. ``x`` may be any
    float32 (N, C, H, W) view. With ``blocked_in`` / ``blocked_out`` the input / the output (and
    residual) are in the NCHW16c layout instead (:mod:`.nchwc`: no transpose on that side)."""

    def __init__(self, weight, bias, stride=1, pads=0, dilation=1, lo=-math.inf, hi=math.inf, negative_slope=None,
                 activation=None, blocked_in=False, blocked_out=False):
        w, self.stride, self.dilation, self.pads, self.act = check_args("BlockedDepthwiseConv", "C", weight, stride,
                                                                        pads, dilation, activation)
        self.C, _, kh, kw = w.shape
        self.kernel = (kh, kw)
        self.w = w
        self.b = (np.zeros(self.C, np.float32) if bias is None
                  else np.ascontiguousarray(np.asarray(bias, np.float32).reshape(self.C)))
        self.lo, self.hi = float(lo), float(hi)
        self.leaky = negative_slope is not None
        self.slope = np.float32(negative_slope if self.leaky else 1.0)
        self.tag = _tag(LANES)
        self._none = np.zeros(1, np.float32)
        self.blocked_in, self.blocked_out = bool(blocked_in), bool(blocked_out)
        self._local = threading.local()
        self._bound = nchwc.LastBind()

    def buffers(self, rows: int, Wp: int, P: int) -> tuple[np.ndarray, np.ndarray]:
        """This thread's zeroed padded-input buffer (``rows`` padded rows) and pixel-major output
        buffer for these sizes, made once (zeroing a 114x114x16 buffer every call cost ~20 us of a
        65 us layer)."""
        key = (rows, Wp, P)
        got = getattr(self._local, "bufs", None)
        if got is None or got[0] != key:
            # (slack: a row's block of 8 slots may read and write past a narrow plane's end)
            got = (key, np.zeros((rows * Wp + 3 * SLOTS + 8) * LANES, np.float32),
                   np.zeros((-(-P // LANES) * LANES + LANES) * LANES, np.float32))
            self._local.bufs = got
        return got[1], got[2]

    @property
    def w(self) -> np.ndarray:
        """The weight as (C, 1, kh, kw); the kernel reads :attr:`wc`, (blocks, kh * kw, 16)."""
        return self._w

    @w.setter
    def w(self, w):
        self._w = np.asarray(w, np.float32).reshape(self.C, 1, *self.kernel)
        nb = -(-self.C // LANES)
        wc = np.zeros((nb * LANES, self.kernel[0] * self.kernel[1]), np.float32)
        wc[:self.C] = self._w.reshape(self.C, -1)
        self.wc = np.ascontiguousarray(wc.reshape(nb, LANES, -1).transpose(0, 2, 1)).reshape(-1)

    @property
    def b(self) -> np.ndarray:
        return self._b

    @b.setter
    def b(self, b):
        self._b = b
        self.bc = np.zeros(-(-self.C // LANES) * LANES, np.float32)
        self.bc[:self.C] = b

    def out_shape(self, shape):
        return (shape[0], self.C, *out_hw(shape, self.kernel, self.stride, self.pads, self.dilation))

    def bind(self, x, out, residual=None) -> BlockedRun:
        """This conv on ``x`` into ``out`` as per-image task ranges (channel blocks): the bound-call
        protocol of :func:`.direct.run_bound`."""
        return self._bound.get(self._bind, x, out, residual)

    def _bind(self, x, out, residual) -> BlockedRun:
        return BlockedRun(self, x, out, residual)

    def __call__(self, x, out, residual=None, threads: int = 1):
        run_bound(self.bind(x, out, residual), threads)
        return out


class BlockedRun(SerialTasks):
    """One call of a :class:`BlockedDepthwiseConv`: :meth:`run_tasks` computes channel blocks
    ``[t0, t1)`` of image ``n`` (each range with its own buffers, so ranges may run at once);
    :meth:`fill` has nothing to do (``channels == 0``: each block transposes its own input)."""
    __slots__ = ("_args", "_conv", "_entry", "_sizes", "channels", "images", "tasks")

    def __init__(self, conv: BlockedDepthwiseConv, x, out, residual):
        if conv.blocked_in:
            N, C, H, W = nchwc.check_blocked("BlockedDepthwiseConv", x, conv.C, LANES)
        else:
            N, C, H, W = x.shape
        if C != conv.C:
            raise ShapeError(f"BlockedDepthwiseConv: input has {C} channels, the weight {conv.C}")
        _, _, Ho, Wo = conv.out_shape((N, C, H, W))
        want = nchwc.blocked_shape((N, C, Ho, Wo), LANES) if conv.blocked_out else (N, C, Ho, Wo)
        if tuple(out.shape) != want or (residual is not None and tuple(residual.shape) != want):
            raise ShapeError(f"BlockedDepthwiseConv: out / residual must be {want}, got {tuple(out.shape)} / "
                             f"{None if residual is None else tuple(residual.shape)}")
        (kh, kw), (sh, sw), (dh, dw) = conv.kernel, conv.stride, conv.dilation
        (pt, pb), (pl, pr) = conv.pads
        Hp = max(H + pt + pb, (Ho - 1) * sh + (kh - 1) * dh + 1)
        Wp = max(W + pl + pr, (Wo - 1) * sw + (kw - 1) * dw + 1)
        self.images, self.channels, self.tasks = N, 0, -(-C // LANES)
        xc = np.ascontiguousarray(x, np.float32).reshape(-1)
        res = conv._none if residual is None else residual.reshape(-1)
        self._args = (xc, C, H, W, sh, sw, dh, dw, pt, pl, Hp, Wp, kh, kw, conv.wc, conv.bc, out.reshape(-1), res,
                      residual is not None, conv.leaky, conv.slope, conv.lo, conv.hi, conv.act, Ho, Wo, conv.tag,
                      conv.blocked_in, conv.blocked_out)
        # the ring of padded rows and the zero row (NCHW16c in), else the whole padded plane
        rows = (kh - 1) * dh + 2 + sh if conv.blocked_in else Hp
        self._conv, self._sizes = conv, (rows, Wp, Ho * Wo)
        self._entry = None

    def tasks_kernel(self):
        return dwb_tasks

    def images_kernel(self):
        return dwb_images

    def task_args(self) -> tuple:
        return (*self._args, *self._conv.buffers(*self._sizes))

    @property
    def args(self) -> tuple:
        """:func:`dwb_tasks`' arguments before ``(xb, tb, n, k0, k1)``: for a caller that runs the task
        ranges its own way (an OpenMP region), each range with its own buffers, shaped as
        :meth:`BlockedDepthwiseConv.buffers` makes them for :attr:`buffer_sizes`."""
        return self._args

    @property
    def buffer_sizes(self) -> tuple[int, int, int]:
        return self._sizes

    def fill(self, n: int, c0: int, c1: int):
        """Nothing: :meth:`run_tasks` transposes the input it reads."""

    def run_tasks(self, n: int, t0: int, t1: int):
        """Channel blocks ``[t0, t1)`` of image ``n``."""
        dwb_tasks(*self._args, *self._conv.buffers(*self._sizes), n, t0, t1)
