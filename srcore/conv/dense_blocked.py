"""Explicit-SIMD float32 dense convolution from an NCHW input into the NCHW16c layout (:mod:`.nchwc`):
the first layer of a mobile net (a 3x3 stride-2 conv on the 3-channel image) writing the layout the
depthwise and 1x1 layers after it keep (ONNX Runtime's NCHWc conv with an NCHW input).

A vector holds 16 output channels of one pixel: per output row, 12 consecutive output pixels of one
output block are 12 accumulators; per (input channel, tap) one weight vector (packed once into
``(out blocks, C, kh, kw, 16)``) and 12 broadcasts of the input at the 12 pixels (``stride``
floats apart in the NCHW row), 12 FMAs. No input copy: the kernel rows that fall in the top or
bottom padding are skipped, pixels whose taps reach the left or right padding go one at a time
with their columns checked, and the row interior's last 5-11 pixels as the 8 or 12 ending there
(1-4, or a row narrower than 8: the 4 ending there). Bias is the accumulators' start; relu / relu6
(a clamp) and hardswish / hardsigmoid in the stores; no residual. Work splits by output blocks.
"""
from __future__ import annotations

import math

import numba
import numpy as np

from ..errors import ShapeError
from ._jit import helper, plain_args
from . import nchwc
from .depthwise import ACTIVATIONS, finish, out_hw
from .direct import _JIT, SerialTasks, _tag, run_bound
from .simd import fptr, vbcast, vfma, vload, vsplat, vstore

#: channels per block (the vector's lanes)
LANES = 16


@helper
def _taps12(px, pw, pout, x0, wi, oi, C, cs, ps, rs, ky0, ky1, KW, dh, dw, KK, bv, z, lo, hi, act, c3, c6):
    """12 output pixels of a row x one output block: input channel ``c``, tap ``(ky, kx)`` of the first
    pixel at ``x0 + c * cs + ky * dh * rs + kx * dw``, the pixels ``ps`` apart (the stride);
    weights ``wi + ((c * KH + ky) * KW + kx) * 16``; rows ``ky0 <= ky < ky1`` only
    (the others lie in the padding); stored NCHW16c from ``oi``."""
    a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11 = bv, bv, bv, bv, bv, bv, bv, bv, bv, bv, bv, bv
    for c in range(C):
        for ky in range(ky0, ky1):
            xr = x0 + c * cs + ky * dh * rs
            wr = wi + (c * KK + ky * KW) * LANES
            for kx in range(KW):
                w = vload(pw, wr + kx * LANES, z)
                xi = xr + kx * dw
                a0 = vfma(vbcast(px, xi, z), w, a0)
                a1 = vfma(vbcast(px, xi + 1 * ps, z), w, a1)
                a2 = vfma(vbcast(px, xi + 2 * ps, z), w, a2)
                a3 = vfma(vbcast(px, xi + 3 * ps, z), w, a3)
                a4 = vfma(vbcast(px, xi + 4 * ps, z), w, a4)
                a5 = vfma(vbcast(px, xi + 5 * ps, z), w, a5)
                a6 = vfma(vbcast(px, xi + 6 * ps, z), w, a6)
                a7 = vfma(vbcast(px, xi + 7 * ps, z), w, a7)
                a8 = vfma(vbcast(px, xi + 8 * ps, z), w, a8)
                a9 = vfma(vbcast(px, xi + 9 * ps, z), w, a9)
                a10 = vfma(vbcast(px, xi + 10 * ps, z), w, a10)
                a11 = vfma(vbcast(px, xi + 11 * ps, z), w, a11)
    vstore(pout, oi + 0, finish(a0, pout, oi, LANES, False, False, 1.0, lo, hi, act, c3, c6))
    vstore(pout, oi + 16, finish(a1, pout, oi, LANES, False, False, 1.0, lo, hi, act, c3, c6))
    vstore(pout, oi + 32, finish(a2, pout, oi, LANES, False, False, 1.0, lo, hi, act, c3, c6))
    vstore(pout, oi + 48, finish(a3, pout, oi, LANES, False, False, 1.0, lo, hi, act, c3, c6))
    vstore(pout, oi + 64, finish(a4, pout, oi, LANES, False, False, 1.0, lo, hi, act, c3, c6))
    vstore(pout, oi + 80, finish(a5, pout, oi, LANES, False, False, 1.0, lo, hi, act, c3, c6))
    vstore(pout, oi + 96, finish(a6, pout, oi, LANES, False, False, 1.0, lo, hi, act, c3, c6))
    vstore(pout, oi + 112, finish(a7, pout, oi, LANES, False, False, 1.0, lo, hi, act, c3, c6))
    vstore(pout, oi + 128, finish(a8, pout, oi, LANES, False, False, 1.0, lo, hi, act, c3, c6))
    vstore(pout, oi + 144, finish(a9, pout, oi, LANES, False, False, 1.0, lo, hi, act, c3, c6))
    vstore(pout, oi + 160, finish(a10, pout, oi, LANES, False, False, 1.0, lo, hi, act, c3, c6))
    vstore(pout, oi + 176, finish(a11, pout, oi, LANES, False, False, 1.0, lo, hi, act, c3, c6))


@helper
def _taps8(px, pw, pout, x0, wi, oi, C, cs, ps, rs, ky0, ky1, KW, dh, dw, KK, bv, z, lo, hi, act, c3, c6):
    """:func:`_taps12` for 8 pixels (a row's tail: 8 chains of FMAs keep both FMA ports busy, 4 do not)."""
    a0, a1, a2, a3, a4, a5, a6, a7 = bv, bv, bv, bv, bv, bv, bv, bv
    for c in range(C):
        for ky in range(ky0, ky1):
            xr = x0 + c * cs + ky * dh * rs
            wr = wi + (c * KK + ky * KW) * LANES
            for kx in range(KW):
                w = vload(pw, wr + kx * LANES, z)
                xi = xr + kx * dw
                a0 = vfma(vbcast(px, xi, z), w, a0)
                a1 = vfma(vbcast(px, xi + 1 * ps, z), w, a1)
                a2 = vfma(vbcast(px, xi + 2 * ps, z), w, a2)
                a3 = vfma(vbcast(px, xi + 3 * ps, z), w, a3)
                a4 = vfma(vbcast(px, xi + 4 * ps, z), w, a4)
                a5 = vfma(vbcast(px, xi + 5 * ps, z), w, a5)
                a6 = vfma(vbcast(px, xi + 6 * ps, z), w, a6)
                a7 = vfma(vbcast(px, xi + 7 * ps, z), w, a7)
    vstore(pout, oi + 0, finish(a0, pout, oi, LANES, False, False, 1.0, lo, hi, act, c3, c6))
    vstore(pout, oi + 16, finish(a1, pout, oi, LANES, False, False, 1.0, lo, hi, act, c3, c6))
    vstore(pout, oi + 32, finish(a2, pout, oi, LANES, False, False, 1.0, lo, hi, act, c3, c6))
    vstore(pout, oi + 48, finish(a3, pout, oi, LANES, False, False, 1.0, lo, hi, act, c3, c6))
    vstore(pout, oi + 64, finish(a4, pout, oi, LANES, False, False, 1.0, lo, hi, act, c3, c6))
    vstore(pout, oi + 80, finish(a5, pout, oi, LANES, False, False, 1.0, lo, hi, act, c3, c6))
    vstore(pout, oi + 96, finish(a6, pout, oi, LANES, False, False, 1.0, lo, hi, act, c3, c6))
    vstore(pout, oi + 112, finish(a7, pout, oi, LANES, False, False, 1.0, lo, hi, act, c3, c6))


@helper
def _taps4(px, pw, pout, x0, wi, oi, C, cs, ps, rs, ky0, ky1, KW, dh, dw, KK, bv, z, lo, hi, act, c3, c6):
    """:func:`_taps12` for 4 pixels."""
    a0, a1, a2, a3 = bv, bv, bv, bv
    for c in range(C):
        for ky in range(ky0, ky1):
            xr = x0 + c * cs + ky * dh * rs
            wr = wi + (c * KK + ky * KW) * LANES
            for kx in range(KW):
                w = vload(pw, wr + kx * LANES, z)
                xi = xr + kx * dw
                a0 = vfma(vbcast(px, xi, z), w, a0)
                a1 = vfma(vbcast(px, xi + 1 * ps, z), w, a1)
                a2 = vfma(vbcast(px, xi + 2 * ps, z), w, a2)
                a3 = vfma(vbcast(px, xi + 3 * ps, z), w, a3)
    vstore(pout, oi + 0, finish(a0, pout, oi, LANES, False, False, 1.0, lo, hi, act, c3, c6))
    vstore(pout, oi + 16, finish(a1, pout, oi, LANES, False, False, 1.0, lo, hi, act, c3, c6))
    vstore(pout, oi + 32, finish(a2, pout, oi, LANES, False, False, 1.0, lo, hi, act, c3, c6))
    vstore(pout, oi + 48, finish(a3, pout, oi, LANES, False, False, 1.0, lo, hi, act, c3, c6))
@helper
def _taps1(px, pw, pout, x0, wi, oi, C, cs, rs, ky0, ky1, kx0, kx1, KW, dh, dw, KK, bv, z, lo, hi, act, c3, c6):
    """One output pixel, kernel columns ``kx0 <= kx < kx1`` only (the others in the padding)."""
    a0 = bv
    for c in range(C):
        for ky in range(ky0, ky1):
            xr = x0 + c * cs + ky * dh * rs
            wr = wi + (c * KK + ky * KW) * LANES
            for kx in range(kx0, kx1):
                a0 = vfma(vbcast(px, xr + kx * dw, z), vload(pw, wr + kx * LANES, z), a0)
    vstore(pout, oi, finish(a0, pout, oi, LANES, False, False, 1.0, lo, hi, act, c3, c6))


@plain_args
@numba.njit(**_JIT)
def dense_tasks(x, C, H, W, sh, sw, dh, dw, pt, pl, KH, KW, wq, bq, nob, out, Ho, Wo, lo, hi, act, tag, n, b0, b1):
    """Output blocks ``b0 <= b < b1`` of image ``n``: ``x`` (N * C * H * W,) NCHW, ``wq`` (nob * C * KH * KW * 16,),
    ``bq`` (nob * 16,), ``out`` (N * nob * Ho * Wo * 16,) NCHW16c."""
    z = vsplat(tag, np.float32(0.0))
    c3, c6 = vsplat(tag, 3.0), vsplat(tag, 6.0)
    px, pw, pout, pb = fptr(x), fptr(wq), fptr(out), fptr(bq)
    HW, KK = H * W, KH * KW
    # output columns whose every tap lies inside the row
    oxa = min(Wo, -(-pl // sw))
    oxb = max(oxa, min(Wo, (W - 1 + pl - (KW - 1) * dw) // sw + 1))
    for b in range(b0, b1):
        bv = vload(pb, b * LANES, z)
        wi = b * C * KK * LANES
        for oy in range(Ho):
            iy = oy * sh - pt
            ky0 = min(KH, max(0, -(-(-iy) // dh))) if iy < 0 else 0
            ky1 = max(ky0, min(KH, (H - 1 - iy) // dh + 1))
            orow = ((n * nob + b) * Ho + oy) * Wo * LANES
            xrow = n * C * HW + iy * W - pl
            ox = 0
            while ox < Wo:
                if oxa <= ox and ox + 12 <= oxb:
                    _taps12(px, pw, pout, xrow + ox * sw, wi, orow + ox * LANES, C, HW, sw, W, ky0, ky1, KW, dh, dw,
                            KK, bv, z, lo, hi, act, c3, c6)
                    ox += 12
                elif oxa <= ox < oxb and oxb - ox > 4 and oxb - oxa >= 8:
                    # the interior's last 5-11 pixels as the 8 or 12 ending at its end (some stored
                    # again, the same values): 4 pixels are 4 chains of dependent FMAs, half the
                    # FMA ports idle (a 20-pixel stem row: 12 + 8, was 12 + 4 + 4)
                    if oxb - ox > 8 and oxb - oxa >= 12:
                        ox = oxb - 12
                        _taps12(px, pw, pout, xrow + ox * sw, wi, orow + ox * LANES, C, HW, sw, W, ky0, ky1, KW, dh,
                                dw, KK, bv, z, lo, hi, act, c3, c6)
                        ox += 12
                    else:
                        ox = min(ox, oxb - 8)
                        _taps8(px, pw, pout, xrow + ox * sw, wi, orow + ox * LANES, C, HW, sw, W, ky0, ky1, KW, dh,
                               dw, KK, bv, z, lo, hi, act, c3, c6)
                        ox += 8
                elif oxa <= ox < oxb and oxb - oxa >= 4:
                    # the interior's last 1-4 pixels as the 4 ending at its end (some of them stored
                    # again, the same values): a pixel alone is one chain of dependent FMAs, ~8x
                    # the time per pixel of a block
                    ox = min(ox, oxb - 4)
                    _taps4(px, pw, pout, xrow + ox * sw, wi, orow + ox * LANES, C, HW, sw, W, ky0, ky1, KW, dh, dw,
                           KK, bv, z, lo, hi, act, c3, c6)
                    ox += 4
                else:
                    ix = ox * sw - pl
                    kx0 = min(KW, -(-(-ix) // dw)) if ix < 0 else 0
                    kx1 = max(kx0, min(KW, (W - 1 - ix) // dw + 1))
                    _taps1(px, pw, pout, xrow + ox * sw, wi, orow + ox * LANES, C, HW, W, ky0, ky1, kx0, kx1, KW,
                           dh, dw, KK, bv, z, lo, hi, act, c3, c6)
                    ox += 1


@numba.njit(**_JIT)
def dense_images(x, C, H, W, sh, sw, dh, dw, pt, pl, KH, KW, wq, bq, nob, out, Ho, Wo, lo, hi, act, tag, n0, n1, b0,
                 b1):
    """:func:`dense_tasks` for images ``n0 <= n < n1`` (a batch in one call: :class:`.direct.SerialTasks`)."""
    for n in range(n0, n1):
        dense_tasks(x, C, H, W, sh, sw, dh, dw, pt, pl, KH, KW, wq, bq, nob, out, Ho, Wo, lo, hi, act, tag, n, b0, b1)


class BlockedDenseConv:
    """A dense (ungrouped) conv with fixed weights (O, C, kh, kw) from an NCHW input into NCHW16c:
    ``conv(x, out, threads=1)`` writes ``act(clamp(conv(x) + bias, lo, hi))`` into ``out``
    (N, ceil(O / 16), Ho, Wo, 16); ``x`` a C-contiguous float32 (N, C, H, W) array. ``pads`` an int,
    a pair or ``[(top, bottom), (left, right)]``; ``activation`` None, ``"hardswish"`` or ``"hardsigmoid"``."""

    def __init__(self, weight, bias, stride=1, pads=0, dilation=1, lo=-math.inf, hi=math.inf, activation=None):
        w = np.asarray(weight, np.float32)
        if w.ndim != 4:
            raise ShapeError(f"BlockedDenseConv: weight must be (O, C, kh, kw), got shape {w.shape}")
        if (activation or "none") not in ACTIVATIONS:
            raise ShapeError(f"BlockedDenseConv: activation {activation!r} is not one of {', '.join(ACTIVATIONS)}")
        two = lambda v: tuple(int(i) for i in v) if isinstance(v, (tuple, list)) else (int(v),) * 2  # noqa: E731
        self.stride, self.dilation = two(stride), two(dilation)
        p = list(pads) if isinstance(pads, (tuple, list)) else [pads, pads]
        self.pads = [tuple(int(i) for i in q) if isinstance(q, (tuple, list)) else (int(q), int(q)) for q in p]
        if min(self.stride + self.dilation) < 1 or min(min(q) for q in self.pads) < 0:
            raise ShapeError(f"BlockedDenseConv: bad stride {self.stride}, dilation {self.dilation} or padding "
                             f"{self.pads}")
        self.O, self.C, kh, kw = w.shape
        self.kernel = (kh, kw)
        self.nob = -(-self.O // LANES)
        wq = np.zeros((self.nob * LANES, self.C, kh, kw), np.float32)
        wq[:self.O] = w
        #: (out blocks, C, kh, kw, 16): one vector of an output block's weights per (channel, tap)
        self.wq = np.ascontiguousarray(wq.reshape(self.nob, LANES, self.C, kh, kw).transpose(0, 2, 3, 4, 1)).reshape(-1)
        self.bq = np.zeros(self.nob * LANES, np.float32)
        if bias is not None:
            self.bq[:self.O] = np.asarray(bias, np.float32).reshape(self.O)
        self.lo, self.hi = float(lo), float(hi)
        self.act = ACTIVATIONS.index(activation or "none")
        self.tag = _tag(LANES)
        self._bound = nchwc.LastBind()

    def out_shape(self, shape):
        """The NCHW16c output shape for an (N, C, H, W) input ``shape``."""
        Ho, Wo = out_hw(shape, self.kernel, self.stride, self.pads, self.dilation)
        return nchwc.blocked_shape((shape[0], self.O, Ho, Wo), LANES)

    def bind(self, x, out, residual=None) -> _Run:
        if residual is not None:
            raise ShapeError("BlockedDenseConv: takes no residual")
        return self._bound.get(lambda x, out, _: _Run(self, x, out), x, out, None)

    def __call__(self, x, out, residual=None, threads: int = 1):
        run_bound(self.bind(x, out, residual), threads)
        return out


class _Run(SerialTasks):
    """One call (the bound-call protocol of :func:`.direct.run_bound`): tasks are output blocks."""
    __slots__ = ("_args", "_entry", "channels", "images", "tasks")

    def __init__(self, conv: BlockedDenseConv, x, out):
        if x.ndim != 4 or x.shape[1] != conv.C or not x.flags.c_contiguous or x.dtype != np.float32:
            raise ShapeError(f"BlockedDenseConv: input must be a C-contiguous float32 (N, {conv.C}, H, W) array, "
                             f"got {x.dtype} {x.shape}")
        want = conv.out_shape(x.shape)
        if tuple(out.shape) != want:
            raise ShapeError(f"BlockedDenseConv: out must be {want}, got {tuple(out.shape)}")
        N, C, H, W = x.shape
        (kh, kw), (sh, sw), (dh, dw) = conv.kernel, conv.stride, conv.dilation
        self.images, self.channels, self.tasks = N, 0, conv.nob
        self._entry = None
        self._args = (x.reshape(-1), C, H, W, sh, sw, dh, dw, conv.pads[0][0], conv.pads[1][0], kh, kw, conv.wq,
                      conv.bq, conv.nob, out.reshape(-1), want[2], want[3], conv.lo, conv.hi, conv.act, conv.tag)

    @property
    def args(self) -> tuple:
        """:func:`dense_tasks`' arguments before ``(n, b0, b1)``: for a caller that runs the ranges of
        output blocks its own way (an OpenMP region)."""
        return self._args

    def fill(self, n: int, c0: int, c1: int):
        """Nothing: the kernel reads its input in place."""

    def tasks_kernel(self):
        return dense_tasks

    def images_kernel(self):
        return dense_images

    def run_tasks(self, n: int, t0: int, t1: int):
        dense_tasks(*self._args, n, t0, t1)
