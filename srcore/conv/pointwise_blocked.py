"""Explicit-SIMD float32 pointwise (1x1, stride 1, unpadded, ungrouped) convolution writing the NCHW16c
layout (:mod:`.nchwc`), from an NCHW16c or an NCHW input.

ONNX Runtime's NCHWc 1x1 kernel: a vector holds 16 output channels of one pixel, so a block of
12 output pixels of two 16-channel output blocks is 24 accumulators; per input channel two weight
vector loads (the weights packed once into ``(out blocks, in channels, 16)``) and 12 broadcasts of
that channel's input at the 12 pixels (``vbroadcastss`` from memory: 16 floats apart in NCHW16c, 1
in NCHW), 24 FMAs. No transposes and no lane waste at any plane size: the 7x7 and 14x14 planes of
a mobile net's late layers fill every lane. The sums run over the input channels in order from the
bias, as :mod:`.pointwise`'s (the same bits; a padding channel adds ``0 * x``). The residual is
NCHW16c like the output; clamp and hardswish / hardsigmoid in the stores (:func:`.depthwise.finish`).
Pixels go 12, then 4, then 1 at a time; work splits by output blocks (an odd one alone).
"""
from __future__ import annotations

import math

import numba
import numpy as np

from ..errors import ShapeError
from ._jit import helper, plain_args
from . import nchwc
from .depthwise import ACTIVATIONS, finish
from .depthwise_blocked import _rows, _t16
from .direct import _JIT, _tag, run_bound, serial_kernel
from .simd import fptr, vbcast, vfma, vload, vsplat, vstore, vstore_n

#: channels per block (the vector's lanes)
LANES = 16


@helper
def _put(a, pout, pres, oi, has_res, lo, hi, act, c3, c6):
    vstore(pout, oi, finish(a, pres, oi, LANES, has_res, False, 1.0, lo, hi, act, c3, c6))


@helper
def _px12x2(px, pw, pout, pres, x0, wi, wstep, oi, ostep, ncb, cs, inner, ps, bv, bw, z, has_res, lo, hi, act,
        c3, c6):
    """12 pixels x two output blocks (24 accumulators): input channel ``(cb, l)`` of the first pixel at
    ``x0 + cb * cs + l``, pixels ``ps`` apart; the blocks' weights from ``wi`` and ``wi + wstep`` (16 a
    channel), their outputs NCHW16c from ``oi`` and ``oi + ostep``."""
    a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11 = bv, bv, bv, bv, bv, bv, bv, bv, bv, bv, bv, bv
    d0, d1, d2, d3, d4, d5, d6, d7, d8, d9, d10, d11 = bw, bw, bw, bw, bw, bw, bw, bw, bw, bw, bw, bw
    for cb in range(ncb):
        xi = x0 + cb * cs
        for _l in range(inner):
            w = vload(pw, wi, z)
            u = vload(pw, wi + wstep, z)
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
            v = vbcast(px, xi + 6 * ps, z)
            a6 = vfma(v, w, a6)
            d6 = vfma(v, u, d6)
            v = vbcast(px, xi + 7 * ps, z)
            a7 = vfma(v, w, a7)
            d7 = vfma(v, u, d7)
            v = vbcast(px, xi + 8 * ps, z)
            a8 = vfma(v, w, a8)
            d8 = vfma(v, u, d8)
            v = vbcast(px, xi + 9 * ps, z)
            a9 = vfma(v, w, a9)
            d9 = vfma(v, u, d9)
            v = vbcast(px, xi + 10 * ps, z)
            a10 = vfma(v, w, a10)
            d10 = vfma(v, u, d10)
            v = vbcast(px, xi + 11 * ps, z)
            a11 = vfma(v, w, a11)
            d11 = vfma(v, u, d11)
            xi += 1
            wi += LANES
    _put(a0, pout, pres, oi + 0, has_res, lo, hi, act, c3, c6)
    _put(a1, pout, pres, oi + 16, has_res, lo, hi, act, c3, c6)
    _put(a2, pout, pres, oi + 32, has_res, lo, hi, act, c3, c6)
    _put(a3, pout, pres, oi + 48, has_res, lo, hi, act, c3, c6)
    _put(a4, pout, pres, oi + 64, has_res, lo, hi, act, c3, c6)
    _put(a5, pout, pres, oi + 80, has_res, lo, hi, act, c3, c6)
    _put(a6, pout, pres, oi + 96, has_res, lo, hi, act, c3, c6)
    _put(a7, pout, pres, oi + 112, has_res, lo, hi, act, c3, c6)
    _put(a8, pout, pres, oi + 128, has_res, lo, hi, act, c3, c6)
    _put(a9, pout, pres, oi + 144, has_res, lo, hi, act, c3, c6)
    _put(a10, pout, pres, oi + 160, has_res, lo, hi, act, c3, c6)
    _put(a11, pout, pres, oi + 176, has_res, lo, hi, act, c3, c6)
    _put(d0, pout, pres, oi + ostep + 0, has_res, lo, hi, act, c3, c6)
    _put(d1, pout, pres, oi + ostep + 16, has_res, lo, hi, act, c3, c6)
    _put(d2, pout, pres, oi + ostep + 32, has_res, lo, hi, act, c3, c6)
    _put(d3, pout, pres, oi + ostep + 48, has_res, lo, hi, act, c3, c6)
    _put(d4, pout, pres, oi + ostep + 64, has_res, lo, hi, act, c3, c6)
    _put(d5, pout, pres, oi + ostep + 80, has_res, lo, hi, act, c3, c6)
    _put(d6, pout, pres, oi + ostep + 96, has_res, lo, hi, act, c3, c6)
    _put(d7, pout, pres, oi + ostep + 112, has_res, lo, hi, act, c3, c6)
    _put(d8, pout, pres, oi + ostep + 128, has_res, lo, hi, act, c3, c6)
    _put(d9, pout, pres, oi + ostep + 144, has_res, lo, hi, act, c3, c6)
    _put(d10, pout, pres, oi + ostep + 160, has_res, lo, hi, act, c3, c6)
    _put(d11, pout, pres, oi + ostep + 176, has_res, lo, hi, act, c3, c6)


@helper
def _px4x2(px, pw, pout, pres, x0, wi, wstep, oi, ostep, ncb, cs, inner, ps, bv, bw, z, has_res, lo, hi, act,
        c3, c6):
    """:func:`_px12x2` for 4 pixels x two output blocks."""
    a0, a1, a2, a3 = bv, bv, bv, bv
    d0, d1, d2, d3 = bw, bw, bw, bw
    for cb in range(ncb):
        xi = x0 + cb * cs
        for _l in range(inner):
            w = vload(pw, wi, z)
            u = vload(pw, wi + wstep, z)
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
            xi += 1
            wi += LANES
    _put(a0, pout, pres, oi + 0, has_res, lo, hi, act, c3, c6)
    _put(a1, pout, pres, oi + 16, has_res, lo, hi, act, c3, c6)
    _put(a2, pout, pres, oi + 32, has_res, lo, hi, act, c3, c6)
    _put(a3, pout, pres, oi + 48, has_res, lo, hi, act, c3, c6)
    _put(d0, pout, pres, oi + ostep + 0, has_res, lo, hi, act, c3, c6)
    _put(d1, pout, pres, oi + ostep + 16, has_res, lo, hi, act, c3, c6)
    _put(d2, pout, pres, oi + ostep + 32, has_res, lo, hi, act, c3, c6)
    _put(d3, pout, pres, oi + ostep + 48, has_res, lo, hi, act, c3, c6)


@helper
def _px1x2(px, pw, pout, pres, x0, wi, wstep, oi, ostep, ncb, cs, inner, ps, bv, bw, z, has_res, lo, hi, act,
        c3, c6):
    """:func:`_px12x2` for 1 pixel x two output blocks."""
    a0 = bv
    d0 = bw
    for cb in range(ncb):
        xi = x0 + cb * cs
        for _l in range(inner):
            w = vload(pw, wi, z)
            u = vload(pw, wi + wstep, z)
            v = vbcast(px, xi, z)
            a0 = vfma(v, w, a0)
            d0 = vfma(v, u, d0)
            xi += 1
            wi += LANES
    _put(a0, pout, pres, oi + 0, has_res, lo, hi, act, c3, c6)
    _put(d0, pout, pres, oi + ostep + 0, has_res, lo, hi, act, c3, c6)


@helper
def _px12(px, pw, pout, pres, x0, wi, wstep, oi, ostep, ncb, cs, inner, ps, bv, bw, z, has_res, lo, hi, act,
        c3, c6):
    """:func:`_px12x2` for 12 pixels x one output block."""
    a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11 = bv, bv, bv, bv, bv, bv, bv, bv, bv, bv, bv, bv
    for cb in range(ncb):
        xi = x0 + cb * cs
        for _l in range(inner):
            w = vload(pw, wi, z)
            v = vbcast(px, xi, z)
            a0 = vfma(v, w, a0)
            v = vbcast(px, xi + 1 * ps, z)
            a1 = vfma(v, w, a1)
            v = vbcast(px, xi + 2 * ps, z)
            a2 = vfma(v, w, a2)
            v = vbcast(px, xi + 3 * ps, z)
            a3 = vfma(v, w, a3)
            v = vbcast(px, xi + 4 * ps, z)
            a4 = vfma(v, w, a4)
            v = vbcast(px, xi + 5 * ps, z)
            a5 = vfma(v, w, a5)
            v = vbcast(px, xi + 6 * ps, z)
            a6 = vfma(v, w, a6)
            v = vbcast(px, xi + 7 * ps, z)
            a7 = vfma(v, w, a7)
            v = vbcast(px, xi + 8 * ps, z)
            a8 = vfma(v, w, a8)
            v = vbcast(px, xi + 9 * ps, z)
            a9 = vfma(v, w, a9)
            v = vbcast(px, xi + 10 * ps, z)
            a10 = vfma(v, w, a10)
            v = vbcast(px, xi + 11 * ps, z)
            a11 = vfma(v, w, a11)
            xi += 1
            wi += LANES
    _put(a0, pout, pres, oi + 0, has_res, lo, hi, act, c3, c6)
    _put(a1, pout, pres, oi + 16, has_res, lo, hi, act, c3, c6)
    _put(a2, pout, pres, oi + 32, has_res, lo, hi, act, c3, c6)
    _put(a3, pout, pres, oi + 48, has_res, lo, hi, act, c3, c6)
    _put(a4, pout, pres, oi + 64, has_res, lo, hi, act, c3, c6)
    _put(a5, pout, pres, oi + 80, has_res, lo, hi, act, c3, c6)
    _put(a6, pout, pres, oi + 96, has_res, lo, hi, act, c3, c6)
    _put(a7, pout, pres, oi + 112, has_res, lo, hi, act, c3, c6)
    _put(a8, pout, pres, oi + 128, has_res, lo, hi, act, c3, c6)
    _put(a9, pout, pres, oi + 144, has_res, lo, hi, act, c3, c6)
    _put(a10, pout, pres, oi + 160, has_res, lo, hi, act, c3, c6)
    _put(a11, pout, pres, oi + 176, has_res, lo, hi, act, c3, c6)


@helper
def _px4(px, pw, pout, pres, x0, wi, wstep, oi, ostep, ncb, cs, inner, ps, bv, bw, z, has_res, lo, hi, act,
        c3, c6):
    """:func:`_px12x2` for 4 pixels x one output block."""
    a0, a1, a2, a3 = bv, bv, bv, bv
    for cb in range(ncb):
        xi = x0 + cb * cs
        for _l in range(inner):
            w = vload(pw, wi, z)
            v = vbcast(px, xi, z)
            a0 = vfma(v, w, a0)
            v = vbcast(px, xi + 1 * ps, z)
            a1 = vfma(v, w, a1)
            v = vbcast(px, xi + 2 * ps, z)
            a2 = vfma(v, w, a2)
            v = vbcast(px, xi + 3 * ps, z)
            a3 = vfma(v, w, a3)
            xi += 1
            wi += LANES
    _put(a0, pout, pres, oi + 0, has_res, lo, hi, act, c3, c6)
    _put(a1, pout, pres, oi + 16, has_res, lo, hi, act, c3, c6)
    _put(a2, pout, pres, oi + 32, has_res, lo, hi, act, c3, c6)
    _put(a3, pout, pres, oi + 48, has_res, lo, hi, act, c3, c6)


@helper
def _px1(px, pw, pout, pres, x0, wi, wstep, oi, ostep, ncb, cs, inner, ps, bv, bw, z, has_res, lo, hi, act,
        c3, c6):
    """:func:`_px12x2` for 1 pixel x one output block."""
    a0 = bv
    for cb in range(ncb):
        xi = x0 + cb * cs
        for _l in range(inner):
            w = vload(pw, wi, z)
            v = vbcast(px, xi, z)
            a0 = vfma(v, w, a0)
            xi += 1
            wi += LANES
    _put(a0, pout, pres, oi + 0, has_res, lo, hi, act, c3, c6)


@helper
def _planes(ps, so, pout, pres, c0, m, P, p, cnt, n, O, has_res, lo, hi, act, c3, c6, z):
    """An NCHW output tile: the ``cnt`` pixel vectors (16 channels each) at ``ps[so:]`` transposed
    (:func:`.depthwise_blocked._t16`) into channels ``c0 .. c0 + m - 1``, pixels ``p .. p + cnt - 1``
    of the planes, the epilogue (and an NCHW residual) in the masked stores."""
    t = _t16(_rows(ps, so, LANES, LANES, LANES, z))
    for l in range(m):
        oi = (n * O + c0 + l) * P + p
        vstore_n(pout, oi, finish(t[l], pres, oi, cnt, has_res, False, 1.0, lo, hi, act, c3, c6), cnt)


@plain_args
@numba.njit(**_JIT)
def pwb_tasks(x, xblk, C, P, wq, bq, nob, O, oblk, out, res, has_res, lo, hi, act, tag, scr, n, b0, b1):
    """Output blocks ``b0 <= b < b1`` of image ``n`` (every pixel: :func:`pwb_range`)."""
    pwb_range(x, xblk, C, P, wq, bq, nob, O, oblk, out, res, has_res, lo, hi, act, tag, scr, n, b0, b1, 0, P)


@numba.njit(**_JIT)
def pwb_images(x, xblk, C, P, wq, bq, nob, O, oblk, out, res, has_res, lo, hi, act, tag, scr, n0, n1, b0, b1):
    """:func:`pwb_tasks` for images ``n0 <= n < n1`` (a batch in one call: :class:`.direct.SerialTasks`),
    the NCHW-out tile ``scr`` zeroed before each (see :meth:`_Run.run_tasks`)."""
    for n in range(n0, n1):
        if not oblk:
            scr[:] = 0.0
        pwb_range(x, xblk, C, P, wq, bq, nob, O, oblk, out, res, has_res, lo, hi, act, tag, scr, n, b0, b1, 0, P)


@plain_args
@numba.njit(**_JIT)
def pwb_range(x, xblk, C, P, wq, bq, nob, O, oblk, out, res, has_res, lo, hi, act, tag, scr, n, b0, b1, q0, q1):
    """Output blocks ``b0 <= b < b1``, pixels ``q0 <= p < q1`` (a band of rows: a thread of a split by
    rows reads only its band's input) of image ``n``: ``x`` (N * blocks * P * 16,) NCHW16c with ``xblk``,
    else (N * C * P,); ``wq`` (nob * Cw * 16,) with Cw the input's channels (padded to the blocks with
    ``xblk``, zero weights there), ``bq`` (nob * 16,); ``out``/``res`` (N * nob * P * 16,) with ``oblk``,
    else NCHW (N * O * P,): then the accumulators go through ``scr`` (512 floats) and are transposed
    into the planes (:func:`_planes`)."""
    z = vsplat(tag, np.float32(0.0))
    c3, c6 = vsplat(tag, 3.0), vsplat(tag, 6.0)
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
    # NCHW out: raw accumulators to the scratch tile (identity epilogue), the epilogue after the transpose
    eres, elo, ehi, eact = (has_res, lo, hi, act) if oblk else (False, ninf, pinf, 0)
    pouts = fptr(out)
    b = b0
    while b < b1:
        two = b + 1 < b1   # two output blocks share each broadcast input
        bv = vload(pb, b * LANES, z)
        bw = vload(pb, b * LANES + LANES, z) if two else bv
        wi = b * cw * LANES
        m0, m1 = min(LANES, O - b * LANES), min(LANES, O - b * LANES - LANES)
        p = q0
        while p < q1:
            r = 12 if p + 12 <= q1 else (4 if p + 4 <= q1 else 1)
            ob, ostep = ((n * nob + b) * P16 + p * LANES, P16) if oblk else (0, 256)
            xi = xbase + p * ps
            if two and r == 12:
                _px12x2(px, pw, pout, pres, xi, wi, cw * LANES, ob, ostep, ncb, cs, inner, ps, bv, bw, z, eres,
                        elo, ehi, eact, c3, c6)
            elif two and r == 4:
                _px4x2(px, pw, pout, pres, xi, wi, cw * LANES, ob, ostep, ncb, cs, inner, ps, bv, bw, z, eres, elo,
                       ehi, eact, c3, c6)
            elif two:
                _px1x2(px, pw, pout, pres, xi, wi, cw * LANES, ob, ostep, ncb, cs, inner, ps, bv, bw, z, eres, elo,
                       ehi, eact, c3, c6)
            elif r == 12:
                _px12(px, pw, pout, pres, xi, wi, 0, ob, 0, ncb, cs, inner, ps, bv, bv, z, eres, elo, ehi, eact, c3,
                      c6)
            elif r == 4:
                _px4(px, pw, pout, pres, xi, wi, 0, ob, 0, ncb, cs, inner, ps, bv, bv, z, eres, elo, ehi, eact, c3, c6)
            else:
                _px1(px, pw, pout, pres, xi, wi, 0, ob, 0, ncb, cs, inner, ps, bv, bv, z, eres, elo, ehi, eact, c3, c6)
            if not oblk:
                _planes(pout, 0, pouts, pres, b * LANES, m0, P, p, r, n, O, has_res, lo, hi, act, c3, c6, z)
                if two:
                    _planes(pout, 256, pouts, pres, b * LANES + LANES, m1, P, p, r, n, O, has_res, lo, hi, act, c3,
                            c6, z)
            p += r
        b += 2 if two else 1


class BlockedPointwiseConv:
    """A 1x1 conv with fixed weights ``(O, C)`` (or ``(O, C, 1, 1)``) writing NCHW16c:
    ``conv(x, out, residual=None, threads=1)`` writes ``act(clamp(W @ x + bias (+ residual), lo, hi))``
    into ``out`` (N, ceil(O / 16), H, W, 16), or (N, O, H, W) without ``blocked_out`` (the residual in
    the output's layout); ``x`` is NCHW16c with ``blocked_in`` (the default), else a C-contiguous
    (N, C, H, W) array. ``activation``: None, ``"hardswish"`` or ``"hardsigmoid"``."""

    def __init__(self, weight, bias, lo=-math.inf, hi=math.inf, activation=None, blocked_in=True, blocked_out=True):
        w = np.asarray(weight, np.float32)
        if w.ndim == 4 and w.shape[2:] == (1, 1):
            w = w.reshape(w.shape[:2])
        if w.ndim != 2:
            raise ShapeError(f"BlockedPointwiseConv: weight must be (O, C) or (O, C, 1, 1), got shape {w.shape}")
        if (activation or "none") not in ACTIVATIONS:
            raise ShapeError(f"BlockedPointwiseConv: activation {activation!r} is not one of {', '.join(ACTIVATIONS)}")
        self.O, self.C = w.shape
        self.blocked_in, self.blocked_out = bool(blocked_in), bool(blocked_out)
        self.nob = -(-self.O // LANES)
        cw = -(-self.C // LANES) * LANES if self.blocked_in else self.C
        wq = np.zeros((self.nob * LANES, cw), np.float32)
        wq[:self.O, :self.C] = w
        #: (out blocks, input channels, 16): one vector of an output block's weights per input channel
        self.wq = np.ascontiguousarray(wq.reshape(self.nob, LANES, cw).transpose(0, 2, 1)).reshape(-1)
        self.bq = np.zeros(self.nob * LANES, np.float32)
        if bias is not None:
            self.bq[:self.O] = np.asarray(bias, np.float32).reshape(self.O)
        self.lo, self.hi = float(lo), float(hi)
        self.act = ACTIVATIONS.index(activation or "none")
        self.tag = _tag(LANES)
        self._none = np.zeros(1, np.float32)
        self._bound = nchwc.LastBind()

    def out_shape(self, shape):
        """The output shape (NCHW16c, or NCHW without ``blocked_out``) for a logical (N, C, H, W) input."""
        out = (shape[0], self.O, shape[2], shape[3])
        return nchwc.blocked_shape(out, LANES) if self.blocked_out else out

    def bind(self, x, out, residual=None) -> _Run:
        return self._bound.get(self._bind, x, out, residual)

    def _bind(self, x, out, residual) -> _Run:
        return _Run(self, x, out, residual)

    def __call__(self, x, out, residual=None, threads: int = 1):
        run_bound(self.bind(x, out, residual), threads)
        return out


class _Run:
    """One call (the bound-call protocol of :func:`.direct.run_bound`): tasks are output blocks."""
    __slots__ = ("_args", "_entry", "channels", "images", "tasks")

    def __init__(self, conv: BlockedPointwiseConv, x, out, residual):
        if conv.blocked_in:
            N, C, H, W = nchwc.check_blocked("BlockedPointwiseConv", x, conv.C, LANES)
        else:
            if x.ndim != 4 or x.shape[1] != conv.C or not x.flags.c_contiguous:
                raise ShapeError(f"BlockedPointwiseConv: input must be a C-contiguous (N, {conv.C}, H, W) array, "
                                 f"got {x.shape}")
            N, C, H, W = x.shape
        want = conv.out_shape((N, C, H, W))
        if tuple(out.shape) != want or (residual is not None and tuple(residual.shape) != want):
            raise ShapeError(f"BlockedPointwiseConv: out / residual must be {want}, got {tuple(out.shape)} / "
                             f"{None if residual is None else tuple(residual.shape)}")
        self.images, self.channels, self.tasks = N, 0, conv.nob
        self._entry = None
        res = conv._none if residual is None else residual.reshape(-1)
        self._args = (x.reshape(-1), conv.blocked_in, C, H * W, conv.wq, conv.bq, conv.nob, conv.O, conv.blocked_out,
                      out.reshape(-1), res, residual is not None, conv.lo, conv.hi, conv.act, conv.tag)

    @property
    def args(self) -> tuple:
        """:func:`pwb_tasks`' arguments before ``(scr, n, b0, b1)``: for a caller that runs the task
        ranges its own way (an OpenMP region), each range with its own 512-float zeroed ``scr``."""
        return self._args

    def fill(self, n: int, c0: int, c1: int):
        """Nothing: the kernel reads its input in place."""

    def run_serial(self):
        """Every image's tasks on the calling thread, in one call (:func:`.direct.serial_kernel`)."""
        tile = np.empty(2 * LANES * LANES, np.float32)   # (zeroed by the kernel: see run_tasks)
        args = (*self._args, tile, 0, self.images, 0, self.tasks)
        serial_kernel(self, pwb_images, args)(*args)

    def serial_calls(self):
        """:meth:`run_serial` as a plain ``(fn, args)`` call on its compiled entry point, for a caller
        that makes this call again on the same buffers on one thread (:func:`.direct.serial_calls`);
        None until the entry is found (from the second run)."""
        if not self._entry:
            return None
        tile = np.empty(2 * LANES * LANES, np.float32)
        return ((self._entry, (*self._args, tile, 0, self.images, 0, self.tasks)),)

    def run_tasks(self, n: int, t0: int, t1: int):
        # (the NCHW-out tile: per call, as calls and task ranges may run at once; zeroed, as the rows past a
        # block's pixels go through the epilogue's arithmetic too, and stale memory there held subnormal
        # floats: each one a microcode assist, 45 -> 170 us on 96 -> 576 at 7x7)
        pwb_tasks(*self._args, np.zeros(2 * LANES * LANES, np.float32), n, t0, t1)
