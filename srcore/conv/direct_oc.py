"""The explicit-SIMD direct conv with output channels in the vector lanes (NCHWc-style blocking
on NCHW data): for small planes with many channels, where vectors of output pixels lose lanes
(an 8x8 plane fills half of a 16-lane vector per row).

A task is :data:`PIXELS` consecutive positions of the output plane laid out at the input copy's row
pitch (as :data:`.direct.FLAT`) x ``2 * lanes`` output channels: 24 accumulators (of 32 ``zmm``
registers at 16 lanes). Per (channel, tap) pair it loads two weight vectors (the weights packed
``(groups, blocks, C/g, kh, kw, 2 * lanes)``) and broadcasts the input of each position (consecutive
floats of the phase-split copy, :mod:`.direct`) for 24 FMAs; bias is the accumulators' start, the
rest of the epilogue runs per element on the transposed block. The same sums in the same order as
:func:`.direct.conv_tasks`: the same bits. Meant for 16 lanes (at 8 the block spills registers).
"""
from __future__ import annotations

import numba
import numpy as np

from ._jit import JIT, plain_args
from .simd import epilogue1, task_coords, vbcast, vfma, vload, vsplat, vstore

#: output positions per task (each one accumulator per channel vector)
PIXELS = 12
_JIT = JIT


@plain_args
@numba.njit(**_JIT)
def conv_tasks_oc(xq, pitch, cstep, taps, wp, bp, cg, Og, nb_oc,
                  out, res, has_res, leaky, slope, lo, hi, O, Ho, Wo, tag, nl, pix_inner, n, t0, t1):
    """Tasks ``t0 <= t < t1`` of image ``n``: task ``t`` is channel block ``t % nb_oc`` (``2 * nl``
    channels) of positions ``[s * PIXELS, (s + 1) * PIXELS)``, ``s = t // nb_oc % spans``, of the
    output plane at row pitch ``pitch`` (``spans = ceil(Ho * pitch / PIXELS)``), of group
    ``t // (nb_oc * spans)``; with ``pix_inner`` the span ``t % spans``, the block
    ``t // spans % nb_oc``. ``taps``, ``cstep`` as :func:`.direct.conv_tasks`."""
    nt = taps.shape[0]
    B = 2 * nl
    KK = nt * B
    blk = np.empty(PIXELS * B, np.float32)
    plane = Ho * Wo
    spans = (Ho * pitch + PIXELS - 1) // PIXELS
    probe = vsplat(tag, 0.0)
    for t in range(t0, t1):
        s, ob, gi = task_coords(t, nb_oc, spans, pix_inner)
        gb = gi * nb_oc + ob
        oc0 = ob * B
        nm = min(B, Og - oc0)
        p0 = s * PIXELS
        w0 = vload(bp, gb * B, probe)
        w1 = vload(bp, gb * B + nl, probe)
        a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11 = w0, w0, w0, w0, w0, w0, w0, w0, w0, w0, w0, w0
        c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11 = w1, w1, w1, w1, w1, w1, w1, w1, w1, w1, w1, w1
        wi = gb * KK
        base = gi * cg * cstep + p0
        for k in range(nt):
            xi = base + taps[k]
            w0 = vload(wp, wi, probe)
            w1 = vload(wp, wi + nl, probe)
            x = vbcast(xq, xi, w0)
            a0 = vfma(x, w0, a0)
            c0 = vfma(x, w1, c0)
            x = vbcast(xq, xi + 1, w0)
            a1 = vfma(x, w0, a1)
            c1 = vfma(x, w1, c1)
            x = vbcast(xq, xi + 2, w0)
            a2 = vfma(x, w0, a2)
            c2 = vfma(x, w1, c2)
            x = vbcast(xq, xi + 3, w0)
            a3 = vfma(x, w0, a3)
            c3 = vfma(x, w1, c3)
            x = vbcast(xq, xi + 4, w0)
            a4 = vfma(x, w0, a4)
            c4 = vfma(x, w1, c4)
            x = vbcast(xq, xi + 5, w0)
            a5 = vfma(x, w0, a5)
            c5 = vfma(x, w1, c5)
            x = vbcast(xq, xi + 6, w0)
            a6 = vfma(x, w0, a6)
            c6 = vfma(x, w1, c6)
            x = vbcast(xq, xi + 7, w0)
            a7 = vfma(x, w0, a7)
            c7 = vfma(x, w1, c7)
            x = vbcast(xq, xi + 8, w0)
            a8 = vfma(x, w0, a8)
            c8 = vfma(x, w1, c8)
            x = vbcast(xq, xi + 9, w0)
            a9 = vfma(x, w0, a9)
            c9 = vfma(x, w1, c9)
            x = vbcast(xq, xi + 10, w0)
            a10 = vfma(x, w0, a10)
            c10 = vfma(x, w1, c10)
            x = vbcast(xq, xi + 11, w0)
            a11 = vfma(x, w0, a11)
            c11 = vfma(x, w1, c11)
            wi += B
        # blk[q * B + m]: position q, channel m of the block
        vstore(blk, 0, a0)
        vstore(blk, nl, c0)
        vstore(blk, 2 * nl, a1)
        vstore(blk, 3 * nl, c1)
        vstore(blk, 4 * nl, a2)
        vstore(blk, 5 * nl, c2)
        vstore(blk, 6 * nl, a3)
        vstore(blk, 7 * nl, c3)
        vstore(blk, 8 * nl, a4)
        vstore(blk, 9 * nl, c4)
        vstore(blk, 10 * nl, a5)
        vstore(blk, 11 * nl, c5)
        vstore(blk, 12 * nl, a6)
        vstore(blk, 13 * nl, c6)
        vstore(blk, 14 * nl, a7)
        vstore(blk, 15 * nl, c7)
        vstore(blk, 16 * nl, a8)
        vstore(blk, 17 * nl, c8)
        vstore(blk, 18 * nl, a9)
        vstore(blk, 19 * nl, c9)
        vstore(blk, 20 * nl, a10)
        vstore(blk, 21 * nl, c10)
        vstore(blk, 22 * nl, a11)
        vstore(blk, 23 * nl, c11)
        orow = (n * O + gi * Og + oc0) * plane
        for q in range(PIXELS):
            i = (p0 + q) // pitch
            j = p0 + q - i * pitch
            if i >= Ho:
                break
            if j >= Wo:
                continue
            o = orow + i * Wo + j
            for m in range(nm):
                z = blk[q * B + m]
                if has_res:
                    z += res[o + m * plane]
                out[o + m * plane] = epilogue1(z, leaky, slope, lo, hi)
