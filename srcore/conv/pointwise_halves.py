""":mod:`.pointwise_blocked`'s NCHW16c 1x1 conv on 8-lane vectors: each 16-channel block as two
halves, a register block of 6 output pixels x one block (12 accumulators, the two halves' weight
vectors and one broadcast: 15 of AVX2's 16 ``ymm`` registers).

The 16-lane kernel's 12 pixels x two blocks are 24 ``zmm`` accumulators; where the CPU has no
AVX-512, LLVM splits each vector in two and 48 ``ymm`` accumulators spill to the stack. Same
layouts, weights packing, epilogue and summation order as :mod:`.pointwise_blocked` (the same bits:
every lane's sum runs over the input channels in order from the bias); a candidate beside it, chosen
by timing on the machine. Pixels go 6, then 4, then 1 at a time; work splits by output blocks.
"""
from __future__ import annotations

import numba
import numpy as np

from ._jit import helper, plain_args
from .direct import _JIT, _tag, serial_kernel
from .pointwise_blocked import LANES, BlockedPointwiseConv, _planes, _px1x2, _px4x2, _put
from .simd import fptr, vbcast, vfma, vload, vsplat

#: floats of a half block (the 8-lane vector)
HALF = 8


@helper
def _px6h(px, pw, pout, pres, x0, wi, oi, ncb, cs, inner, ps, bv, bw, z, has_res, lo, hi, act, c3, c6):
    """6 pixels x one 16-channel block as two 8-lane halves (12 accumulators): input channel
    ``(cb, l)`` of the first pixel at ``x0 + cb * cs + l``, pixels ``ps`` apart; the block's weights
    from ``wi`` (16 a channel), its outputs NCHW16c from ``oi``."""
    a0, a1, a2, a3, a4, a5 = bv, bv, bv, bv, bv, bv
    d0, d1, d2, d3, d4, d5 = bw, bw, bw, bw, bw, bw
    for cb in range(ncb):
        xi = x0 + cb * cs
        for _l in range(inner):
            w = vload(pw, wi, z)
            u = vload(pw, wi + HALF, z)
            v = vbcast(px, xi, z)
            a0 = vfma(v, w, a0)
            d0 = vfma(v, u, d0)
            v = vbcast(px, xi + 1 * ps, z)
            a1 = vfma(v, w, a1)
            d1 = vfma(v, u, d1)
            v = vbcast(px, xi + 2 * ps, z)
            a2 = vfma(v, w, a2)
            d2 = vfma(v, u, d2)
            v = vbcast(px, xi + 3 * ps, z)
            a3 = vfma(v, w, a3)
            d3 = vfma(v, u, d3)
            v = vbcast(px, xi + 4 * ps, z)
            a4 = vfma(v, w, a4)
            d4 = vfma(v, u, d4)
            v = vbcast(px, xi + 5 * ps, z)
            a5 = vfma(v, w, a5)
            d5 = vfma(v, u, d5)
            xi += 1
            wi += LANES
    _put(a0, pout, pres, oi + 0, has_res, lo, hi, act, c3, c6)
    _put(a1, pout, pres, oi + 16, has_res, lo, hi, act, c3, c6)
    _put(a2, pout, pres, oi + 32, has_res, lo, hi, act, c3, c6)
    _put(a3, pout, pres, oi + 48, has_res, lo, hi, act, c3, c6)
    _put(a4, pout, pres, oi + 64, has_res, lo, hi, act, c3, c6)
    _put(a5, pout, pres, oi + 80, has_res, lo, hi, act, c3, c6)
    _put(d0, pout, pres, oi + HALF, has_res, lo, hi, act, c3, c6)
    _put(d1, pout, pres, oi + HALF + 16, has_res, lo, hi, act, c3, c6)
    _put(d2, pout, pres, oi + HALF + 32, has_res, lo, hi, act, c3, c6)
    _put(d3, pout, pres, oi + HALF + 48, has_res, lo, hi, act, c3, c6)
    _put(d4, pout, pres, oi + HALF + 64, has_res, lo, hi, act, c3, c6)
    _put(d5, pout, pres, oi + HALF + 80, has_res, lo, hi, act, c3, c6)


@plain_args
@numba.njit(**_JIT)
def pwh_range(x, xblk, C, P, wq, bq, nob, O, oblk, out, res, has_res, lo, hi, act, tag, scr, n, b0, b1, q0, q1):
    """:func:`.pointwise_blocked.pwb_range` on 8-lane vectors (``tag``: 8 lanes): output blocks
    ``b0 <= b < b1``, pixels ``q0 <= p < q1`` of image ``n``, the same arguments."""
    z = vsplat(tag, np.float32(0.0))
    c3, c6 = vsplat(tag, 3.0), vsplat(tag, 6.0)
    wide = np.zeros((1, 1), np.float32)   # (the NCHW-out tile's 16x16 transposes)
    z16 = vsplat(wide, np.float32(0.0))
    c316, c616 = vsplat(wide, 3.0), vsplat(wide, 6.0)
    px, pw, pb = fptr(x), fptr(wq), fptr(bq)
    pres = fptr(res)
    pout = fptr(out) if oblk else fptr(scr)
    ninf, pinf = -np.inf, np.inf
    if xblk:
        ncb = -(-C // LANES)
        cs, inner, ps = P * LANES, LANES, LANES
        xbase = n * ncb * P * LANES
    else:
        ncb, cs, inner, ps = C, P, 1, 1
        xbase = n * C * P
    cw = ncb * inner
    P16 = P * LANES
    eres, elo, ehi, eact = (has_res, lo, hi, act) if oblk else (False, ninf, pinf, 0)
    pouts = fptr(out)
    for b in range(b0, b1):
        bv = vload(pb, b * LANES, z)
        bw = vload(pb, b * LANES + HALF, z)
        wi = b * cw * LANES
        m0 = min(LANES, O - b * LANES)
        p = q0
        while p < q1:
            r = 6 if p + 6 <= q1 else (4 if p + 4 <= q1 else 1)
            ob = (n * nob + b) * P16 + p * LANES if oblk else 0
            xi = xbase + p * ps
            if r == 6:
                _px6h(px, pw, pout, pres, xi, wi, ob, ncb, cs, inner, ps, bv, bw, z, eres, elo, ehi, eact, c3, c6)
            elif r == 4:
                _px4x2(px, pw, pout, pres, xi, wi, HALF, ob, HALF, ncb, cs, inner, ps, bv, bw, z, eres, elo, ehi,
                       eact, c3, c6)
            else:
                _px1x2(px, pw, pout, pres, xi, wi, HALF, ob, HALF, ncb, cs, inner, ps, bv, bw, z, eres, elo, ehi,
                       eact, c3, c6)
            if not oblk:
                _planes(pout, 0, pouts, pres, b * LANES, m0, P, p, r, n, O, has_res, lo, hi, act, c316, c616, z16)
            p += r


@plain_args
@numba.njit(**_JIT)
def pwh_tasks(x, xblk, C, P, wq, bq, nob, O, oblk, out, res, has_res, lo, hi, act, tag, scr, n, b0, b1):
    """Output blocks ``b0 <= b < b1`` of image ``n`` (every pixel: :func:`pwh_range`)."""
    pwh_range(x, xblk, C, P, wq, bq, nob, O, oblk, out, res, has_res, lo, hi, act, tag, scr, n, b0, b1, 0, P)


@numba.njit(**_JIT)
def pwh_images(x, xblk, C, P, wq, bq, nob, O, oblk, out, res, has_res, lo, hi, act, tag, scr, n0, n1, b0, b1):
    """:func:`pwh_tasks` for images ``n0 <= n < n1``, the NCHW-out tile ``scr`` zeroed before each."""
    for n in range(n0, n1):
        if not oblk:
            scr[:] = 0.0
        pwh_range(x, xblk, C, P, wq, bq, nob, O, oblk, out, res, has_res, lo, hi, act, tag, scr, n, b0, b1, 0, P)


class HalvesPointwiseConv(BlockedPointwiseConv):
    """:class:`.pointwise_blocked.BlockedPointwiseConv` (same arguments, layouts and bits) on the
    8-lane kernel :func:`pwh_range`."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.tag = _tag(HALF)

    def _bind(self, x, out, residual):
        return _HalvesRun(self, x, out, residual)


class _HalvesRun:
    """One call (the bound-call protocol of :func:`.direct.run_bound`): tasks are output blocks."""
    __slots__ = ("_args", "_entry", "channels", "images", "tasks")

    def __init__(self, conv: HalvesPointwiseConv, x, out, residual):
        from .pointwise_blocked import _Run

        base = _Run(conv, x, out, residual)   # (its checks and arguments: the kernels take the same)
        self._args, self.images, self.channels, self.tasks = base.args, base.images, base.channels, base.tasks
        self._entry = None

    @property
    def args(self) -> tuple:
        return self._args

    def fill(self, n: int, c0: int, c1: int):
        """Nothing: the kernel reads its input in place."""

    def run_serial(self):
        tile = np.zeros(2 * LANES * LANES, np.float32)
        args = (*self._args, tile, 0, self.images, 0, self.tasks)
        serial_kernel(self, pwh_images, args)(*args)

    def serial_calls(self):
        if not self._entry:
            return None
        tile = np.zeros(2 * LANES * LANES, np.float32)
        return ((self._entry, (*self._args, tile, 0, self.images, 0, self.tasks)),)

    def run_tasks(self, n: int, t0: int, t1: int):
        pwh_tasks(*self._args, np.zeros(2 * LANES * LANES, np.float32), n, t0, t1)
