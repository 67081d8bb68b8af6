"""Compiled channels-last copies: a channels-first tensor written, moved to channels-last, into a
column range of a larger output (a folded ``permute`` in a ``cat``, ``tactics/data.py``)."""
from __future__ import annotations

import numba
import numpy as np

from srcore.plugin import simd_vec

from .jit import JIT

vload, vstore, vsplat = simd_vec.vload, simd_vec.vstore, simd_vec.vsplat
vzip_lo, vzip_hi = simd_vec.vzip_lo, simd_vec.vzip_hi


@numba.njit(**JIT)
def channels_last_into(x, out, lead, c, s, off):
    """``x`` seen as (lead, c, s) and ``out`` as (lead, rest), both C-contiguous:
    ``out[l, off + j * c + k] = x[l, k, j]`` (NCHW -> NHWC for lead = N, s = H * W)."""
    xf = x.reshape(lead, c, s)
    of = out.reshape(lead, out.size // lead)
    for m in range(lead):
        xm, om = xf[m], of[m]
        for j in range(s):
            base = off + j * c
            for k in range(c):
                om[base + k] = xm[k, j]



@numba.njit(inline="always", **JIT)
def _zip8(r0, r1, r2, r3, r4, r5, r6, r7):
    """One perfect-shuffle stage of an 8x8 transpose: three of them transpose the rows."""
    return (vzip_lo(r0, r4), vzip_hi(r0, r4), vzip_lo(r1, r5), vzip_hi(r1, r5),
            vzip_lo(r2, r6), vzip_hi(r2, r6), vzip_lo(r3, r7), vzip_hi(r3, r7))


@numba.njit(**JIT)
def transpose_tiles(x, out, b, m, n):
    """``x`` seen as (b, m, n) and ``out`` as (b, n, m), both C-contiguous: ``out[i, k, j] =
    x[i, j, k]`` (a ``permute`` that moves a group of dims past another, NCHW -> NHWC)."""
    transpose_into(x, out, b, m, n, n * m, 0)


@numba.njit(**JIT)
def transpose_into(x, out, b, m, n, stride, off):
    """``x`` seen as (b, m, n), both C-contiguous: ``out.flat[i * stride + off + k * m + j] =
    x[i, j, k]``: each of the ``b`` transposed (n, m) matrices written at ``off`` in its row of
    ``stride`` elements of ``out`` (a cat's slice, :func:`channels_last_into`'s job). Blocks of
    8 x 8 go through registers: 8 row loads, three perfect-shuffle stages, 8 row stores; the edges
    (m or n not a multiple of 8) are copied one value at a time. numpy's transposed copy walks the
    source in the destination's order: with rows 4 KiB apart (32x32 planes) its reads all map to
    the same L1 set (a detection head's 75x32x32 permute took twice this kernel's scalar form)."""
    xf, of = x.reshape(x.size), out.reshape(out.size)
    tag = np.zeros(1, np.float32)
    like = vsplat(tag, 0.0)
    m8, n8 = m - m % 8, n - n % 8
    for i in range(b):
        xb, ob = i * m * n, i * stride + off
        for j in range(0, m8, 8):
            xr = xb + j * n
            for k in range(0, n8, 8):
                r0, r1, r2, r3 = (vload(xf, xr + k, like), vload(xf, xr + n + k, like),
                                  vload(xf, xr + 2 * n + k, like), vload(xf, xr + 3 * n + k, like))
                r4, r5, r6, r7 = (vload(xf, xr + 4 * n + k, like), vload(xf, xr + 5 * n + k, like),
                                  vload(xf, xr + 6 * n + k, like), vload(xf, xr + 7 * n + k, like))
                r0, r1, r2, r3, r4, r5, r6, r7 = _zip8(r0, r1, r2, r3, r4, r5, r6, r7)
                r0, r1, r2, r3, r4, r5, r6, r7 = _zip8(r0, r1, r2, r3, r4, r5, r6, r7)
                r0, r1, r2, r3, r4, r5, r6, r7 = _zip8(r0, r1, r2, r3, r4, r5, r6, r7)
                o = ob + k * m + j
                vstore(of, o, r0)
                vstore(of, o + m, r1)
                vstore(of, o + 2 * m, r2)
                vstore(of, o + 3 * m, r3)
                vstore(of, o + 4 * m, r4)
                vstore(of, o + 5 * m, r5)
                vstore(of, o + 6 * m, r6)
                vstore(of, o + 7 * m, r7)
            for jj in range(j, j + 8):       # the columns past the last block of 8
                for k in range(n8, n):
                    of[ob + k * m + jj] = xf[xb + jj * n + k]
        for jj in range(m8, m):              # the rows past the last block of 8
            for k in range(n):
                of[ob + k * m + jj] = xf[xb + jj * n + k]
