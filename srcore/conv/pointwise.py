"""Explicit-SIMD float32 pointwise (1x1, stride 1, unpadded, ungrouped) convolution on NCHW.

A 1x1 conv is a GEMM, ``out[n] = W @ x[n]`` (O x C by C x H*W); on a mobile net's small planes
BLAS spends much of it on packing and per-call overhead and writes its output before the bias and
clamp pass. This kernel reads the input in place (no copy: a channel's pixels are contiguous in
NCHW) and holds a block of 6 output channels x 4 vectors of pixels in registers (24 accumulators,
of the 32 AVX-512 registers; per input channel 4 unaligned loads, 6 weight broadcasts, 24 FMAs;
the weights packed once into ``(blocks, C, 6)``); the vectors past the last whole block of 4 go
one at a time. A plane's last vector is a masked load and store (no overlap with the vector
before, so a residual that is the output buffer itself is read before it is written, and nothing
is added twice; any plane size, down to one pixel). Bias is the accumulators' start; an optional
residual, a clamp (relu, relu6) and hardswish / hardsigmoid (:func:`.depthwise.finish`, torch's
float32 formulas) are fused into the stores. Work splits by blocks of output channels.

Lanes come from the CPU's features (:func:`.direct.lanes`), never its vendor; callers choose this
kernel by timing it against their other tactics (a BLAS GEMM) on the real shape.
"""
from __future__ import annotations

import math

import numba
import numpy as np

from ..errors import ShapeError
from ._jit import helper, plain_args
from .depthwise import ACTIVATIONS, finish
from .direct import _JIT, _tag, compiled_entry, exact_entry, lanes, run_split
from .simd import fptr, vbcast, vfma, vload, vload_n, vsplat, vstore, vstore_n

#: output channels per register block
OC_BLOCK = 6


@helper
def _store(a, pout, pres, oi, cnt, nl, has_res, lo, hi, act, c3, c6):
    """An accumulator to ``out[oi:oi + cnt]``, the epilogue in the store (masked at a plane's end)."""
    if cnt > 0:
        v = finish(a, pres, oi, cnt, has_res, False, 1.0, lo, hi, act, c3, c6)
        if cnt == nl:
            vstore(pout, oi, v)
        else:
            vstore_n(pout, oi, v, cnt)


@helper
def _blk4(px, pw, pout, pres, xi, wi, oi, C, P, k, nlast, bv, z, has_res, lo, hi, act, c3, c6, nl):
    """4 vectors of pixels x 6 output channels (24 accumulators) from ``x[xi:]`` into
    ``out[oi:]``, the last vector ``nlast`` lanes (masked)."""
    a0, a1, a2, a3, a4, a5 = bv
    d0, d1, d2, d3, d4, d5 = bv
    e0, e1, e2, e3, e4, e5 = bv
    f0, f1, f2, f3, f4, f5 = bv
    for _c in range(C):
        u = vload(px, xi, z)
        t = vload(px, xi + nl, z)
        q = vload(px, xi + 2 * nl, z)
        r = vload_n(px, xi + 3 * nl, nlast, z)
        w = vbcast(pw, wi, z)
        a0, d0, e0, f0 = vfma(u, w, a0), vfma(t, w, d0), vfma(q, w, e0), vfma(r, w, f0)
        w = vbcast(pw, wi + 1, z)
        a1, d1, e1, f1 = vfma(u, w, a1), vfma(t, w, d1), vfma(q, w, e1), vfma(r, w, f1)
        w = vbcast(pw, wi + 2, z)
        a2, d2, e2, f2 = vfma(u, w, a2), vfma(t, w, d2), vfma(q, w, e2), vfma(r, w, f2)
        w = vbcast(pw, wi + 3, z)
        a3, d3, e3, f3 = vfma(u, w, a3), vfma(t, w, d3), vfma(q, w, e3), vfma(r, w, f3)
        w = vbcast(pw, wi + 4, z)
        a4, d4, e4, f4 = vfma(u, w, a4), vfma(t, w, d4), vfma(q, w, e4), vfma(r, w, f4)
        w = vbcast(pw, wi + 5, z)
        a5, d5, e5, f5 = vfma(u, w, a5), vfma(t, w, d5), vfma(q, w, e5), vfma(r, w, f5)
        xi += P
        wi += OC_BLOCK
    for i in range(k):   # (a switch on i: the accumulators stay in registers)
        _store((a0, a1, a2, a3, a4, a5)[i], pout, pres, oi, nl, nl, has_res, lo, hi, act, c3, c6)
        _store((d0, d1, d2, d3, d4, d5)[i], pout, pres, oi + nl, nl, nl, has_res, lo, hi, act, c3, c6)
        _store((e0, e1, e2, e3, e4, e5)[i], pout, pres, oi + 2 * nl, nl, nl, has_res, lo, hi, act, c3, c6)
        _store((f0, f1, f2, f3, f4, f5)[i], pout, pres, oi + 3 * nl, nlast, nl, has_res, lo, hi, act, c3, c6)
        oi += P


@helper
def _blk3(px, pw, pout, pres, xi, wi, oi, C, P, k, nlast, bv, z, has_res, lo, hi, act, c3, c6, nl):
    """3 vectors of pixels x 6 output channels (18 accumulators) from ``x[xi:]`` into
    ``out[oi:]``, the last vector ``nlast`` lanes (masked)."""
    a0, a1, a2, a3, a4, a5 = bv
    d0, d1, d2, d3, d4, d5 = bv
    e0, e1, e2, e3, e4, e5 = bv
    for _c in range(C):
        u = vload(px, xi, z)
        t = vload(px, xi + nl, z)
        q = vload_n(px, xi + 2 * nl, nlast, z)
        w = vbcast(pw, wi, z)
        a0, d0, e0 = vfma(u, w, a0), vfma(t, w, d0), vfma(q, w, e0)
        w = vbcast(pw, wi + 1, z)
        a1, d1, e1 = vfma(u, w, a1), vfma(t, w, d1), vfma(q, w, e1)
        w = vbcast(pw, wi + 2, z)
        a2, d2, e2 = vfma(u, w, a2), vfma(t, w, d2), vfma(q, w, e2)
        w = vbcast(pw, wi + 3, z)
        a3, d3, e3 = vfma(u, w, a3), vfma(t, w, d3), vfma(q, w, e3)
        w = vbcast(pw, wi + 4, z)
        a4, d4, e4 = vfma(u, w, a4), vfma(t, w, d4), vfma(q, w, e4)
        w = vbcast(pw, wi + 5, z)
        a5, d5, e5 = vfma(u, w, a5), vfma(t, w, d5), vfma(q, w, e5)
        xi += P
        wi += OC_BLOCK
    for i in range(k):   # (a switch on i: the accumulators stay in registers)
        _store((a0, a1, a2, a3, a4, a5)[i], pout, pres, oi, nl, nl, has_res, lo, hi, act, c3, c6)
        _store((d0, d1, d2, d3, d4, d5)[i], pout, pres, oi + nl, nl, nl, has_res, lo, hi, act, c3, c6)
        _store((e0, e1, e2, e3, e4, e5)[i], pout, pres, oi + 2 * nl, nlast, nl, has_res, lo, hi, act, c3, c6)
        oi += P


@helper
def _blk2(px, pw, pout, pres, xi, wi, oi, C, P, k, nlast, bv, z, has_res, lo, hi, act, c3, c6, nl):
    """2 vectors of pixels x 6 output channels (12 accumulators) from ``x[xi:]`` into
    ``out[oi:]``, the last vector ``nlast`` lanes (masked)."""
    a0, a1, a2, a3, a4, a5 = bv
    d0, d1, d2, d3, d4, d5 = bv
    for _c in range(C):
        u = vload(px, xi, z)
        t = vload_n(px, xi + nl, nlast, z)
        w = vbcast(pw, wi, z)
        a0, d0 = vfma(u, w, a0), vfma(t, w, d0)
        w = vbcast(pw, wi + 1, z)
        a1, d1 = vfma(u, w, a1), vfma(t, w, d1)
        w = vbcast(pw, wi + 2, z)
        a2, d2 = vfma(u, w, a2), vfma(t, w, d2)
        w = vbcast(pw, wi + 3, z)
        a3, d3 = vfma(u, w, a3), vfma(t, w, d3)
        w = vbcast(pw, wi + 4, z)
        a4, d4 = vfma(u, w, a4), vfma(t, w, d4)
        w = vbcast(pw, wi + 5, z)
        a5, d5 = vfma(u, w, a5), vfma(t, w, d5)
        xi += P
        wi += OC_BLOCK
    for i in range(k):   # (a switch on i: the accumulators stay in registers)
        _store((a0, a1, a2, a3, a4, a5)[i], pout, pres, oi, nl, nl, has_res, lo, hi, act, c3, c6)
        _store((d0, d1, d2, d3, d4, d5)[i], pout, pres, oi + nl, nlast, nl, has_res, lo, hi, act, c3, c6)
        oi += P


@helper
def _blk1(px, pw, pout, pres, xi, wi, oi, C, P, k, nlast, bv, z, has_res, lo, hi, act, c3, c6, nl):
    """1 vector of pixels x 6 output channels (6 accumulators) from ``x[xi:]`` into
    ``out[oi:]``, the last vector ``nlast`` lanes (masked)."""
    a0, a1, a2, a3, a4, a5 = bv
    for _c in range(C):
        u = vload_n(px, xi, nlast, z)
        w = vbcast(pw, wi, z)
        a0 = vfma(u, w, a0)
        w = vbcast(pw, wi + 1, z)
        a1 = vfma(u, w, a1)
        w = vbcast(pw, wi + 2, z)
        a2 = vfma(u, w, a2)
        w = vbcast(pw, wi + 3, z)
        a3 = vfma(u, w, a3)
        w = vbcast(pw, wi + 4, z)
        a4 = vfma(u, w, a4)
        w = vbcast(pw, wi + 5, z)
        a5 = vfma(u, w, a5)
        xi += P
        wi += OC_BLOCK
    for i in range(k):   # (a switch on i: the accumulators stay in registers)
        _store((a0, a1, a2, a3, a4, a5)[i], pout, pres, oi, nlast, nl, has_res, lo, hi, act, c3, c6)
        oi += P


@plain_args
@numba.njit(**_JIT)
def pw_tasks(x, wp, bp, out, res, has_res, lo, hi, act, n, C, O, P, Pm, tag, nl, b0, b1):
    """Output-channel blocks ``b0 <= b < b1`` of image ``n``, pixels ``[0, Pm)`` of the ``P``: ``x``
    (N*C*P,), ``wp`` (blocks*C*6,), ``bp`` (blocks*6,), ``out``/``res`` (N*O*P,). Pixels in blocks of
    4 vectors (24 accumulators), the 1-3 vectors left as one block; the last vector is masked."""
    xb = n * C * P
    ob = n * O * P
    z = vsplat(tag, np.float32(0.0))
    c3, c6 = vsplat(tag, 3.0), vsplat(tag, 6.0)
    px, pw, pout, pres = fptr(x), fptr(wp), fptr(out), fptr(res)
    nv = -(-Pm // nl)           # vectors, the last one partial when nl does not divide Pm
    last = Pm - (nv - 1) * nl   # its lanes
    for b in range(b0, b1):
        o0 = b * OC_BLOCK
        wb = b * C * OC_BLOCK
        k = min(OC_BLOCK, O - o0)   # rows past O belong to the zero-padded last block: not stored
        bv = (vsplat(tag, bp[o0]), vsplat(tag, bp[o0 + 1]), vsplat(tag, bp[o0 + 2]), vsplat(tag, bp[o0 + 3]),
              vsplat(tag, bp[o0 + 4]), vsplat(tag, bp[o0 + 5]))
        v = 0
        while v + 4 <= nv:
            nlast = last if v + 4 == nv else nl
            _blk4(px, pw, pout, pres, xb + v * nl, wb, ob + o0 * P + v * nl, C, P, k, nlast, bv, z, has_res, lo, hi,
                  act, c3, c6, nl)
            v += 4
        r = nv - v
        xi, oi = xb + v * nl, ob + o0 * P + v * nl
        if r == 3:
            _blk3(px, pw, pout, pres, xi, wb, oi, C, P, k, last, bv, z, has_res, lo, hi, act, c3, c6, nl)
        elif r == 2:
            _blk2(px, pw, pout, pres, xi, wb, oi, C, P, k, last, bv, z, has_res, lo, hi, act, c3, c6, nl)
        elif r == 1:
            _blk1(px, pw, pout, pres, xi, wb, oi, C, P, k, last, bv, z, has_res, lo, hi, act, c3, c6, nl)


@helper
def _scatter(a, pout, pres, oi, P, cnt, prb, pblk, has_res, lo, hi, act, c3, c6):
    """An accumulator over output channels ``o .. o + cnt - 1`` of one pixel (``out[oi + e * P]``)
    through the epilogue (the residual gathered into a vector first) to the planes. Pointers
    (:func:`.simd.fptr`), not arrays: no reference counting at the call."""
    if cnt <= 0:
        return
    if has_res:
        for e in range(cnt):
            prb[e] = pres[oi + e * P]
    vstore(pblk, 0, finish(a, prb, 0, cnt, has_res, False, 1.0, lo, hi, act, c3, c6))
    for e in range(cnt):
        pout[oi + e * P] = pblk[e]


@plain_args
@numba.njit(**_JIT)
def pw_tail(x, wt, Ot, bt, out, res, has_res, lo, hi, act, n, C, O, P, p0, tag, nl, o0, o1):
    """Pixels ``[p0, P)`` (fewer than a vector) of output channels ``[o0, o1)`` of image ``n``, with
    vectors over output channels instead of pixels: a plane's last partial vector would cost as much
    as a whole one (on a 7x7 plane with 16 lanes, a quarter of the layer for one pixel). ``wt`` is
    the weight transposed, (C, Ot) flat, ``bt`` the bias (Ot,), zero past O (``Ot >= O + 4 * nl``).
    4 vectors of output channels x 2 pixels (8 accumulators: 4 weight loads and 2 broadcasts per
    input channel); the accumulators go out through the kernel's epilogue and are scattered to the
    planes. Same sums in the same order as :func:`pw_tasks`: the same bits."""
    z = vsplat(tag, np.float32(0.0))
    c3, c6 = vsplat(tag, 3.0), vsplat(tag, 6.0)
    blk = np.empty(nl, np.float32)
    rb = np.zeros(nl, np.float32)
    px, pw, pb, pblk, prb = fptr(x), fptr(wt), fptr(bt), fptr(blk), fptr(rb)
    pout, pres = fptr(out), fptr(res)
    xb = n * C * P
    ob = n * O * P
    for o in range(o0, o1, 4 * nl):
        b0, b1, b2, b3 = vload(pb, o, z), vload(pb, o + nl, z), vload(pb, o + 2 * nl, z), vload(pb, o + 3 * nl, z)
        for p in range(p0, P, 2):
            two = p + 1 < P
            a0, a1, a2, a3 = b0, b1, b2, b3
            d0, d1, d2, d3 = b0, b1, b2, b3
            xi = xb + p
            wi = o
            if two:
                for _c in range(C):
                    u, v = vbcast(px, xi, z), vbcast(px, xi + 1, z)
                    w = vload(pw, wi, z)
                    a0, d0 = vfma(u, w, a0), vfma(v, w, d0)
                    w = vload(pw, wi + nl, z)
                    a1, d1 = vfma(u, w, a1), vfma(v, w, d1)
                    w = vload(pw, wi + 2 * nl, z)
                    a2, d2 = vfma(u, w, a2), vfma(v, w, d2)
                    w = vload(pw, wi + 3 * nl, z)
                    a3, d3 = vfma(u, w, a3), vfma(v, w, d3)
                    xi += P
                    wi += Ot
            else:   # (the pixel after p is not read: the plane may end the array)
                for _c in range(C):
                    u = vbcast(px, xi, z)
                    a0 = vfma(u, vload(pw, wi, z), a0)
                    a1 = vfma(u, vload(pw, wi + nl, z), a1)
                    a2 = vfma(u, vload(pw, wi + 2 * nl, z), a2)
                    a3 = vfma(u, vload(pw, wi + 3 * nl, z), a3)
                    xi += P
                    wi += Ot
            oi = ob + o * P + p
            for q in range(2 if two else 1):
                g = oi + q
                _scatter(a0 if q == 0 else d0, pout, pres, g, P, min(nl, o1 - o), prb, pblk, has_res, lo,
                         hi, act, c3, c6)
                _scatter(a1 if q == 0 else d1, pout, pres, g + nl * P, P, min(nl, o1 - o - nl), prb, pblk,
                         has_res, lo, hi, act, c3, c6)
                _scatter(a2 if q == 0 else d2, pout, pres, g + 2 * nl * P, P, min(nl, o1 - o - 2 * nl), prb, pblk,
                         has_res, lo, hi, act, c3, c6)
                _scatter(a3 if q == 0 else d3, pout, pres, g + 3 * nl * P, P, min(nl, o1 - o - 3 * nl), prb, pblk,
                         has_res, lo, hi, act, c3, c6)


@numba.njit(**_JIT)
def pw_images(x, wp, bp, wt, Ot, bt, out, res, has_res, lo, hi, act, n0, n1, C, O, P, Pm, tag, nl, b0, b1):
    """Output-channel blocks ``b0 <= b < b1`` of images ``n0 <= n < n1``: :func:`pw_tasks` on pixels
    ``[0, Pm)`` and :func:`pw_tail` on the rest, a batch in one call (each call's Python and argument
    unboxing cost more than a small layer's arithmetic: :class:`.direct.SerialTasks`)."""
    for n in range(n0, n1):
        if Pm:
            pw_tasks(x, wp, bp, out, res, has_res, lo, hi, act, n, C, O, P, Pm, tag, nl, b0, b1)
        if Pm < P:
            pw_tail(x, wt, Ot, bt, out, res, has_res, lo, hi, act, n, C, O, P, Pm, tag, nl, b0 * OC_BLOCK,
                    min(b1 * OC_BLOCK, O))


def pack_weight(w: np.ndarray) -> np.ndarray:
    """(O, C) -> the kernel's (blocks, C, 6) flat layout, the last block's missing rows zero."""
    O, C = w.shape
    nb = -(-O // OC_BLOCK)
    wp = np.zeros((nb * OC_BLOCK, C), np.float32)
    wp[:O] = w
    return np.ascontiguousarray(wp.reshape(nb, OC_BLOCK, C).transpose(0, 2, 1)).reshape(-1)


class SimdPointwiseConv:
    """A 1x1, stride-1, unpadded, ungrouped conv with fixed weights on the SIMD kernel:
    ``conv(x, out, residual=None, threads=1)`` writes ``act(clamp(W @ x + bias (+ residual), lo, hi))``
    into ``out`` (C-contiguous float32 (N, O, H, W)); ``x`` is C-contiguous float32 (N, C, H, W).

    ``weight`` is (O, C) or (O, C, 1, 1); ``lo``/``hi`` the fused clamp (``0, inf`` for relu);
    ``activation`` ``"hardswish"`` or ``"hardsigmoid"`` after the clamp, torch's float32 formulas
    (``None``: none); ``lanes_`` forces the vector width (tests; default :func:`~.direct.lanes`).
    """

    def __init__(self, weight, bias, lo=-math.inf, hi=math.inf, lanes_=None, activation=None):
        w = np.asarray(weight, np.float32)
        if w.ndim == 4 and w.shape[2:] == (1, 1):
            w = w.reshape(w.shape[:2])
        if w.ndim != 2:
            raise ShapeError(f"SimdPointwiseConv: weight must be (O, C) or (O, C, 1, 1), got shape {w.shape}")
        if (activation or "none") not in ACTIVATIONS:
            raise ShapeError(f"SimdPointwiseConv: activation {activation!r} is not one of {', '.join(ACTIVATIONS)}")
        self.O, self.C = w.shape
        self.nl = lanes() if lanes_ is None else int(lanes_)
        self.wp = pack_weight(w)
        self.b = (np.zeros(self.O, np.float32) if bias is None
                  else np.ascontiguousarray(np.asarray(bias, np.float32).reshape(self.O)))
        self.bp = np.zeros(len(self.wp) // self.C, np.float32)
        self.bp[:self.O] = self.b
        self.bt = np.zeros(self.O + 4 * self.nl, np.float32)
        self.bt[:self.O] = self.b
        self.lo, self.hi = float(lo), float(hi)
        self.act = ACTIVATIONS.index(activation or "none")
        self.tag = _tag(self.nl)
        self._none = np.zeros(1, np.float32)

    @property
    def wp(self) -> np.ndarray:
        """The packed weight (a serialized plan sets it back; the transposed copy :attr:`wt` of the
        partial-vector pass is made from it)."""
        return self._wp

    @wp.setter
    def wp(self, wp):
        self._wp = wp
        nb = len(wp) // (self.C * OC_BLOCK)
        self.wt = np.zeros((self.C, self.O + 4 * self.nl), np.float32)
        self.wt[:, :self.O] = wp.reshape(nb, self.C, OC_BLOCK).transpose(1, 0, 2).reshape(self.C, -1)[:, :self.O]

    def out_shape(self, shape):
        N, _, H, W = shape
        return (N, self.O, H, W)

    def __call__(self, x, out, residual=None, threads: int = 1):
        N, nb, Pm, per_image = self._bound(x, out, residual)
        for n in range(N):
            args = per_image(n)
            if threads <= 1 or nb < 2 * threads:
                self._part(args, Pm, 0, nb)
            else:   # the kernel releases the GIL: blocks of channels, the first on the caller
                cuts = [nb * i // threads for i in range(threads + 1)]
                run_split(lambda i, a=args, c=cuts: self._part(a, Pm, c[i], c[i + 1]), threads)
        return out

    def _bound(self, x, out, residual):
        """``(N, output-channel blocks, Pm, per_image)``: ``per_image(n)`` the kernels' leading arguments."""
        N, C, H, W = x.shape
        if C != self.C:
            raise ShapeError(f"SimdPointwiseConv: input has {C} channels, the weight {self.C}")
        P = H * W
        # a last partial vector of at most half the lanes goes over output channels (pw_tail)
        Pm = P - P % self.nl if 0 < P % self.nl <= self.nl // 2 else P
        flat, xf = out.reshape(-1), x.reshape(-1)
        res = self._none if residual is None else residual.reshape(-1)

        def per_image(n):
            return (xf, self.wp, self.bp, flat, res, residual is not None, self.lo, self.hi, self.act, n, C, self.O, P)
        return N, len(self.bp) // OC_BLOCK, Pm, per_image

    def serial_calls(self, x, out, residual=None):
        """One-thread ``self(x, out, residual)`` as one plain ``(fn, args)`` call on :func:`pw_images`'
        compiled entry point (:func:`.direct.compiled_entry`: compiled here if it is not yet), for a
        caller that makes it again on the same C-contiguous arrays."""
        N, nb, Pm, per_image = self._bound(x, out, residual)
        xf, wp, bp, flat, res, has_res, lo, hi, act, _, C, O, P = per_image(0)
        a = (xf, wp, bp, self.wt.reshape(-1), self.wt.shape[1], self.bt, flat, res, has_res, lo, hi, act, 0, N, C, O,
             P, Pm, self.tag, self.nl, 0, nb)
        entry = compiled_entry(pw_images, a)
        if entry is not None:
            return ((entry, a),)
        calls = []      # an argument numba cannot type: the per-image kernels, as before
        for n in range(N):
            args = per_image(n)
            if Pm:
                a = (*args, Pm, self.tag, self.nl, 0, nb)
                calls.append((exact_entry(pw_tasks, a), a))
            if Pm < args[-1]:
                a = self._tail_args(args, Pm, 0, nb)
                calls.append((exact_entry(pw_tail, a), a))
        return tuple(calls)

    def _tail_args(self, args, Pm, b0, b1):
        xf, _, _, flat, res, has_res, lo, hi, act, n, C, O, P = args
        return (xf, self.wt.reshape(-1), self.wt.shape[1], self.bt, flat, res, has_res, lo, hi, act, n, C, O, P, Pm,
                self.tag, self.nl, b0 * OC_BLOCK, min(b1 * OC_BLOCK, O))

    def _part(self, args, Pm, b0, b1):
        """Output-channel blocks ``[b0, b1)`` of one image: pixels ``[0, Pm)`` by pixel vectors, the rest
        by output-channel vectors."""
        if Pm:
            pw_tasks(*args, Pm, self.tag, self.nl, b0, b1)
        if Pm < args[-1]:
            pw_tail(*self._tail_args(args, Pm, b0, b1))
