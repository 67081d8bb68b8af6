"""Explicit-SIMD float32 pointwise (1x1, stride 1, unpadded, ungrouped) convolution on NCHW.

A 1x1 conv is a GEMM, ``out[n] = W @ x[n]`` (O x C by C x H*W); on a mobile net's small planes
BLAS spends much of it on packing and per-call overhead and writes its output before the bias and
clamp pass. This kernel reads the input in place (no copy: a channel's pixels are contiguous in
NCHW) and holds a block of 6 output channels x 2 vectors of pixels in registers (12 accumulators;
per input channel 2 unaligned loads, 6 weight broadcasts, 12 FMAs; the weights packed once into
``(blocks, C, 6)``). Bias is the accumulators' start, an optional residual and a clamp (relu,
relu6) are fused into the stores. A plane that is not a whole number of vectors ends with one
vector that overlaps the previous block, computed into a local buffer and stored only on the
lanes no earlier block wrote (so a residual that is the output buffer itself is read before it
is written, and nothing is added twice). Work splits by blocks of output channels.

Lanes come from the CPU's features (:func:`.direct.lanes`), never its vendor; callers choose this
kernel by timing it against their other tactics (a BLAS GEMM) on the real shape.
"""
from __future__ import annotations

import math

import numba
import numpy as np

from ..errors import ShapeError
from .direct import _JIT, _pool, _tag, lanes
from .simd import vadd, vbcast, vclamp, vfma, vload, vsplat, vstore

#: output channels per register block
OC_BLOCK = 6


@numba.njit(**_JIT)
def pw_tasks(x, wp, bp, out, res, has_res, lo, hi, n, C, O, P, tag, nl, b0, b1):
    """Output-channel blocks ``b0 <= b < b1`` of image ``n``: ``x`` (N*C*P,), ``wp`` (blocks*C*6,),
    ``bp`` (blocks*6,), ``out``/``res`` (N*O*P,); ``P >= nl``."""
    xb = n * C * P
    ob = n * O * P
    blk = np.empty(OC_BLOCK * nl, np.float32)
    zero = vsplat(tag, np.float32(0.0))
    for b in range(b0, b1):
        o0 = b * OC_BLOCK
        wb = b * C * OC_BLOCK
        c0, c1, c2 = vsplat(tag, bp[o0]), vsplat(tag, bp[o0 + 1]), vsplat(tag, bp[o0 + 2])
        c3, c4, c5 = vsplat(tag, bp[o0 + 3]), vsplat(tag, bp[o0 + 4]), vsplat(tag, bp[o0 + 5])
        j = 0
        while j + 2 * nl <= P:
            a0, a1, a2, a3, a4, a5 = c0, c1, c2, c3, c4, c5
            d0, d1, d2, d3, d4, d5 = c0, c1, c2, c3, c4, c5
            xi = xb + j
            wi = wb
            for _c in range(C):
                u = vload(x, xi, zero)
                v = vload(x, xi + nl, zero)
                w = vbcast(wp, wi, zero)
                a0 = vfma(u, w, a0)
                d0 = vfma(v, w, d0)
                w = vbcast(wp, wi + 1, zero)
                a1 = vfma(u, w, a1)
                d1 = vfma(v, w, d1)
                w = vbcast(wp, wi + 2, zero)
                a2 = vfma(u, w, a2)
                d2 = vfma(v, w, d2)
                w = vbcast(wp, wi + 3, zero)
                a3 = vfma(u, w, a3)
                d3 = vfma(v, w, d3)
                w = vbcast(wp, wi + 4, zero)
                a4 = vfma(u, w, a4)
                d4 = vfma(v, w, d4)
                w = vbcast(wp, wi + 5, zero)
                a5 = vfma(u, w, a5)
                d5 = vfma(v, w, d5)
                xi += P
                wi += OC_BLOCK
            # the stores (rows past O belong to the zero-padded last block: not stored)
            oi = ob + o0 * P + j
            if has_res:
                a0, d0 = vadd(a0, vload(res, oi, zero)), vadd(d0, vload(res, oi + nl, zero))
            vstore(out, oi, vclamp(a0, lo, hi))
            vstore(out, oi + nl, vclamp(d0, lo, hi))
            if o0 + 1 < O:
                oi += P
                if has_res:
                    a1, d1 = vadd(a1, vload(res, oi, zero)), vadd(d1, vload(res, oi + nl, zero))
                vstore(out, oi, vclamp(a1, lo, hi))
                vstore(out, oi + nl, vclamp(d1, lo, hi))
            if o0 + 2 < O:
                oi += P
                if has_res:
                    a2, d2 = vadd(a2, vload(res, oi, zero)), vadd(d2, vload(res, oi + nl, zero))
                vstore(out, oi, vclamp(a2, lo, hi))
                vstore(out, oi + nl, vclamp(d2, lo, hi))
            if o0 + 3 < O:
                oi += P
                if has_res:
                    a3, d3 = vadd(a3, vload(res, oi, zero)), vadd(d3, vload(res, oi + nl, zero))
                vstore(out, oi, vclamp(a3, lo, hi))
                vstore(out, oi + nl, vclamp(d3, lo, hi))
            if o0 + 4 < O:
                oi += P
                if has_res:
                    a4, d4 = vadd(a4, vload(res, oi, zero)), vadd(d4, vload(res, oi + nl, zero))
                vstore(out, oi, vclamp(a4, lo, hi))
                vstore(out, oi + nl, vclamp(d4, lo, hi))
            if o0 + 5 < O:
                oi += P
                if has_res:
                    a5, d5 = vadd(a5, vload(res, oi, zero)), vadd(d5, vload(res, oi + nl, zero))
                vstore(out, oi, vclamp(a5, lo, hi))
                vstore(out, oi + nl, vclamp(d5, lo, hi))
            j += 2 * nl
        # the rest in single vectors, the last one ending at P (overlapping what came before)
        while j < P:
            js = min(j, P - nl)
            a0, a1, a2, a3, a4, a5 = c0, c1, c2, c3, c4, c5
            xi = xb + js
            wi = wb
            for _c in range(C):
                u = vload(x, xi, zero)
                a0 = vfma(u, vbcast(wp, wi, zero), a0)
                a1 = vfma(u, vbcast(wp, wi + 1, zero), a1)
                a2 = vfma(u, vbcast(wp, wi + 2, zero), a2)
                a3 = vfma(u, vbcast(wp, wi + 3, zero), a3)
                a4 = vfma(u, vbcast(wp, wi + 4, zero), a4)
                a5 = vfma(u, vbcast(wp, wi + 5, zero), a5)
                xi += P
                wi += OC_BLOCK
            vstore(blk, 0, a0)
            vstore(blk, nl, a1)
            vstore(blk, 2 * nl, a2)
            vstore(blk, 3 * nl, a3)
            vstore(blk, 4 * nl, a4)
            vstore(blk, 5 * nl, a5)
            for k in range(min(OC_BLOCK, O - o0)):
                oi = ob + (o0 + k) * P + js
                for e in range(j - js, nl):
                    z = blk[k * nl + e]
                    if has_res:
                        z += res[oi + e]
                    # (if, not max/min: a NaN stays NaN, as torch.clamp)
                    if z < lo:  # noqa: PLR1730
                        z = lo
                    if z > hi:  # noqa: PLR1730
                        z = hi
                    out[oi + e] = z
            j = js + nl


def pack_weight(w: np.ndarray) -> np.ndarray:
    """(O, C) -> the kernel's (blocks, C, 6) flat layout, the last block's missing rows zero."""
    O, C = w.shape
    nb = -(-O // OC_BLOCK)
    wp = np.zeros((nb * OC_BLOCK, C), np.float32)
    wp[:O] = w
    return np.ascontiguousarray(wp.reshape(nb, OC_BLOCK, C).transpose(0, 2, 1)).reshape(-1)


class SimdPointwiseConv:
    """A 1x1, stride-1, unpadded, ungrouped conv with fixed weights on the SIMD kernel:
    ``conv(x, out, residual=None, threads=1)`` writes ``clamp(W @ x + bias (+ residual), lo, hi)``
    into ``out`` (C-contiguous float32 (N, O, H, W)); ``x`` is C-contiguous float32 (N, C, H, W).

    ``weight`` is (O, C) or (O, C, 1, 1); ``lo``/``hi`` the fused clamp (``0, inf`` for relu);
    ``lanes_`` forces the vector width (tests; default :func:`~.direct.lanes`). Planes smaller than
    one vector go through numpy (the kernel has nothing to vectorize there).
    """

    def __init__(self, weight, bias, lo=-math.inf, hi=math.inf, lanes_=None):
        w = np.asarray(weight, np.float32)
        if w.ndim == 4 and w.shape[2:] == (1, 1):
            w = w.reshape(w.shape[:2])
        if w.ndim != 2:
            raise ShapeError(f"SimdPointwiseConv: weight must be (O, C) or (O, C, 1, 1), got shape {w.shape}")
        self.O, self.C = w.shape
        self.wp = pack_weight(w)
        self.b = (np.zeros(self.O, np.float32) if bias is None
                  else np.ascontiguousarray(np.asarray(bias, np.float32).reshape(self.O)))
        self.bp = np.zeros(len(self.wp) // self.C, np.float32)
        self.bp[:self.O] = self.b
        self.lo, self.hi = float(lo), float(hi)
        self.nl = lanes() if lanes_ is None else int(lanes_)
        self.tag = _tag(self.nl)
        self._none = np.zeros(1, np.float32)

    @property
    def wp(self) -> np.ndarray:
        """The packed weight (a serialized plan sets it back)."""
        return self._wp

    @wp.setter
    def wp(self, wp):
        self._wp = wp
        nb = len(wp) // (self.C * OC_BLOCK)
        # (O, C) for planes below one vector
        self.w = np.ascontiguousarray(wp.reshape(nb, self.C, OC_BLOCK).transpose(0, 2, 1).reshape(-1, self.C)[:self.O])

    def out_shape(self, shape):
        N, _, H, W = shape
        return (N, self.O, H, W)

    def __call__(self, x, out, residual=None, threads: int = 1):
        N, C, H, W = x.shape
        if C != self.C:
            raise ShapeError(f"SimdPointwiseConv: input has {C} channels, the weight {self.C}")
        P = H * W
        if P < self.nl:     # too small to vectorize over pixels: one GEMM per image
            y = np.matmul(self.w, x.reshape(N, C, P)) + self.b[:, None]   # (the residual may be ``out``)
            if residual is not None:
                y += residual.reshape(N, self.O, P)
            np.clip(y, self.lo, self.hi, out=out.reshape(N, self.O, P))
            return out
        flat, xf = out.reshape(-1), x.reshape(-1)
        res = self._none if residual is None else residual.reshape(-1)
        nb = len(self.bp) // OC_BLOCK
        for n in range(N):
            args = (xf, self.wp, self.bp, flat, res, residual is not None, self.lo, self.hi, n, C, self.O, P,
                    self.tag, self.nl)
            if threads <= 1 or nb < 2 * threads:
                pw_tasks(*args, 0, nb)
            else:   # the kernel releases the GIL: blocks of channels over a shared pool of Python threads
                cuts = [nb * i // threads for i in range(threads + 1)]
                list(_pool(threads).map(lambda i, a=args, c=cuts: pw_tasks(*a, c[i], c[i + 1]), range(threads)))
        return out
