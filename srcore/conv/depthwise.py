"""Explicit-SIMD float32 depthwise convolution (groups == in channels; 2-D; stride, padding,
dilation, a channel multiplier).

One input channel per output channel leaves nothing to share across channels, so the register
block is spatial: 8 accumulators of ``lanes`` output columns each, as 8 rows x 1 vector when the
output rows fit one vector (MobileNet's 7x7 and 14x14 planes on AVX-512) or 4 rows x 2 vectors
otherwise. Per tap the weight is broadcast once and each accumulator does one FMA on an unaligned
load (:mod:`.simd`). Each input channel is copied, just before its output channels are computed,
into a small padded, stride-phase-split buffer (the layout of :func:`.direct.fill_phases`; zeroed
once per call, so only the interior is copied: :func:`_copy_channel`, stride 2 deinterleaved with
vector shuffles), which stays in cache while the kernel reads it; so at stride 2 the loads stay
contiguous without im2col. Bias is the accumulators' start; an optional residual, leaky relu and a clamp (relu, relu6) are
fused into the stores (:func:`_put`; at a row's end a masked store). Work is split by output channel, so more than one thread splits the channels.

Lanes come from the CPU's features (:func:`.direct.lanes`), never its vendor; callers choose this
kernel by timing it against their other tactics on the real shape.
"""
from __future__ import annotations

import math

import numba
import numpy as np

from ..errors import ShapeError
from ._jit import helper
from .direct import _JIT, _tag, exact_entry, lanes, run_bound
from .simd import (fptr, vadd, vbcast, vclamp, vdiv, veven, vfma, vleaky, vload, vload_n, vmul, vodd, vsplat, vstore,
                   vstore_n)

#: accumulators (vectors of output columns) per register block
SLOTS = 8
#: the activations the stores apply after the clamp (a code per name: its index)
ACTIVATIONS = ("none", "hardswish", "hardsigmoid")


@helper
def _copy_channel(px, src0, H, W, sh, sw, pt, pl, pq, Hq, Wq, J0, J1, like, nl):
    """The input plane at ``px[src0:src0 + H * W]`` into its stride phases
    ``pq[((a * sw + b) * Hq + i) * Wq + j] = x_padded[i * sh + a, j * sw + b]``, **interior only**:
    the cells that padding reaches are never written (the caller zeroes the buffer once, and every
    channel has the same interior). Rows in whole vectors ending with one that overlaps the vector
    before it (the same values); at stride 2 two vector loads deinterleaved into the two column
    phases (``[J0, J1)``: the columns both phases have inside the row; empty when too narrow);
    other strides and the edges element by element."""
    for a in range(sh):
        i0 = max(0, (pt - a + sh - 1) // sh)
        i1 = min(Hq, (H - 1 + pt - a) // sh + 1)
        for i in range(i0, i1):
            src = src0 + (i * sh + a - pt) * W
            base0 = (a * sw * Hq + i) * Wq
            if sw == 1:
                j1 = min(Wq, W + pl)
                if j1 - pl >= nl:
                    for jv in range(pl, j1, nl):
                        j = min(jv, j1 - nl)
                        vstore(pq, base0 + j, vload(px, src + j - pl, like))
                elif j1 > pl:   # a row narrower than a vector
                    vstore_n(pq, base0 + pl, vload_n(px, src, j1 - pl, like), j1 - pl)
                continue
            if sw == 2 and J1 - J0 >= nl:
                for jv in range(J0, J1, nl):
                    j = min(jv, J1 - nl)
                    v0 = vload(px, src + 2 * j - pl, like)
                    v1 = vload(px, src + 2 * j - pl + nl, like)
                    vstore(pq, base0 + j, veven(v0, v1))
                    vstore(pq, base0 + Hq * Wq + j, vodd(v0, v1))
            elif sw == 2 and J1 > J0:   # narrower than a vector: masked loads (nothing read past the row)
                s0 = 2 * J0 - pl
                v0 = vload_n(px, src + s0, min(nl, W - s0), like)
                v1 = vload_n(px, src + s0 + nl, max(0, min(nl, W - s0 - nl)), like)
                vstore_n(pq, base0 + J0, veven(v0, v1), J1 - J0)
                vstore_n(pq, base0 + Hq * Wq + J0, vodd(v0, v1), J1 - J0)
            if sw == 2:   # the edges (divisions by the constant 2: a run-time divisor cost more than the row)
                for bb in range(2):
                    base = base0 + bb * Hq * Wq
                    j0 = min(Wq, max(0, (pl - bb + 1) // 2))
                    j1 = max(j0, min(Wq, (W - 1 + pl - bb) // 2 + 1))
                    for j in range(j0, min(j1, J0)):
                        pq[base + j] = px[src + 2 * j + bb - pl]
                    for j in range(max(j0, J1), j1):
                        pq[base + j] = px[src + 2 * j + bb - pl]
                continue
            for bb in range(sw):
                base = base0 + bb * Hq * Wq
                j0 = min(Wq, max(0, (pl - bb + sw - 1) // sw))
                j1 = max(j0, min(Wq, (W - 1 + pl - bb) // sw + 1))
                for j in range(j0, min(j1, J0)):
                    pq[base + j] = px[src + j * sw + bb - pl]
                for j in range(max(j0, J1), j1):
                    pq[base + j] = px[src + j * sw + bb - pl]


@helper
def finish(v, pres, oi, width, has_res, leaky, slope, lo, hi, act, c3, c6):
    """The epilogue of an accumulator ``v`` bound for ``out[oi:oi + width]``: ``+ res[oi:oi + width]``
    (a masked load), leaky relu, the clamp, then hardswish / hardsigmoid (``act``: the index in
    :data:`ACTIVATIONS`; ``c3``, ``c6``: 3 and 6 in every lane). Inlined into the kernels of
    :mod:`.pointwise` and :mod:`.depthwise_blocked` too: numba's on-disk cache keys a kernel on its
    own module's source, so after editing this function delete their ``__pycache__/*.nbi``/``*.nbc``."""
    if has_res:
        v = vadd(v, vload_n(pres, oi, width, v))
    if leaky:
        v = vleaky(v, slope)
    v = vclamp(v, lo, hi)
    if act != 0:   # torch's float32 formulas, op for op (no contraction): the bits of the separate pass
        t = vclamp(vadd(v, c3), 0.0, 6.0)
        v = vdiv(vmul(v, t) if act == 1 else t, c6)
    return v


@helper
def _put(a, row, col, nl, Ho, Wo, obase, plane, one_block, pout, pres, has_res, leaky, slope, lo, hi, act, c3, c6):
    """A slot (accumulator ``a``, output pixel ``(row, col)`` and the ``nl - 1`` after it in its row)
    into the output where it lies inside the plane, from the register: a whole vector, or at a
    row's end a masked store of the row's part. A partial vector is stored whole when what it
    spills over lies in this plane's later rows, which the task writes afterwards: one column block
    per row (else the next row's start is already written), no residual (``out`` may be the
    residual's buffer)."""
    if row >= Ho or col >= Wo:
        return
    oi = obase + row * Wo + col
    width = min(nl, Wo - col)
    whole = width == nl or (one_block and not has_res and oi + nl <= obase + plane)
    v = finish(a, pres, oi, width, has_res, leaky, slope, lo, hi, act, c3, c6)
    if whole:
        vstore(pout, oi, v)
    else:
        vstore_n(pout, oi, v, width)


@numba.njit(**_JIT)
def dw_tasks(x, H, W, sh, sw, pt, pl, Hq, Wq, J0, J1, mult, taps, w, b, out, res, has_res, leaky, slope, lo, hi,
             act, O, Ho, Wo, rb, cb, tag, nl, n, t0, t1):
    """Output channels ``t0 <= o < t1`` of image ``n`` of ``x`` ((N, C * H * W) C-contiguous).
    Each input channel is first copied into this call's padded, stride-phase-split buffer of
    ``sh * sw * Hq * Wq`` floats (:func:`_copy_channel`; zeroed once, so only the interior is
    copied), which stays in L1/L2 while its output channels are computed. ``taps[k]``: offset in
    that buffer of tap ``k``'s input for output pixel (0, 0); ``w`` (O, taps) flat, ``b`` (O,). The
    block is ``rb`` rows x ``cb`` vectors (rb * cb == 8); ``act`` the activation after the clamp
    (:data:`ACTIVATIONS`' index; ``c3``, ``c6``: 3 and 6 in every lane)."""
    nt = taps.shape[0]
    xq = np.zeros(sh * sw * Hq * Wq, np.float32)
    C = O // mult
    # pointers, not arrays: no reference counting in the inlined helpers, no negative-index
    # wraparound on the weight's index (it cost registers in the tap loop)
    pout, pres, px, pw, pin = fptr(out), fptr(res), fptr(xq), fptr(w), fptr(x)
    plane = Ho * Wo
    # the 8 slots' offsets in xq from the block's corner: slot s = row s // cb, vector s % cb
    # (and in the output: row d_s, column e_s), computed once: integer divisions in the epilogue
    # cost more than a 3x3 block's FMAs
    d1, d2, d3, d4, d5, d6, d7 = 1 // cb, 2 // cb, 3 // cb, 4 // cb, 5 // cb, 6 // cb, 7 // cb
    e1, e2, e3 = (1 % cb) * nl, (2 % cb) * nl, (3 % cb) * nl
    e4, e5, e6, e7 = (4 % cb) * nl, (5 % cb) * nl, (6 % cb) * nl, (7 % cb) * nl
    q1, q2, q3, q4 = d1 * Wq + e1, d2 * Wq + e2, d3 * Wq + e3, d4 * Wq + e4
    q5, q6, q7 = d5 * Wq + e5, d6 * Wq + e6, d7 * Wq + e7
    one_block = Wo <= cb * nl
    c3, c6 = vsplat(tag, 3.0), vsplat(tag, 6.0)   # the activations' constants
    overlap = not has_res and Wo >= cb * nl
    cur = -1
    for o in range(t0, t1):
        if o // mult != cur:
            cur = o // mult
            _copy_channel(pin, (n * C + cur) * H * W, H, W, sh, sw, pt, pl, px, Hq, Wq, J0, J1, vsplat(tag, 0.0), nl)
        obase = (n * O + o) * plane
        wo = o * nt
        bv = vsplat(tag, b[o])
        for r0 in range(0, Ho, rb):
            for jb in range(0, Wo, cb * nl):
                # a row's last column block ends at its end, overlapping the one before (the same
                # values stored twice) instead of ending in partial vectors; not with a residual
                # (``out`` may be its buffer: the overlap would read outputs as residual)
                j0 = Wo - cb * nl if overlap and jb + cb * nl > Wo else jb
                a0, a1, a2, a3, a4, a5, a6, a7 = bv, bv, bv, bv, bv, bv, bv, bv
                base = r0 * Wq + j0
                for k in range(nt):
                    xi = base + taps[k]
                    wk = vbcast(pw, wo + k, bv)
                    a0 = vfma(vload(px, xi, bv), wk, a0)
                    a1 = vfma(vload(px, xi + q1, bv), wk, a1)
                    a2 = vfma(vload(px, xi + q2, bv), wk, a2)
                    a3 = vfma(vload(px, xi + q3, bv), wk, a3)
                    a4 = vfma(vload(px, xi + q4, bv), wk, a4)
                    a5 = vfma(vload(px, xi + q5, bv), wk, a5)
                    a6 = vfma(vload(px, xi + q6, bv), wk, a6)
                    a7 = vfma(vload(px, xi + q7, bv), wk, a7)
                # the epilogue from the registers
                _put(a0, r0, j0, nl, Ho, Wo, obase, plane, one_block, pout, pres, has_res, leaky, slope, lo, hi, act, c3, c6)
                _put(a1, r0 + d1, j0 + e1, nl, Ho, Wo, obase, plane, one_block, pout, pres, has_res, leaky, slope, lo, hi, act, c3, c6)
                _put(a2, r0 + d2, j0 + e2, nl, Ho, Wo, obase, plane, one_block, pout, pres, has_res, leaky, slope, lo, hi, act, c3, c6)
                _put(a3, r0 + d3, j0 + e3, nl, Ho, Wo, obase, plane, one_block, pout, pres, has_res, leaky, slope, lo, hi, act, c3, c6)
                _put(a4, r0 + d4, j0 + e4, nl, Ho, Wo, obase, plane, one_block, pout, pres, has_res, leaky, slope, lo, hi, act, c3, c6)
                _put(a5, r0 + d5, j0 + e5, nl, Ho, Wo, obase, plane, one_block, pout, pres, has_res, leaky, slope, lo, hi, act, c3, c6)
                _put(a6, r0 + d6, j0 + e6, nl, Ho, Wo, obase, plane, one_block, pout, pres, has_res, leaky, slope, lo, hi, act, c3, c6)
                _put(a7, r0 + d7, j0 + e7, nl, Ho, Wo, obase, plane, one_block, pout, pres, has_res, leaky, slope, lo, hi, act, c3, c6)


def check_args(name, channels, weight, stride, pads, dilation, activation):
    """The arguments the depthwise convs share, checked: ``(weight, stride, dilation, pads, act)``,
    the weight float32 ``(channels, 1, kh, kw)``, stride and dilation ``(h, w)`` pairs, ``pads``
    ``[(top, bottom), (left, right)]`` from an int, a pair or two pairs, ``act`` the index of
    ``activation`` in :data:`ACTIVATIONS`; a :class:`ShapeError` naming ``name`` otherwise."""
    w = np.asarray(weight, np.float32)
    if w.ndim != 4 or w.shape[1] != 1:
        raise ShapeError(f"{name}: weight must be ({channels}, 1, kh, kw), got shape {w.shape}")
    two = lambda v: tuple(int(i) for i in v) if isinstance(v, (tuple, list)) else (int(v),) * 2
    stride, dilation = two(stride), two(dilation)
    pads = list(pads) if isinstance(pads, (tuple, list)) else [pads, pads]
    pads = [tuple(int(i) for i in p) if isinstance(p, (tuple, list)) else (int(p), int(p)) for p in pads]
    if min(stride + dilation) < 1 or min(min(p) for p in pads) < 0:
        raise ShapeError(f"{name}: bad stride {stride}, dilation {dilation} or padding {pads}")
    if (activation or "none") not in ACTIVATIONS:
        raise ShapeError(f"{name}: activation {activation!r} is not one of {', '.join(ACTIVATIONS)}")
    return w, stride, dilation, pads, ACTIVATIONS.index(activation or "none")


def out_hw(shape, kernel, stride, pads, dilation):
    """The output plane ``(Ho, Wo)`` of a conv on input ``shape`` (N, C, H, W)."""
    (kh, kw), (sh, sw), (dh, dw) = kernel, stride, dilation
    H, W = shape[2], shape[3]
    return ((H + sum(pads[0]) - dh * (kh - 1) - 1) // sh + 1, (W + sum(pads[1]) - dw * (kw - 1) - 1) // sw + 1)


class SimdDepthwiseConv:
    """A depthwise conv with fixed weights on the SIMD kernel: ``conv(x, out, residual=None,
    threads=1)`` writes ``clamp(conv(x) + bias (+ residual), lo, hi)`` into ``out`` (C-contiguous
    float32, (N, O, Ho, Wo)).

    ``weight`` is (O, 1, kh, kw) with O a multiple of the input channels (output channel ``o``
    reads input channel ``o // (O // C)``); ``pads`` an int, an (h, w) pair, or ((top, bottom),
    (left, right)); ``lo``/``hi`` the fused clamp (``0, inf`` for relu); ``negative_slope`` a fused
    leaky relu (``None``: none); ``activation`` ``"hardswish"`` or ``"hardsigmoid"`` after the
    clamp, with torch's float32 formulas (``None``: none). ``lanes_`` forces the vector
    width (tests; default :func:`~.direct.lanes`). ``x`` may be any float32 (N, C, H, W) view.
    """

    def __init__(self, weight, bias, stride=1, pads=0, dilation=1, lo=-math.inf, hi=math.inf, lanes_=None,
                 negative_slope=None, activation=None):
        w, self.stride, self.dilation, self.pads, self.act = check_args("SimdDepthwiseConv", "O", weight, stride,
                                                                        pads, dilation, activation)
        self.O, _, kh, kw = w.shape
        self.kernel = (kh, kw)
        self.w = np.ascontiguousarray(w.reshape(self.O, kh * kw)).reshape(-1)
        self.b = (np.zeros(self.O, np.float32) if bias is None
                  else np.ascontiguousarray(np.asarray(bias, np.float32).reshape(self.O)))
        self.lo, self.hi = float(lo), float(hi)
        self.leaky = negative_slope is not None
        self.slope = np.float32(negative_slope if self.leaky else 1.0)   # torch multiplies in float32
        self.nl = lanes() if lanes_ is None else int(lanes_)
        self.tag = _tag(self.nl)
        self._none = np.zeros(1, np.float32)
        self._geometry: dict = {}

    def out_shape(self, shape):
        return (shape[0], self.O, *out_hw(shape, self.kernel, self.stride, self.pads, self.dilation))

    def _plan(self, shape):
        """Output size, register block, padded buffer size, vector copy columns and tap offsets for
        input ``shape``."""
        _, _, H, W = shape
        Ho, Wo = self.out_shape(shape)[2:]
        (kh, kw), (sh, sw), (dh, dw) = self.kernel, self.stride, self.dilation
        nl = self.nl
        rb, cb = (SLOTS, 1) if Wo <= nl else (SLOTS // 2, 2)
        # the buffer covers whole register blocks (their extra rows/columns read zeros, never stored)
        Hr, Wr = -(-Ho // rb) * rb, -(-Wo // (cb * nl)) * cb * nl
        Hq = max(-(-(H + sum(self.pads[0])) // sh), Hr + (kh - 1) * dh // sh)
        Wq = max(-(-(W + sum(self.pads[1])) // sw), Wr + (kw - 1) * dw // sw)
        taps = np.array([((ky * dh % sh) * sw + kx * dw % sw) * Hq * Wq + (ky * dh // sh) * Wq + kx * dw // sw
                         for ky in range(kh) for kx in range(kw)], np.int64)
        # stride 2: the columns [J0, J1) both column phases have inside the input, copied in
        # deinterleaved vectors (masked when fewer than a vector; none: J0 = J1 = Wq, every column
        # element by element)
        pl = self.pads[1][0]
        J0 = max(min(Wq, max(0, (pl - b + sw - 1) // sw)) for b in range(sw))
        J1 = min(max(0, min(Wq, (W - 1 + pl - b) // sw + 1)) for b in range(sw))
        if sw != 2 or J1 <= J0:
            J0 = J1 = Wq
        return Ho, Wo, rb, cb, Hq, Wq, J0, J1, taps

    def bind(self, x, out, residual=None) -> DepthwiseRun:
        """This conv on input ``x`` into ``out`` (and ``residual``), as two steps per image that take a
        range each (:class:`DepthwiseRun`): what :meth:`__call__` runs, and what a caller splitting the
        work over its own threads runs part by part."""
        return DepthwiseRun(self, x, out, residual)

    def __call__(self, x, out, residual=None, threads: int = 1):
        run_bound(self.bind(x, out, residual), threads)   # channels split over the threads
        return out


class DepthwiseRun:
    """One call of a :class:`SimdDepthwiseConv`, per image ``n < images``: :meth:`run_tasks` computes
    output channels ``[t0, t1)`` (of ``tasks``), copying the input channels they read into its own
    padded buffer first. Ranges may run on different threads at once (the kernel releases the GIL);
    a channel's result does not depend on the range it ran in. The bound-call protocol of
    :func:`.direct.run_bound` has a copy step before the tasks (:meth:`fill`, over ``channels``):
    here it has nothing to do (``channels == 0``)."""
    __slots__ = ("_args", "channels", "images", "tasks")

    def __init__(self, conv: SimdDepthwiseConv, x, out, residual):
        N, C, H, W = x.shape
        if conv.O % C:
            raise ShapeError(f"SimdDepthwiseConv: {conv.O} output channels are not a multiple of "
                             f"the input's {C} channels")
        geom = conv._geometry.get(x.shape)
        if geom is None:
            geom = conv._geometry[x.shape] = conv._plan(x.shape)
        Ho, Wo, rb, cb, Hq, Wq, J0, J1, taps = geom
        sh, sw = conv.stride
        self.images, self.channels, self.tasks = N, 0, conv.O
        xc = np.ascontiguousarray(x, np.float32).reshape(N, -1)   # (a copy only for a strided view)
        res = conv._none if residual is None else residual.reshape(-1)
        self._args = (xc, H, W, sh, sw, conv.pads[0][0], conv.pads[1][0], Hq, Wq, J0, J1, conv.O // C, taps,
                      conv.w, conv.b, out.reshape(-1), res, residual is not None, conv.leaky, conv.slope, conv.lo,
                      conv.hi, conv.act, conv.O, Ho, Wo, rb, cb, conv.tag, conv.nl)

    def fill(self, n: int, c0: int, c1: int):
        """Nothing: :meth:`run_tasks` copies the input channels it reads."""

    def run_tasks(self, n: int, t0: int, t1: int):
        """Output channels ``[t0, t1)`` of image ``n``."""
        dw_tasks(*self._args, n, t0, t1)

    def serial_calls(self):
        """Every image's tasks as plain ``(fn, args)`` calls on the kernel's compiled entry point (for a
        caller that makes this call again on the same C-contiguous arrays)."""
        entry = exact_entry(dw_tasks, (*self._args, 0, 0, self.tasks))
        return tuple((entry, (*self._args, n, 0, self.tasks)) for n in range(self.images))
