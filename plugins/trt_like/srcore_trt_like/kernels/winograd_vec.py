"""Winograd F(4x4, 3x3) and F(2x2, 3x3) transforms on explicit 16-lane vectors (:mod:`.simd`), around
the packed GEMM (``gemm.gemm_u``): NCHW float32 in and out.

The tactic works in chunks of tile rows; tile ``t = (ty - ty0) * tw + tx`` counts the chunk's tiles.
Layouts (strides are arguments): ``V`` element (point p, channel c, tile t) at ``p * psv + c * csv + t``
(the GEMM's unpacked operand: for point p, rows c with leading dimension csv; columns past the
tiles zero), and the GEMM's pixel-major result ``C^T``: element (p, t, o) at ``p * ps + t * ldc + o``.

* Input: per channel, each input row (zero rows above and below, zero columns left and right
  in a row buffer) is split into its 4 (2) column phases by register shuffles, so that the row
  transform ``B^T`` runs on 16 tiles per vector op; then per tile row the column transform runs
  on those rows, 16 tiles per vector, and writes ``V`` rows (a masked store for the last tiles).
  No loop is one tile row long and nothing is scattered element by element.
* Output: per 16 output channels (one vector) and tile, the 36 (16) points are loaded as vectors
  (``C^T`` is channel-major per tile), ``A^T M A`` runs on them, and the tile's pixels go to a
  staging row; each output row is then transposed 16 x 16 in registers into NCHW with bias,
  residual and relu (masked stores at the right edge).

Kernels take channel ranges (input: input channels; output: output channels in multiples of 16)
so a caller can split them over threads. ``nogil``, ``cache=True``.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from . import epilogue
from .jit import JIT, plain_args
from .simd import (vadd, vdeinterleave2, vdeinterleave4, vfma, vload, vmul, vsplat_value, vstore,
                   vstore_lanes, vsub, vzero)
# the F(4x4) constants, checked there against the points of winograd_math.F4
from .winograd import _A, _A2, _A2B, _A3, _AB2, _B, _B2, _B3, _P, _S

_NB2, _NA2, _NAB2, _NA2B, _NS = -_B2, -_A2, -_AB2, -_A2B, -_S


@njit(inline="always", **JIT)
def _bt6(d0, d1, d2, d3, d4, d5):
    """B^T of F(4x4) on six vectors."""
    e1 = vfma(vsplat_value(_NB2), d2, d4)
    o1 = vfma(vsplat_value(_A), d3, vmul(vsplat_value(_NAB2), d1))
    e2 = vfma(vsplat_value(_NA2), d2, d4)
    o2 = vfma(vsplat_value(_B), d3, vmul(vsplat_value(_NA2B), d1))
    r0 = vadd(vfma(vsplat_value(_P), d0, vmul(vsplat_value(_NS), d2)), d4)
    r5 = vadd(vfma(vsplat_value(_P), d1, vmul(vsplat_value(_NS), d3)), d5)
    return r0, vadd(e1, o1), vsub(e1, o1), vadd(e2, o2), vsub(e2, o2), r5


@njit(inline="always", **JIT)
def _at6(m0, m1, m2, m3, m4, m5):
    """A^T of F(4x4) on six vectors."""
    pa, sa = vadd(m1, m2), vsub(m1, m2)
    pb, sb = vadd(m3, m4), vsub(m3, m4)
    return (vadd(vadd(m0, pa), pb), vfma(vsplat_value(_A), sa, vmul(vsplat_value(_B), sb)),
            vfma(vsplat_value(_A2), pa, vmul(vsplat_value(_B2), pb)),
            vadd(vfma(vsplat_value(_A3), sa, vmul(vsplat_value(_B3), sb)), m5))


@plain_args
@njit(**JIT)
def input_f4(x, n, pad_top, pad_left, tw, ty0, ty1, vf, psv, csv, ldv, c0, c1):
    """V of tile rows [ty0, ty1) of image n, channels [c0, c1): for tile t = (ty - ty0) * tw + tx,
    point p = 6k + l gets (B^T d B)[k, l] of the 6x6 input tile at ``vf[p * psv + c * csv + t]``;
    columns from the chunk's last tile up to ``ldv`` get zeros (the GEMM's padding).

    Each input row is split into its 4 column phases by register shuffles and transformed by B^T
    for 16 tiles per vector op; the results go to every (tile row, row offset) that uses the row,
    flattened over the chunk's tiles, so the column transform runs on 16 tiles of any rows per
    vector and stores whole vectors of V rows. (The GEMM's packed (block, C, 6) layout read 10-15 %
    faster but cost more than that to write: each channel's 6 values per block land a cache line
    apart.)
    """
    H, W = x.shape[2], x.shape[3]
    ntr = ty1 - ty0
    nh = (tw + 15) // 16              # 16-tile vectors per tile row
    nq = nh + 1                       # phase vectors: tile tx + 1 is read too
    hsz = 16 * ((ldv + 15) // 16) + 16
    buf = np.zeros(64 * nq, np.float32)
    q = np.empty(64 * nq, np.float32)
    hx = np.zeros(36 * hsz, np.float32)      # [l, i, t]: row 4 ty + i of tile row ty, by B^T; 0 past T
    wc = max(0, min(W, 4 * tw + 2 - pad_left))
    for c in range(c0, c1):
        for rr in range(4 * ntr + 2):
            h = 4 * ty0 + rr - pad_top
            live = 0 <= h < H
            if live:
                src = x[n, c, h]
                dst = buf[pad_left:pad_left + wc]
                for w in range(wc):
                    dst[w] = src[w]
                for j in range(nq):
                    p = vdeinterleave4(buf, 64 * j)
                    vstore(q, 16 * j, p[0])
                    vstore(q, 16 * (nq + j), p[1])
                    vstore(q, 16 * (2 * nq + j), p[2])
                    vstore(q, 16 * (3 * nq + j), p[3])
            for j in range(nh):
                i = 16 * j
                if live:
                    r0, r1, r2, r3, r4, r5 = _bt6(vload(q, i), vload(q, 16 * nq + i), vload(q, 32 * nq + i),
                                                  vload(q, 48 * nq + i), vload(q, i + 1), vload(q, 16 * nq + i + 1))
                else:
                    r0 = r1 = r2 = r3 = r4 = r5 = vzero()
                m = min(16, tw - i)
                for ty in range(max(0, (rr - 2) // 4), min(ntr, rr // 4 + 1)):
                    d = (rr - 4 * ty) * hsz + ty * tw + i
                    vstore_lanes(hx, d, r0, m)
                    vstore_lanes(hx, 6 * hsz + d, r1, m)
                    vstore_lanes(hx, 12 * hsz + d, r2, m)
                    vstore_lanes(hx, 18 * hsz + d, r3, m)
                    vstore_lanes(hx, 24 * hsz + d, r4, m)
                    vstore_lanes(hx, 30 * hsz + d, r5, m)
        for l in range(6):
            b = 6 * l * hsz
            for t0 in range(0, ldv, 16):
                o0, o1, o2, o3, o4, o5 = _bt6(vload(hx, b + t0), vload(hx, b + hsz + t0), vload(hx, b + 2 * hsz + t0),
                                              vload(hx, b + 3 * hsz + t0), vload(hx, b + 4 * hsz + t0),
                                              vload(hx, b + 5 * hsz + t0))
                m = min(16, ldv - t0)
                d = c * csv + t0
                vstore_lanes(vf, l * psv + d, o0, m)
                vstore_lanes(vf, (6 + l) * psv + d, o1, m)
                vstore_lanes(vf, (12 + l) * psv + d, o2, m)
                vstore_lanes(vf, (18 + l) * psv + d, o3, m)
                vstore_lanes(vf, (24 + l) * psv + d, o4, m)
                vstore_lanes(vf, (30 + l) * psv + d, o5, m)


@plain_args
@njit(**JIT)
def input_f2(x, n, pad_top, pad_left, tw, ty0, ty1, vf, psv, csv, ldv, c0, c1):
    """F(2x2): the packed V of 4x4 input tiles, point p = 4k + l (see :func:`input_f4`)."""
    H, W = x.shape[2], x.shape[3]
    ntr = ty1 - ty0
    nh = (tw + 15) // 16
    nq = nh + 1
    hsz = 16 * ((ldv + 15) // 16) + 16
    buf = np.zeros(32 * nq, np.float32)
    q = np.empty(32 * nq, np.float32)
    hx = np.zeros(16 * hsz, np.float32)      # [l, i, t], 0 past T
    wc = max(0, min(W, 2 * tw + 2 - pad_left))
    for c in range(c0, c1):
        for rr in range(2 * ntr + 2):
            h = 2 * ty0 + rr - pad_top
            live = 0 <= h < H
            if live:
                src = x[n, c, h]
                dst = buf[pad_left:pad_left + wc]
                for w in range(wc):
                    dst[w] = src[w]
                for j in range(nq):
                    p = vdeinterleave2(buf, 32 * j)
                    vstore(q, 16 * j, p[0])
                    vstore(q, 16 * (nq + j), p[1])
            for j in range(nh):
                i = 16 * j
                if live:
                    d0, d1, d2, d3 = vload(q, i), vload(q, 16 * nq + i), vload(q, i + 1), vload(q, 16 * nq + i + 1)
                    r0, r1, r2, r3 = vsub(d2, d0), vadd(d1, d2), vsub(d2, d1), vsub(d3, d1)
                else:
                    r0 = r1 = r2 = r3 = vzero()
                m = min(16, tw - i)
                for ty in range(max(0, (rr - 2) // 2), min(ntr, rr // 2 + 1)):
                    d = (rr - 2 * ty) * hsz + ty * tw + i
                    vstore_lanes(hx, d, r0, m)
                    vstore_lanes(hx, 4 * hsz + d, r1, m)
                    vstore_lanes(hx, 8 * hsz + d, r2, m)
                    vstore_lanes(hx, 12 * hsz + d, r3, m)
        for l in range(4):
            b = 4 * l * hsz
            for t0 in range(0, ldv, 16):
                d0, d1 = vload(hx, b + t0), vload(hx, b + hsz + t0)
                d2, d3 = vload(hx, b + 2 * hsz + t0), vload(hx, b + 3 * hsz + t0)
                m = min(16, ldv - t0)
                d = c * csv + t0
                vstore_lanes(vf, l * psv + d, vsub(d2, d0), m)
                vstore_lanes(vf, (4 + l) * psv + d, vadd(d1, d2), m)
                vstore_lanes(vf, (8 + l) * psv + d, vsub(d2, d1), m)
                vstore_lanes(vf, (12 + l) * psv + d, vsub(d3, d1), m)


@plain_args
@njit(**JIT)
def output_f4(cf, ldc, ps, tw, ty0, ty1, bias, res, has_res, relu, out, n, o0, o1):
    """``out[n, o] = relu?(A^T M A + bias[o] (+ res))`` for tile rows [ty0, ty1) and output channels
    [o0, o1) (o0 a multiple of 16), M read from C^T (point p, tile t = (ty - ty0) * tw + tx, channel o
    at ``p * ps + t * ldc + o``)."""
    Ho = out.shape[2]
    sw = 4 * tw + 16
    stage = np.empty(4 * sw * 16, np.float32)
    col = np.empty(24 * 16, np.float32)
    for ob in range(o0, o1, 16):
        for ty in range(ty0, ty1):
            for tx in range(tw):
                b = ((ty - ty0) * tw + tx) * ldc + ob
                for l in range(6):
                    a0, a1, a2, a3 = _at6(vload(cf, b + l * ps), vload(cf, b + (6 + l) * ps),
                                          vload(cf, b + (12 + l) * ps), vload(cf, b + (18 + l) * ps),
                                          vload(cf, b + (24 + l) * ps), vload(cf, b + (30 + l) * ps))
                    vstore(col, 16 * l, a0)
                    vstore(col, 16 * (6 + l), a1)
                    vstore(col, 16 * (12 + l), a2)
                    vstore(col, 16 * (18 + l), a3)
                for i in range(4):
                    k = 96 * i
                    y0, y1, y2, y3 = _at6(vload(col, k), vload(col, k + 16), vload(col, k + 32), vload(col, k + 48),
                                          vload(col, k + 64), vload(col, k + 80))
                    s = (i * sw + 4 * tx) * 16
                    vstore(stage, s, y0)
                    vstore(stage, s + 16, y1)
                    vstore(stage, s + 32, y2)
                    vstore(stage, s + 48, y3)
            epilogue.write_rows(stage, sw, min(4, Ho - 4 * ty), out, n, 4 * ty, bias, res, has_res, relu, ob)


@plain_args
@njit(**JIT)
def output_f2(cf, ldc, ps, tw, ty0, ty1, bias, res, has_res, relu, out, n, o0, o1):
    """F(2x2) output transform and epilogue (see :func:`output_f4`)."""
    Ho = out.shape[2]
    sw = 2 * tw + 16
    stage = np.empty(2 * sw * 16, np.float32)
    col = np.empty(8 * 16, np.float32)
    for ob in range(o0, o1, 16):
        for ty in range(ty0, ty1):
            for tx in range(tw):
                b = ((ty - ty0) * tw + tx) * ldc + ob
                for l in range(4):
                    m0, m1 = vload(cf, b + l * ps), vload(cf, b + (4 + l) * ps)
                    m2, m3 = vload(cf, b + (8 + l) * ps), vload(cf, b + (12 + l) * ps)
                    vstore(col, 16 * l, vadd(vadd(m0, m1), m2))
                    vstore(col, 16 * (4 + l), vadd(vsub(m1, m2), m3))
                for i in range(2):
                    k = 64 * i
                    c0, c1, c2, c3 = vload(col, k), vload(col, k + 16), vload(col, k + 32), vload(col, k + 48)
                    s = (i * sw + 2 * tx) * 16
                    vstore(stage, s, vadd(vadd(c0, c1), c2))
                    vstore(stage, s + 16, vadd(vsub(c1, c2), c3))
            epilogue.write_rows(stage, sw, min(2, Ho - 2 * ty), out, n, 2 * ty, bias, res, has_res, relu, ob)
