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
from .depthwise import ACTIVATIONS, finish
from .direct import _JIT, _pool, _tag, lanes
from .simd import fptr, vbcast, vfma, vload, vload_n, vsplat, vstore, vstore_n

#: output channels per register block
OC_BLOCK = 6


@numba.njit(inline="always", nogil=True, error_model="numpy", boundscheck=False)
def _store(a, pout, pres, oi, cnt, nl, has_res, lo, hi, act, c3, c6):
    """An accumulator to ``out[oi:oi + cnt]``, the epilogue in the store (masked at a plane's end)."""
    if cnt > 0:
        v = finish(a, pres, oi, cnt, has_res, False, 1.0, lo, hi, act, c3, c6)
        if cnt == nl:
            vstore(pout, oi, v)
        else:
            vstore_n(pout, oi, v, cnt)


@numba.njit(**_JIT)
def pw_tasks(x, wp, bp, out, res, has_res, lo, hi, act, n, C, O, P, tag, nl, b0, b1):
    """Output-channel blocks ``b0 <= b < b1`` of image ``n``: ``x`` (N*C*P,), ``wp`` (blocks*C*6,),
    ``bp`` (blocks*6,), ``out``/``res`` (N*O*P,). Pixels in blocks of 4 vectors (24 accumulators),
    the vectors past the last whole block one at a time (6); a plane's last vector is masked."""
    xb = n * C * P
    ob = n * O * P
    z = vsplat(tag, np.float32(0.0))
    c3, c6 = vsplat(tag, 3.0), vsplat(tag, 6.0)
    px, pw, pout, pres = fptr(x), fptr(wp), fptr(out), fptr(res)
    nv = -(-P // nl)           # vectors per plane, the last one partial when nl does not divide P
    last = P - (nv - 1) * nl   # its lanes
    for b in range(b0, b1):
        o0 = b * OC_BLOCK
        wb = b * C * OC_BLOCK
        k = min(OC_BLOCK, O - o0)   # rows past O belong to the zero-padded last block: not stored
        c0, c1, c2 = vsplat(tag, bp[o0]), vsplat(tag, bp[o0 + 1]), vsplat(tag, bp[o0 + 2])
        c3_, c4, c5 = vsplat(tag, bp[o0 + 3]), vsplat(tag, bp[o0 + 4]), vsplat(tag, bp[o0 + 5])
        v = 0
        while v + 4 <= nv:
            j = v * nl
            n3 = last if v + 4 == nv else nl
            a0, a1, a2, a3, a4, a5 = c0, c1, c2, c3_, c4, c5
            d0, d1, d2, d3, d4, d5 = c0, c1, c2, c3_, c4, c5
            e0, e1, e2, e3, e4, e5 = c0, c1, c2, c3_, c4, c5
            f0, f1, f2, f3, f4, f5 = c0, c1, c2, c3_, c4, c5
            xi = xb + j
            wi = wb
            for _c in range(C):
                u = vload(px, xi, z)
                t = vload(px, xi + nl, z)
                q = vload(px, xi + 2 * nl, z)
                r = vload_n(px, xi + 3 * nl, n3, z)
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
            oi = ob + o0 * P + j
            for i in range(k):   # (a switch on i: the accumulators stay in registers)
                ga = (a0, a1, a2, a3, a4, a5)[i]
                gd = (d0, d1, d2, d3, d4, d5)[i]
                ge = (e0, e1, e2, e3, e4, e5)[i]
                gf = (f0, f1, f2, f3, f4, f5)[i]
                _store(ga, pout, pres, oi, nl, nl, has_res, lo, hi, act, c3, c6)
                _store(gd, pout, pres, oi + nl, nl, nl, has_res, lo, hi, act, c3, c6)
                _store(ge, pout, pres, oi + 2 * nl, nl, nl, has_res, lo, hi, act, c3, c6)
                _store(gf, pout, pres, oi + 3 * nl, n3, nl, has_res, lo, hi, act, c3, c6)
                oi += P
            v += 4
        while v < nv:   # the rest one vector at a time
            j = v * nl
            cnt = last if v + 1 == nv else nl
            a0, a1, a2, a3, a4, a5 = c0, c1, c2, c3_, c4, c5
            xi = xb + j
            wi = wb
            for _c in range(C):
                u = vload_n(px, xi, cnt, z)
                a0 = vfma(u, vbcast(pw, wi, z), a0)
                a1 = vfma(u, vbcast(pw, wi + 1, z), a1)
                a2 = vfma(u, vbcast(pw, wi + 2, z), a2)
                a3 = vfma(u, vbcast(pw, wi + 3, z), a3)
                a4 = vfma(u, vbcast(pw, wi + 4, z), a4)
                a5 = vfma(u, vbcast(pw, wi + 5, z), a5)
                xi += P
                wi += OC_BLOCK
            oi = ob + o0 * P + j
            for i in range(k):
                _store((a0, a1, a2, a3, a4, a5)[i], pout, pres, oi, cnt, nl, has_res, lo, hi, act, c3, c6)
                oi += P
            v += 1


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
        self.wp = pack_weight(w)
        self.b = (np.zeros(self.O, np.float32) if bias is None
                  else np.ascontiguousarray(np.asarray(bias, np.float32).reshape(self.O)))
        self.bp = np.zeros(len(self.wp) // self.C, np.float32)
        self.bp[:self.O] = self.b
        self.lo, self.hi = float(lo), float(hi)
        self.act = ACTIVATIONS.index(activation or "none")
        self.nl = lanes() if lanes_ is None else int(lanes_)
        self.tag = _tag(self.nl)
        self._none = np.zeros(1, np.float32)

    def out_shape(self, shape):
        N, _, H, W = shape
        return (N, self.O, H, W)

    def __call__(self, x, out, residual=None, threads: int = 1):
        N, C, H, W = x.shape
        if C != self.C:
            raise ShapeError(f"SimdPointwiseConv: input has {C} channels, the weight {self.C}")
        P = H * W
        flat, xf = out.reshape(-1), x.reshape(-1)
        res = self._none if residual is None else residual.reshape(-1)
        nb = len(self.bp) // OC_BLOCK
        for n in range(N):
            args = (xf, self.wp, self.bp, flat, res, residual is not None, self.lo, self.hi, self.act, n, C, self.O,
                    P, self.tag, self.nl)
            if threads <= 1 or nb < 2 * threads:
                pw_tasks(*args, 0, nb)
            else:   # the kernel releases the GIL: blocks of channels over a shared pool of Python threads
                cuts = [nb * i // threads for i in range(threads + 1)]
                list(_pool(threads).map(lambda i, a=args, c=cuts: pw_tasks(*a, c[i], c[i + 1]), range(threads)))
        return out
