"""A packed-panel SGEMM for constant weights, in numba on explicit vectors (8 lanes: AVX2 ``ymm``;
16 where the CPU has AVX-512): ``out = x @ W.T`` for ``x`` (M, K) and a weight ``W`` (N, K) packed once,
when the engine is built (MLAS's way: ``MlasGemmPackB`` and the x86-64 ``SgemmKernelFma3`` kernel).

* weights: panels of ``P = 2 * lanes`` output columns (the last zero-padded), laid out in the order the
  driver reads them, so a call streams the packed weight once, front to back: per block of
  ``NCP`` panels, per block of ``KC`` values of k, per panel, ``kc`` rows of ``P`` floats;
* micro-tile: 6 rows of ``x`` x one panel (two vectors) in 12 accumulators; per k two weight loads and
  six broadcasts of ``x`` for 12 FMAs, 15 of AVX2's 16 registers (MLAS's tile; a 4-row, 2-row and
  1-row tile take the rows left). A panel's ``kc x P`` weights (16 KiB at 8 lanes) stay in L1 while
  every 6-row block of the call's rows uses them; ``x``'s k block (up to ``MC`` rows) stays in L2,
  and so does the output block the k blocks accumulate in;
* OpenBLAS, against which it is timed (``tactics/sgemm.py``), packs the weight again on every call.

Rows ``r0 <= r < r1`` only, so a caller could split a call by rows. ``nogil``, ``cache=True``.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from srcore.plugin import ShapeError
from srcore.plugin import simd_vec as _sv

from .jit import JIT
from .scratch import SCRATCH

(fptr, prefetch, vadd, vbcast, vclamp, vfma,
 vload, vload_n, vsplat, vstore, vstore_n, vzip_lo, vzip_hi) = (getattr(_sv, n) for n in (
    "fptr", "prefetch", "vadd", "vbcast", "vclamp", "vfma", "vload", "vload_n",
    "vsplat", "vstore", "vstore_n", "vzip_lo", "vzip_hi"))

#: k values a block (a panel's block: 256 x 16 floats = 16 KiB at 8 lanes, MLAS's packed StrideK)
KC = 256
#: panels an output block (256 columns at 8 lanes: 64 rows' block of the output is 64 KiB, in L2)
NCP = 16
#: rows a block of ``x`` (its k block: 240 x 256 floats = 240 KiB, in L2)
MC = 240

# helpers inlined into the kernel (LLVM's alwaysinline), not compiled or cached on their own
_inline = njit(forceinline=True, nogil=True, error_model="numpy", fastmath={"contract"})


def panel_width(lanes: int) -> int:
    return 2 * lanes


def pack_weight(w: np.ndarray, lanes: int) -> np.ndarray:
    """(N, K) float32 -> the 1-D packed weight (see the module's docstring), zero columns padding N up
    to whole panels."""
    N, K = w.shape
    P = panel_width(lanes)
    NP = -(-N // P)
    wt = np.zeros((NP * P, K), np.float32)
    wt[:N] = w
    wt = wt.reshape(NP, P, K).transpose(0, 2, 1)        # [panel, k, column]
    parts = []
    for pb0 in range(0, NP, NCP):
        blk = wt[pb0:pb0 + NCP]
        for k0 in range(0, K, KC):
            parts.append(np.ascontiguousarray(blk[:, k0:k0 + KC]).ravel())
    return np.ascontiguousarray(np.concatenate(parts) if parts else np.zeros(0, np.float32))


def width_tag(lanes: int) -> np.ndarray:
    # srcore.conv.simd's width tag: ndim 1 -> 8 lanes, 2 -> 16
    return np.zeros(1, np.float32) if lanes == 8 else np.zeros((1, 1), np.float32)


@_inline
def _put2(po, o, c0, c1, acc, nv, L, z):
    """Store one row's two vectors at ``o`` (``nv`` valid columns), added to what is there if ``acc``."""
    if nv >= 2 * L:
        if acc:
            c0 = vadd(c0, vload(po, o, z))
            c1 = vadd(c1, vload(po, o + L, z))
        vstore(po, o, c0)
        vstore(po, o + L, c1)
    else:
        n0 = min(nv, L)
        n1 = nv - n0
        if acc:
            c0 = vadd(c0, vload_n(po, o, n0, z))
            c1 = vadd(c1, vload_n(po, o + L, n1, z))
        vstore_n(po, o, c0, n0)
        vstore_n(po, o + L, c1, n1)


@_inline
def _tile6(pa, ao, pw, bo, kc, po, oo, N, acc, nv, L, z, pf):
    """6 packed rows at ``ao`` x one panel at ``bo``, ``kc`` values of k: 12 accumulators."""
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
    P = 2 * L
    for k in range(kc):
        b = bo + k * P
        a = ao + k * 6
        b0 = vload(pw, b, z)
        b1 = vload(pw, b + L, z)
        prefetch(pw, b + pf)
        x = vbcast(pa, a, z)
        c00 = vfma(x, b0, c00)
        c01 = vfma(x, b1, c01)
        x = vbcast(pa, a + 1, z)
        c10 = vfma(x, b0, c10)
        c11 = vfma(x, b1, c11)
        x = vbcast(pa, a + 2, z)
        c20 = vfma(x, b0, c20)
        c21 = vfma(x, b1, c21)
        x = vbcast(pa, a + 3, z)
        c30 = vfma(x, b0, c30)
        c31 = vfma(x, b1, c31)
        x = vbcast(pa, a + 4, z)
        c40 = vfma(x, b0, c40)
        c41 = vfma(x, b1, c41)
        x = vbcast(pa, a + 5, z)
        c50 = vfma(x, b0, c50)
        c51 = vfma(x, b1, c51)
    _put2(po, oo, c00, c01, acc, nv, L, z)
    _put2(po, oo + 1 * N, c10, c11, acc, nv, L, z)
    _put2(po, oo + 2 * N, c20, c21, acc, nv, L, z)
    _put2(po, oo + 3 * N, c30, c31, acc, nv, L, z)
    _put2(po, oo + 4 * N, c40, c41, acc, nv, L, z)
    _put2(po, oo + 5 * N, c50, c51, acc, nv, L, z)


@_inline
def _tile4(pa, ao, pw, bo, kc, po, oo, N, acc, nv, L, z, pf):
    """4 packed rows at ``ao`` x one panel at ``bo``, ``kc`` values of k: 8 accumulators."""
    c00 = z
    c01 = z
    c10 = z
    c11 = z
    c20 = z
    c21 = z
    c30 = z
    c31 = z
    P = 2 * L
    for k in range(kc):
        b = bo + k * P
        a = ao + k * 4
        b0 = vload(pw, b, z)
        b1 = vload(pw, b + L, z)
        prefetch(pw, b + pf)
        x = vbcast(pa, a, z)
        c00 = vfma(x, b0, c00)
        c01 = vfma(x, b1, c01)
        x = vbcast(pa, a + 1, z)
        c10 = vfma(x, b0, c10)
        c11 = vfma(x, b1, c11)
        x = vbcast(pa, a + 2, z)
        c20 = vfma(x, b0, c20)
        c21 = vfma(x, b1, c21)
        x = vbcast(pa, a + 3, z)
        c30 = vfma(x, b0, c30)
        c31 = vfma(x, b1, c31)
    _put2(po, oo, c00, c01, acc, nv, L, z)
    _put2(po, oo + 1 * N, c10, c11, acc, nv, L, z)
    _put2(po, oo + 2 * N, c20, c21, acc, nv, L, z)
    _put2(po, oo + 3 * N, c30, c31, acc, nv, L, z)


@_inline
def _tile2(pa, ao, pw, bo, kc, po, oo, N, acc, nv, L, z, pf):
    """2 packed rows at ``ao`` x one panel at ``bo``, ``kc`` values of k: 4 accumulators."""
    c00 = z
    c01 = z
    c10 = z
    c11 = z
    P = 2 * L
    for k in range(kc):
        b = bo + k * P
        a = ao + k * 2
        b0 = vload(pw, b, z)
        b1 = vload(pw, b + L, z)
        prefetch(pw, b + pf)
        x = vbcast(pa, a, z)
        c00 = vfma(x, b0, c00)
        c01 = vfma(x, b1, c01)
        x = vbcast(pa, a + 1, z)
        c10 = vfma(x, b0, c10)
        c11 = vfma(x, b1, c11)
    _put2(po, oo, c00, c01, acc, nv, L, z)
    _put2(po, oo + 1 * N, c10, c11, acc, nv, L, z)


@_inline
def _tile1(pa, ao, pw, bo, kc, po, oo, N, acc, nv, L, z, pf):
    """1 packed rows at ``ao`` x one panel at ``bo``, ``kc`` values of k: 2 accumulators."""
    c00 = z
    c01 = z
    P = 2 * L
    for k in range(kc):
        b = bo + k * P
        a = ao + k * 1
        b0 = vload(pw, b, z)
        b1 = vload(pw, b + L, z)
        prefetch(pw, b + pf)
        x = vbcast(pa, a, z)
        c00 = vfma(x, b0, c00)
        c01 = vfma(x, b1, c01)
    _put2(po, oo, c00, c01, acc, nv, L, z)


@njit(**JIT)
def _rows(left):
    """The rows of the next row block when ``left`` rows remain: 6, 4, 2 or 1."""
    return 6 if left >= 6 else (4 if left >= 4 else (2 if left >= 2 else 1))


@njit(**JIT)
def pack_rows(x, xp, K, r0, r1):
    """Rows ``r0 <= r < r1`` of ``x`` (flat (M, K)) into ``xp`` per k block, per row block (6, 6, ..., then 4,
    2, 1), ``kc x rows`` floats each: a block's broadcasts one contiguous stream (rows of ``x`` are often
    a multiple of 4 KiB apart, so six of them share one set of the 8-way L1)."""
    m = r1 - r0
    # raw pointers: indexing arrays with these signed sums made numba check for negative indices, 230 us
    # for 64 x 4096 rows against 55-70 (AMD EPYC, loaded)
    px, pp = fptr(x), fptr(xp)
    for k0 in range(0, K, KC):
        kc = min(KC, K - k0)
        r = r0
        while r < r1:
            R = _rows(r1 - r)
            base = k0 * m + (r - r0) * kc
            s = r * K + k0
            if R == 6:   # (k outer, the rows unrolled)
                for k in range(kc):
                    d = base + 6 * k
                    pp[d] = px[s + k]
                    pp[d + 1] = px[s + K + k]
                    pp[d + 2] = px[s + 2 * K + k]
                    pp[d + 3] = px[s + 3 * K + k]
                    pp[d + 4] = px[s + 4 * K + k]
                    pp[d + 5] = px[s + 5 * K + k]
            else:
                for k in range(kc):
                    for i in range(R):
                        pp[base + k * R + i] = px[s + i * K + k]
            r += R


@njit(**JIT)
def sgemm_rows(x, xp, wp, out, N, K, L, tag, r0, r1):
    """``out[r0:r1] = x[r0:r1] @ W.T``: ``x`` (M, K), ``out`` (M, N) C-contiguous float32 (flat), ``wp`` from
    :func:`pack_weight` at ``L`` lanes, ``tag`` its :func:`width_tag`, ``xp`` scratch of
    ``(r1 - r0) * K`` floats."""
    pack_rows(x, xp, K, r0, r1)
    P = 2 * L
    sgemm_packed(xp, wp, out, N, K, L, tag, r0, r1, r0, r1, 0, (N + P - 1) // P)


@njit(**JIT)
def sgemm_packed(xp, wp, out, N, K, L, tag, r0, r1, a, b, p0, p1):
    """Rows ``a <= r < b`` and panels ``p0 <= p < p1`` of ``out = x @ W.T``, ``xp`` :func:`pack_rows`' packing
    of rows ``r0 <= r < r1`` (``a - r0`` a multiple of 6, ``b`` too or ``r1``). Every output value is
    the same sum in the same order whatever the rows and panels of the call: threads split by either
    give the bits of one call."""
    z = vsplat(tag, np.float32(0.0))
    P = 2 * L
    NP = (N + P - 1) // P
    m = r1 - r0
    pa, pw, po = fptr(xp), fptr(wp), fptr(out)
    for m0 in range(a, b, MC):
        m1 = min(b, m0 + MC)
        for pb0 in range(p0 - p0 % NCP, p1, NCP):
            npb = min(NCP, NP - pb0)      # the block's panels as packed
            j0 = max(p0, pb0) - pb0
            j1 = min(p1, pb0 + npb) - pb0
            for k0 in range(0, K, KC):
                kc = min(KC, K - k0)
                acc = k0 > 0
                base = pb0 * K * P + k0 * npb * P
                for j in range(j0, j1):
                    pb = pb0 + j
                    nv = min(P, N - pb * P)
                    bo = base + j * kc * P
                    r = m0
                    while r < m1:
                        ao = k0 * m + (r - r0) * kc
                        oo = r * N + pb * P
                        R = _rows(m1 - r)
                        pf = kc * P if r == m0 else 0
                        if R == 6:
                            _tile6(pa, ao, pw, bo, kc, po, oo, N, acc, nv, L, z, pf)
                        elif R == 4:
                            _tile4(pa, ao, pw, bo, kc, po, oo, N, acc, nv, L, z, pf)
                        elif R == 2:
                            _tile2(pa, ao, pw, bo, kc, po, oo, N, acc, nv, L, z, pf)
                        else:
                            _tile1(pa, ao, pw, bo, kc, po, oo, N, acc, nv, L, z, pf)
                        r += R


# -- the same tiles for a 1x1 conv writing NCHW: out (Cout, HW) = W (Cout, Cin) @ X (Cin, HW) ---------------
# (the weight is the packed-rows side, packed once; the input's planes the panel side, read in place
# from a copy whose row pitch is whole panels and no multiple of 4 KiB: rows 4 KiB apart share one set of
# the 8-way L1, and a panel's kc rows are re-read by every row block)

@_inline
def _cput2(po, o, c0, c1, acc, last, nv, L, z, pbias, row, lo, hi):
    """:func:`_put2` with the last k block's epilogue: ``bias[row]``, then clamped to ``[lo, hi]``."""
    if acc:
        if nv >= 2 * L:
            c0 = vadd(c0, vload(po, o, z))
            c1 = vadd(c1, vload(po, o + L, z))
        else:
            c0 = vadd(c0, vload_n(po, o, min(nv, L), z))
            c1 = vadd(c1, vload_n(po, o + L, nv - min(nv, L), z))
    if last:
        bv = vbcast(pbias, row, z)
        c0 = vclamp(vadd(c0, bv), lo, hi)
        c1 = vclamp(vadd(c1, bv), lo, hi)
    if nv >= 2 * L:
        vstore(po, o, c0)
        vstore(po, o + L, c1)
    else:
        vstore_n(po, o, c0, min(nv, L))
        vstore_n(po, o + L, c1, nv - min(nv, L))


@_inline
def _ctile6(pa, ao, px, bo, ld, kc, po, oo, N, acc, last, nv, L, z, pbias, r, lo, hi):
    """6 packed weight rows at ``ao`` x 16 pixels of ``B`` rows at stride ``ld`` from ``bo``: 12 accumulators."""
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
    for k in range(kc):
        b = bo + k * ld
        a = ao + k * 6
        b0 = vload(px, b, z)
        b1 = vload(px, b + L, z)
        x = vbcast(pa, a, z)
        c00 = vfma(x, b0, c00)
        c01 = vfma(x, b1, c01)
        x = vbcast(pa, a + 1, z)
        c10 = vfma(x, b0, c10)
        c11 = vfma(x, b1, c11)
        x = vbcast(pa, a + 2, z)
        c20 = vfma(x, b0, c20)
        c21 = vfma(x, b1, c21)
        x = vbcast(pa, a + 3, z)
        c30 = vfma(x, b0, c30)
        c31 = vfma(x, b1, c31)
        x = vbcast(pa, a + 4, z)
        c40 = vfma(x, b0, c40)
        c41 = vfma(x, b1, c41)
        x = vbcast(pa, a + 5, z)
        c50 = vfma(x, b0, c50)
        c51 = vfma(x, b1, c51)
    _cput2(po, oo, c00, c01, acc, last, nv, L, z, pbias, r + 0, lo, hi)
    _cput2(po, oo + 1 * N, c10, c11, acc, last, nv, L, z, pbias, r + 1, lo, hi)
    _cput2(po, oo + 2 * N, c20, c21, acc, last, nv, L, z, pbias, r + 2, lo, hi)
    _cput2(po, oo + 3 * N, c30, c31, acc, last, nv, L, z, pbias, r + 3, lo, hi)
    _cput2(po, oo + 4 * N, c40, c41, acc, last, nv, L, z, pbias, r + 4, lo, hi)
    _cput2(po, oo + 5 * N, c50, c51, acc, last, nv, L, z, pbias, r + 5, lo, hi)


@_inline
def _ctile4(pa, ao, px, bo, ld, kc, po, oo, N, acc, last, nv, L, z, pbias, r, lo, hi):
    """4 packed weight rows at ``ao`` x 16 pixels of ``B`` rows at stride ``ld`` from ``bo``: 8 accumulators."""
    c00 = z
    c01 = z
    c10 = z
    c11 = z
    c20 = z
    c21 = z
    c30 = z
    c31 = z
    for k in range(kc):
        b = bo + k * ld
        a = ao + k * 4
        b0 = vload(px, b, z)
        b1 = vload(px, b + L, z)
        x = vbcast(pa, a, z)
        c00 = vfma(x, b0, c00)
        c01 = vfma(x, b1, c01)
        x = vbcast(pa, a + 1, z)
        c10 = vfma(x, b0, c10)
        c11 = vfma(x, b1, c11)
        x = vbcast(pa, a + 2, z)
        c20 = vfma(x, b0, c20)
        c21 = vfma(x, b1, c21)
        x = vbcast(pa, a + 3, z)
        c30 = vfma(x, b0, c30)
        c31 = vfma(x, b1, c31)
    _cput2(po, oo, c00, c01, acc, last, nv, L, z, pbias, r + 0, lo, hi)
    _cput2(po, oo + 1 * N, c10, c11, acc, last, nv, L, z, pbias, r + 1, lo, hi)
    _cput2(po, oo + 2 * N, c20, c21, acc, last, nv, L, z, pbias, r + 2, lo, hi)
    _cput2(po, oo + 3 * N, c30, c31, acc, last, nv, L, z, pbias, r + 3, lo, hi)


@_inline
def _ctile2(pa, ao, px, bo, ld, kc, po, oo, N, acc, last, nv, L, z, pbias, r, lo, hi):
    """2 packed weight rows at ``ao`` x 16 pixels of ``B`` rows at stride ``ld`` from ``bo``: 4 accumulators."""
    c00 = z
    c01 = z
    c10 = z
    c11 = z
    for k in range(kc):
        b = bo + k * ld
        a = ao + k * 2
        b0 = vload(px, b, z)
        b1 = vload(px, b + L, z)
        x = vbcast(pa, a, z)
        c00 = vfma(x, b0, c00)
        c01 = vfma(x, b1, c01)
        x = vbcast(pa, a + 1, z)
        c10 = vfma(x, b0, c10)
        c11 = vfma(x, b1, c11)
    _cput2(po, oo, c00, c01, acc, last, nv, L, z, pbias, r + 0, lo, hi)
    _cput2(po, oo + 1 * N, c10, c11, acc, last, nv, L, z, pbias, r + 1, lo, hi)


@_inline
def _ctile1(pa, ao, px, bo, ld, kc, po, oo, N, acc, last, nv, L, z, pbias, r, lo, hi):
    """1 packed weight rows at ``ao`` x 16 pixels of ``B`` rows at stride ``ld`` from ``bo``: 2 accumulators."""
    c00 = z
    c01 = z
    for k in range(kc):
        b = bo + k * ld
        a = ao + k * 1
        b0 = vload(px, b, z)
        b1 = vload(px, b + L, z)
        x = vbcast(pa, a, z)
        c00 = vfma(x, b0, c00)
        c01 = vfma(x, b1, c01)
    _cput2(po, oo, c00, c01, acc, last, nv, L, z, pbias, r + 0, lo, hi)


def plane_pitch(n: int, lanes: int) -> int:
    """The row pitch of :func:`planes_into`'s copy of ``n``-pixel planes: whole panels, never a multiple of
    4 KiB (then one panel more)."""
    P = panel_width(lanes)
    ld = -(-n // P) * P
    return ld + P if (4 * ld) % 4096 == 0 else ld


@_inline
def _zip8(r0, r1, r2, r3, r4, r5, r6, r7):
    """One round of the 8x8 transpose: rows ``i`` and ``i + 4`` interleaved (three rounds transpose)."""
    return (vzip_lo(r0, r4), vzip_hi(r0, r4), vzip_lo(r1, r5), vzip_hi(r1, r5),
            vzip_lo(r2, r6), vzip_hi(r2, r6), vzip_lo(r3, r7), vzip_hi(r3, r7))


@njit(**JIT)
def planes_into(x, xb, C, HW, ld, blocked, tag8):
    """One image's ``C`` planes of ``HW`` pixels (NCHW, or NCHW16c when ``blocked``) into rows of ``xb`` at
    pitch ``ld`` (the rest of each row not written). NCHW16c: 8 pixels x 8 channels a time, transposed
    in registers (a scalar gather took 47 us for 64 channels of 32x32, AMD EPYC, loaded)."""
    planes_range(x, xb, C, HW, ld, blocked, tag8, 0, HW)


@_inline
def _panels(pa, px, po, pbias, M, N, K, ld, L, z, lo, hi, q0, q1):
    """Pixel panels ``q0 <= pb < q1`` of a 1x1 conv whose input planes are in ``px`` (pitch ``ld``):
    every output row of those pixels, the same tiles in the same order whatever the range."""
    P = 2 * L
    for pb0 in range(q0, q1, NCP):
        npb = min(NCP, q1 - pb0)
        for k0 in range(0, K, KC):
            kc = min(KC, K - k0)
            acc = k0 > 0
            last = k0 + kc == K
            for j in range(npb):
                pb = pb0 + j
                nv = min(P, N - pb * P)
                bo = k0 * ld + pb * P
                r = 0
                while r < M:
                    ao = k0 * M + r * kc
                    oo = r * N + pb * P
                    R = _rows(M - r)
                    if R == 6:
                        _ctile6(pa, ao, px, bo, ld, kc, po, oo, N, acc, last, nv, L, z, pbias, r, lo, hi)
                    elif R == 4:
                        _ctile4(pa, ao, px, bo, ld, kc, po, oo, N, acc, last, nv, L, z, pbias, r, lo, hi)
                    elif R == 2:
                        _ctile2(pa, ao, px, bo, ld, kc, po, oo, N, acc, last, nv, L, z, pbias, r, lo, hi)
                    else:
                        _ctile1(pa, ao, px, bo, ld, kc, po, oo, N, acc, last, nv, L, z, pbias, r, lo, hi)
                    r += R


@njit(**JIT)
def conv1x1_planes(wa, x, xb, out, M, N, K, blocked, L, tag, bias, lo, hi):
    """One image of a 1x1 conv: ``out`` (M, N) = ``clamp(W @ X + bias, lo, hi)``, W (M, K) packed by
    :func:`pack_rows`, X the image's K planes of N pixels (NCHW, or NCHW16c when ``blocked``) copied into
    ``xb`` (at least ``K * plane_pitch(N, L)`` floats) first."""
    P = 2 * L
    ld = N + (P - N % P) % P
    if (4 * ld) % 4096 == 0:
        ld += P
    planes_into(x, xb, K, N, ld, blocked, tag)
    z = vsplat(tag, np.float32(0.0))
    NP = (N + P - 1) // P
    pa, px, po, pbias = fptr(wa), fptr(xb), fptr(out), fptr(bias)
    _panels(pa, px, po, pbias, M, N, K, ld, L, z, lo, hi, 0, NP)


def pack_weight_rows(w: np.ndarray) -> np.ndarray:
    """(M, K) float32 -> :func:`pack_rows`' layout of all its rows (a constant left operand, packed once)."""
    w = np.ascontiguousarray(w, np.float32)
    out = np.empty(w.size, np.float32)
    pack_rows(w.reshape(-1), out, w.shape[1], 0, w.shape[0])
    return out


class PackedSgemm:
    """``out = x @ W.T`` on the weight ``w`` (N, K) packed once; ``self(x, out)`` with ``x`` (..., K) and
    ``out`` (..., N) C-contiguous float32 (any leading shape, the same row count). The rows' packed copy
    is the calling thread's scratch (:mod:`.scratch`), so concurrent calls are safe.
    ``PackedSgemm(None, lanes, packed=(wp, n, k))`` takes a weight packed before (a stored plan's)."""

    def __init__(self, w: np.ndarray | None, lanes: int = 8, packed: tuple | None = None):
        if packed is None:
            w = np.asarray(w, np.float32)
            self.n, self.k = w.shape
            self.wp = pack_weight(w, lanes)
        else:
            self.wp, self.n, self.k = np.ascontiguousarray(packed[0], np.float32), int(packed[1]), int(packed[2])
            P = panel_width(lanes)
            if self.wp.shape != (-(-self.n // P) * P * self.k,):
                raise ShapeError(f"PackedSgemm: a packed weight of shape {self.wp.shape} is not a packed "
                                 f"({self.n}, {self.k}) weight at {lanes} lanes")
        self.lanes = lanes
        self.tag = width_tag(lanes)
        self.weight_bytes = self.wp.nbytes

    def __call__(self, x: np.ndarray, out: np.ndarray) -> None:
        m = out.size // max(self.n, 1)
        xp = SCRATCH.get("sgemm_rows", (m * self.k,))
        sgemm_rows(x.reshape(-1), xp, self.wp, out.reshape(-1), self.n, self.k, self.lanes, self.tag, 0, m)


@njit(**JIT)
def conv1x1_range(wa, x, xb, out, M, N, K, blocked, L, tag, bias, lo, hi, q0, q1):
    """Panels ``q0 <= pb < q1`` (16 pixels each at 8 lanes) of :func:`conv1x1_planes`: those pixels of
    the input copied into ``xb`` (the same pitch), every output row of those pixels computed by the same
    tiles in the same order, so a split of an image in panel ranges gives its bits (``range_split.py``)."""
    P = 2 * L
    ld = N + (P - N % P) % P
    if (4 * ld) % 4096 == 0:
        ld += P
    p0, p1 = q0 * P, min(N, q1 * P)
    planes_range(x, xb, K, N, ld, blocked, tag, p0, p1)
    z = vsplat(tag, np.float32(0.0))
    pa, px, po, pbias = fptr(wa), fptr(xb), fptr(out), fptr(bias)
    _panels(pa, px, po, pbias, M, N, K, ld, L, z, lo, hi, q0, q1)


@njit(**JIT)
def planes_range(x, xb, C, HW, ld, blocked, tag8, q0, q1):
    """Pixels ``q0 <= p < q1`` of :func:`planes_into`'s copy (``q0`` a multiple of 8: the blocked input's
    8 x 8 transposes start where the whole copy's do)."""
    px, pb = fptr(x), fptr(xb)
    z = vsplat(tag8, np.float32(0.0))
    if not blocked:
        for c in range(C):
            d, s = c * ld, c * HW
            for p in range(q0, q1):
                pb[d + p] = px[s + p]
        return
    for c0 in range(0, C, 8):
        s = (c0 // 16) * HW * 16 + c0 % 16
        p0 = q0
        if c0 + 8 <= C:
            while p0 + 8 <= q1:
                a = s + 16 * p0
                r = (vload(px, a, z), vload(px, a + 16, z), vload(px, a + 32, z), vload(px, a + 48, z),
                     vload(px, a + 64, z), vload(px, a + 80, z), vload(px, a + 96, z), vload(px, a + 112, z))
                r = _zip8(*r)
                r = _zip8(*r)
                r = _zip8(*r)
                d = c0 * ld + p0
                vstore(pb, d, r[0])
                vstore(pb, d + ld, r[1])
                vstore(pb, d + 2 * ld, r[2])
                vstore(pb, d + 3 * ld, r[3])
                vstore(pb, d + 4 * ld, r[4])
                vstore(pb, d + 5 * ld, r[5])
                vstore(pb, d + 6 * ld, r[6])
                vstore(pb, d + 7 * ld, r[7])
                p0 += 8
        for c in range(c0, min(C, c0 + 8)):
            d = c * ld
            sc = s + c - c0
            for p in range(p0, q1):
                pb[d + p] = px[sc + 16 * p]
