"""Explicit-SIMD float32 direct convolution (1-D and 2-D; stride, padding, dilation, groups).

No im2col: the input of one image is copied once into a padded, stride-phase-split buffer
``xq[c, a, b, i, j] = x_padded[c, i*sh + a, j*sw + b]``, so the inputs of ``lanes`` consecutive output
pixels under one tap are contiguous at every stride and dilation (or, ``rows_interleaved``, into
``xq[i, c, a, b, j]``: the rows of all channels one output row reads side by side, for long rows
or many channels; the caller times both). The micro-kernel holds a block of
6 output channels x 2 vectors of output pixels at 8 lanes (12 of AVX2's 16 registers), 8 channels
at 16 (AVX-512: 16 of 32; against 6: 0.8-0.9x the time on Sapphire Rapids) in registers
(:mod:`.simd`); per tap it loads 2 input vectors, broadcasts a weight per channel (packed once at
load into ``(groups, blocks, C/g, kh, kw, 6 or 8)``) and does 12 or 16 FMAs. A task's pixels are
part of an output row, two rows, or a span of the plane at the copy's row pitch, whichever keeps
more lanes busy (:func:`conv_tasks`). The epilogue is fused: bias (the accumulators' start), an
optional residual, leaky relu, a clamp (relu = ``[0, inf)``, relu6, hardtanh):
:func:`.simd.store_epilogue`. ``oc_lanes``: output channels in the lanes instead
(:mod:`.direct_oc`, small planes).

Lanes come from the CPU's features (:func:`lanes`), never its vendor. Callers choose this kernel by
timing it against their other tactics on the real shape.
"""
from __future__ import annotations

import math
import threading

import numba
import numpy as np

from ..cpu_features import cpu_features
from ..errors import ShapeError
from ._jit import JIT, helper, plain_args
from .direct_oc import PIXELS, conv_tasks_oc
from .packed_call import remember
from .simd import (fptr, store_epilogue, store_epilogue_n, task_coords, vbcast, veven, vfma, vload, vodd, vsplat,
                   vstore)

#: output channels per register block: 6 at 8 lanes (12 of AVX2's 16 ``ymm`` registers), 8 at 16
#: (16 of AVX-512's 32 ``zmm``: fewer wasted channels at 16, 32, 64, and more FMAs per input load)
OC_BLOCK = 6
OC_BLOCK_16 = 8
#: what a task of :func:`conv_tasks` covers: part of an output row, two rows, a span of the plane;
#: or :func:`.direct_oc.conv_tasks_oc`'s task
ROWS, PAIRS, FLAT, OC_LANES = 0, 1, 2, 3
#: FLAT is taken where its share of busy lanes is this much above the rows'
FLAT_GAIN = 1.05
#: the :attr:`SimdDirectConv.row_tile` callers time on rows longer than it: audio_conv1d's 3199-sample
#: 128-channel conv (1 KB of input copy an output) took 2110 us in whole rows, 1480-1570 us in pieces
#: of 32-512 outputs at 16 lanes, the shorter rows the same either way (Sapphire Rapids, performance.md)
ROW_TILE = 512
_JIT = JIT


def lanes(features=None) -> int:
    """float32 lanes of the widest vector the CPU runs: 16 with AVX-512F, else 8 (AVX2 or less:
    LLVM lowers the 8-lane vectors to what the CPU has)."""
    return 16 if "AVX512F" in (cpu_features() if features is None else features) else 8


def aligned(a: np.ndarray) -> np.ndarray:
    """``a`` (a float32 1-D array) at a 64-byte boundary (itself if it is): the kernels load a
    block's weights as whole vectors, and an unaligned 64-byte load spans two cache lines."""
    if a.ctypes.data % 64 == 0 and a.flags.c_contiguous:
        return a
    raw = np.empty(a.size + 16, np.float32)
    start = (-raw.ctypes.data) % 64 // 4
    out = raw[start:start + a.size]
    out[...] = a
    return out


def _tag(nl: int) -> np.ndarray:
    # the width tag of srcore.conv.simd: ndim 1 -> 8 lanes, ndim 2 -> 16
    return np.zeros(1, np.float32) if nl == 8 else np.zeros((1, 1), np.float32)


@plain_args
@numba.njit(**_JIT)
def fill_strided(x, n, sh, sw, pt, pl, xq, off, cs, as_, bs, is_, Hq, Wq, amask, tag, nl):
    """:func:`fill_phases` into any layout of the phase-split copy: element ``[c, a, b, i, j]`` at
    ``off + c*cs + a*as_ + b*bs + i*is_ + j``. With ``is_`` the largest stride (row-interleaved:
    ``[i, c, a, b, j]``) the input rows one output row reads, of every channel, lie side by side.
    Only the row phases ``a`` in the bit mask ``amask`` (those a tap reads: a 1x1 stride-2 conv reads
    half the input's rows)."""
    C, H, W = x.shape[1], x.shape[2], x.shape[3]
    vec = x.strides[3] == 4 and sw <= 2
    probe = vsplat(tag, 0.0)
    # the columns every phase b has inside the input: [J0, Jend)
    J0, Jend = 0, Wq
    for b in range(sw):
        J0 = max(J0, min(Wq, max(0, (pl - b + sw - 1) // sw)))
        Jend = min(Jend, max(0, min(Wq, (W - 1 + pl - b) // sw + 1)))
    # whole vectors from J0, the last one ending at J1 (overlapping the one before: same values)
    J1 = Jend
    if not vec or J1 - J0 < nl:
        J0, J1 = Wq, Wq
    # every element written once: the padding's zeros around the copied interior
    for c in range(C):
        for a in range(sh):
            if not (amask >> a) & 1:
                continue
            for i in range(Hq):
                r = i * sh + a - pt
                base0 = off + c * cs + a * as_ + i * is_
                if r < 0 or r >= H:
                    for b in range(sw):
                        base = base0 + b * bs
                        for j in range(Wq):
                            xq[base + j] = 0.0
                    continue
                src = x[n, c, r]
                for jv in range(J0, J1, nl):
                    j = min(jv, J1 - nl)
                    s0 = j * sw - pl
                    if sw == 1:
                        vstore(xq, base0 + j, vload(src, s0, probe))
                    else:
                        v0 = vload(src, s0, probe)
                        v1 = vload(src, s0 + nl, probe)
                        vstore(xq, base0 + j, veven(v0, v1))
                        vstore(xq, base0 + bs + j, vodd(v0, v1))
                for b in range(sw):
                    base = base0 + b * bs
                    j0 = min(Wq, max(0, (pl - b + sw - 1) // sw))
                    j1 = max(j0, min(Wq, (W - 1 + pl - b) // sw + 1))
                    for j in range(j0):
                        xq[base + j] = 0.0
                    for j in range(j0, min(j1, J0)):
                        xq[base + j] = src[j * sw + b - pl]
                    for j in range(max(j0, J1), j1):
                        xq[base + j] = src[j * sw + b - pl]
                    for j in range(j1, Wq):
                        xq[base + j] = 0.0


@numba.njit(**_JIT)
def fill_phases(x, n, sh, sw, pt, pl, xq, Hq, Wq, tag, nl):
    """Image ``n`` of ``x`` (N, C, H, W; any strides), zero-padded by ``pt`` rows on top and ``pl``
    columns on the left (and as far as ``xq`` reaches below and right), phase-split by the stride.
    Rows with unit element stride are copied ``nl`` outputs at a time (stride 2: two vector loads
    deinterleaved into the two column phases); the rest, and the edges, element by element."""
    fill_strided(x, n, sh, sw, pt, pl, xq, 0, sh * sw * Hq * Wq, sw * Hq * Wq, Hq * Wq, Wq, Hq, Wq, -1, tag, nl)


@plain_args
@numba.njit(**_JIT)
def conv_tasks(xq, rstep, cstep, taps, wp, bp, cg, Og, nb_oc,
               out, res, has_res, leaky, slope, lo, hi, O, Ho, Wo, tag, nl, mode, tile, pix_inner, n, t0, t1):
    """Tasks ``t0 <= t < t1`` of image ``n``: task ``t`` is channel block ``t % nb_oc`` of output row
    ``t // nb_oc % Hr`` of group ``t // (nb_oc * Hr)``. ``taps[k]``: offset in ``xq`` of the input of
    (channel, tap) pair ``k`` of a group for output pixel (0, 0); ``cstep`` the offset between channels,
    ``rstep`` between rows of a phase. ``out``/``res`` flat.
    ``mode`` (:data:`ROWS`, :data:`PAIRS`, :data:`FLAT`): a task is an output row (``Hr = Ho``); or,
    rows no wider than a vector, two rows, one vector each, so narrow planes fill the register
    block (``Hr = ceil(Ho / 2)``); or ``2 * nl`` consecutive positions of the output plane laid out
    at the input's row pitch ``rstep`` (``Hr = ceil(Ho * rstep / (2 * nl))``): a tap's inputs are
    contiguous across rows too, so lanes are lost only to the ``rstep - Wo`` padding columns (8x8 at
    16 lanes: 80% of the lanes busy, against 50% two rows a block), stored row segment by segment.
    ``tile`` (:data:`ROWS`; a multiple of ``2 * nl``): a task is ``tile`` outputs of a row (``Hr = Ho
    * ceil(Wo / tile)``), so all channel blocks read a piece of a long row's input while it is in
    cache (the whole row: ``tile >= Wo``).
    ``pix_inner``: the order of tasks, rows (or spans) of a channel block consecutive, else the
    channel blocks of a row."""
    nt = taps.shape[0]   # (channel of the group, tap) pairs, flattened: one loop, no short inner one
    wide = tag.ndim == 2   # (a type attribute: the 8-lane kernel compiles without the wide code)
    OB = OC_BLOCK_16 if wide else OC_BLOCK
    KK = nt * OB
    blk = np.empty(2 * OB * nl, np.float32)
    pblk, pout, pres = fptr(blk), fptr(out), fptr(res)   # the epilogue's operands (no reference counting)
    plane = Ho * Wo
    flat = mode == FLAT
    nck = (Wo + tile - 1) // tile if mode == ROWS else 1   # pieces of a row
    Hr = (Ho * rstep + 2 * nl - 1) // (2 * nl) if flat else (Ho + 1) // 2 if mode == PAIRS else Ho * nck
    vstep = rstep if mode == PAIRS else nl     # the second vector's input: the next row, or the next pixels
    ostep = Wo if mode == PAIRS else nl        # and its output
    for t in range(t0, t1):
        # channel blocks innermost: consecutive tasks read the same input rows (in L1); or, weights
        # larger than the input (pix_inner), rows: a block's weights stay in L2 for all rows
        ho, ob, gi = task_coords(t, nb_oc, Hr, pix_inner)
        jlo, jhi = 0, 1 if flat else Wo
        if mode == PAIRS:
            ho *= 2
        elif nck > 1:
            jlo = ho % nck * tile
            jhi = min(Wo, jlo + tile)
            ho //= nck
        gb = gi * nb_oc + ob
        oc0 = ob * OB
        wb = gb * KK
        row = ((n * O + gi * Og + oc0) * Ho + (0 if flat else ho)) * Wo
        nm = min(OB, Og - oc0)
        for j0 in range(jlo, jhi, 2 * nl):
            if mode == PAIRS:   # one row per vector; an odd last pair has its first row only
                n0, n1 = Wo, Wo if ho + 1 < Ho else 0
            else:
                n0 = min(nl, Wo - j0)
                n1 = min(nl, Wo - j0 - n0)
            bi = gb * OB
            a0 = vsplat(tag, bp[bi])
            a1 = vsplat(tag, bp[bi + 1])
            a2 = vsplat(tag, bp[bi + 2])
            a3 = vsplat(tag, bp[bi + 3])
            a4 = vsplat(tag, bp[bi + 4])
            a5 = vsplat(tag, bp[bi + 5])
            a6 = vsplat(tag, bp[bi + 6] if wide else 0.0)
            a7 = vsplat(tag, bp[bi + 7] if wide else 0.0)
            c0, c1, c2, c3, c4, c5, c6, c7 = a0, a1, a2, a3, a4, a5, a6, a7
            wi = wb
            base = gi * cg * cstep + (ho * 2 * nl if flat else ho * rstep + j0)
            for k in range(nt):
                xi = base + taps[k]
                x0 = vload(xq, xi, a0)
                x1 = vload(xq, xi + vstep, a0)
                w = vbcast(wp, wi, a0)
                a0 = vfma(x0, w, a0)
                c0 = vfma(x1, w, c0)
                w = vbcast(wp, wi + 1, a0)
                a1 = vfma(x0, w, a1)
                c1 = vfma(x1, w, c1)
                w = vbcast(wp, wi + 2, a0)
                a2 = vfma(x0, w, a2)
                c2 = vfma(x1, w, c2)
                w = vbcast(wp, wi + 3, a0)
                a3 = vfma(x0, w, a3)
                c3 = vfma(x1, w, c3)
                w = vbcast(wp, wi + 4, a0)
                a4 = vfma(x0, w, a4)
                c4 = vfma(x1, w, c4)
                w = vbcast(wp, wi + 5, a0)
                a5 = vfma(x0, w, a5)
                c5 = vfma(x1, w, c5)
                if wide:
                    w = vbcast(wp, wi + 6, a0)
                    a6 = vfma(x0, w, a6)
                    c6 = vfma(x1, w, c6)
                    w = vbcast(wp, wi + 7, a0)
                    a7 = vfma(x0, w, a7)
                    c7 = vfma(x1, w, c7)
                wi += OB
            # the block through a local buffer, then one plain loop (LLVM vectorizes it): a helper
            # call per channel cost more than the block's FMAs (array reference counting)
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
            if wide:
                vstore(blk, 12 * nl, a6)
                vstore(blk, 13 * nl, c6)
                vstore(blk, 14 * nl, a7)
                vstore(blk, 15 * nl, c7)
            for m in range(nm):
                for h in range(2):
                    src = (2 * m + h) * nl
                    if flat:
                        _store_flat(pblk, src, pout, row + m * plane, ho * 2 * nl + h * nl, nl, rstep, Wo, Ho,
                                    pres, has_res, leaky, slope, lo, hi, a0)
                        continue
                    cnt = n0 if h == 0 else n1
                    o = row + m * plane + j0 + h * ostep
                    if cnt == nl:
                        store_epilogue(pblk, src, pout, o, nl, True, pres, has_res, leaky, slope, lo, hi, a0)
                    elif cnt > 0:
                        store_epilogue_n(pblk, src, pout, o, cnt, pres, has_res, leaky, slope, lo, hi, a0)


@helper
def _store_flat(blk, src, out, obase, q, nl, pitch, Wo, Ho, res, has_res, leaky, slope, lo, hi, like):
    """The :data:`FLAT` store of the vector ``blk[src:src + nl]``, positions ``q, q + 1, ...`` of a
    plane of rows ``pitch`` apart: each row segment inside the output (``column < Wo``, ``row < Ho``)
    to ``out[obase + row * Wo + column]``, masked."""
    i = q // pitch
    j = q - i * pitch
    e = 0
    while e < nl and i < Ho:
        seg = min(nl - e, pitch - j)
        if j < Wo:
            store_epilogue_n(blk, src + e, out, obase + i * Wo + j, min(seg, Wo - j), res, has_res, leaky, slope,
                             lo, hi, like)
        e += seg
        i += 1
        j = 0


#: a split call's tasks are cut in this many parts per thread, claimed one at a time (:mod:`.team`):
#: a worker that joins late leaves its part to the caller instead of making it wait for it. One: each
#: part a thread claims costs a GIL hand-over, and a thread descheduled while it holds the GIL stalls
#: the other (resnet_small at 2 threads, four parts a thread, loaded 2-vCPU Sapphire Rapids: 26 ->
#: 68 ms median of all calls in one A/B run, 2026-11-28)
PARTS_PER_THREAD = 1


def run_split(part, threads: int, parts: int | None = None) -> None:
    """``part(i)`` for ``i < parts`` (default ``threads``) on the calling thread and a shared team of
    ``threads - 1`` Python threads (the kernels release the GIL), each thread claiming the next part
    (:class:`.team.Team`); returns when every part ended, re-raising the first error. Before
    2026-11-28 part 0 ran on the caller and part ``i`` on pool thread ``i``, the caller then waiting for
    every share however late its thread woke (trt_like's resnet_small at 2 threads on the loaded
    2-vCPU Sapphire Rapids VM: no call in which its threads did not wait for a core). The parts
    depend on ``i`` only: same bits."""
    from .team import team

    team(threads).run(part, threads if parts is None else parts)


@numba.njit(**_JIT)
def images_serial(x, sh, sw, pt, pl, xq, cs, as_, bs, is_, Hq, Wq, amask, tag, nl, rstep, taps, wp, bp, cg, Og, nb_oc,
                  out, res, has_res, leaky, slope, lo, hi, O, Ho, Wo, mode, tile, pix_inner, images, tasks):
    """Every image of a bound :class:`DirectRun` (``conv_tasks``' modes) on one thread: its input copy
    (:func:`fill_strided`), then all its tasks, in ONE compiled call: per image they were two calls
    of 17 and 27 arguments (~0.45 us each to unbox, a quarter of a small conv at batch 2)."""
    for n in range(images):
        fill_strided(x, n, sh, sw, pt, pl, xq, 0, cs, as_, bs, is_, Hq, Wq, amask, tag, nl)
        conv_tasks(xq, rstep, cs, taps, wp, bp, cg, Og, nb_oc, out, res, has_res, leaky, slope, lo, hi, O, Ho, Wo, tag,
                   nl, mode, tile, pix_inner, n, 0, tasks)


def compiled_entry(dispatcher, args):
    """:func:`exact_entry` of ``args``, compiling that overload first if it is not (None when numba
    cannot type them)."""
    try:
        sig = tuple(dispatcher.typeof_pyval(a) for a in args)
        if sig not in dispatcher.overloads:
            dispatcher.compile(sig)
        entry = dispatcher.overloads[sig].entry_point
        remember(entry, dispatcher)
        return entry
    except Exception:   # noqa: BLE001 - an argument numba cannot type: the caller keeps its calls
        return None


def exact_entry(dispatcher, args):
    """The compiled code of numba ``dispatcher`` for exactly the types of ``args``, callable without
    numba's dispatch (its type matching costs ~30 ns an argument: ~1 us of a 25-argument kernel
    call); ``dispatcher`` itself while no overload of exactly those types is compiled. Only for
    calls whose arguments keep those types (a bound call's fixed arrays, int64 counters). Finding
    it types ``args`` in Python (~70 us for 25): worth it for a call made many times."""
    try:
        sig = tuple(dispatcher.typeof_pyval(a) for a in args)
        cres = dispatcher.overloads.get(sig)
        if cres is None:
            return dispatcher
        remember(cres.entry_point, dispatcher)
        return cres.entry_point
    except Exception:   # noqa: BLE001 - an argument numba cannot type, another numba: its dispatch it is
        return dispatcher


def serial_kernel(run, kernel, args):
    """What a bound call ``run`` (with an ``_entry`` slot, None when made) calls ``kernel`` through on
    one thread: numba's dispatcher at its first run, :func:`exact_entry` of ``args`` (the full call's)
    from its second (a reused bound call: an engine's arena buffers)."""
    entry = run._entry
    if entry is None:
        run._entry = False
        return kernel
    if entry is False:
        entry = run._entry = exact_entry(kernel, args)
    return entry


class SerialTasks:
    """``run_serial`` and ``serial_calls`` of a bound call whose tasks kernel (:meth:`tasks_kernel`)
    takes ``(*task_args(), n, t0, t1)`` for image ``n`` and needs no input copy (``_entry`` slot as
    :func:`serial_kernel` reads it). A subclass whose :meth:`images_kernel` gives a kernel taking
    ``(*task_args(), n0, n1, t0, t1)`` runs every image in one call: a call's Python and the unboxing
    of its 20-35 arguments cost ~0.5-0.8 us an image, more than a 2x16x5x5 layer's arithmetic."""
    __slots__ = ()

    def tasks_kernel(self):
        raise NotImplementedError

    def images_kernel(self):
        return None

    def task_args(self) -> tuple:
        return self._args

    def run_serial(self):
        """Every image's tasks on the calling thread (:func:`serial_kernel`)."""
        args = self.task_args()
        batch = self.images_kernel()
        if batch is not None:
            serial_kernel(self, batch, (*args, 0, self.images, 0, self.tasks))(*args, 0, self.images, 0, self.tasks)
            return
        kernel = serial_kernel(self, self.tasks_kernel(), (*args, 0, 0, self.tasks))
        for n in range(self.images):
            kernel(*args, n, 0, self.tasks)

    def serial_calls(self):
        """:meth:`run_serial` as plain ``(fn, args)`` calls on the compiled entry point, for a caller
        that makes this call again on the same buffers on one thread; None until the entry is found
        (from the second run)."""
        if not self._entry:
            return None
        args = self.task_args()
        if self.images_kernel() is not None:
            return ((self._entry, (*args, 0, self.images, 0, self.tasks)),)
        return tuple((self._entry, (*args, n, 0, self.tasks)) for n in range(self.images))


def run_bound(run, threads: int):
    """Every image of a bound conv call (:class:`DirectRun`, :class:`DepthwiseRun`): its input copy
    on the caller, then its tasks, split in up to :data:`PARTS_PER_THREAD` ranges a thread when there
    are enough, claimed by the team's threads (:func:`run_split`)."""
    if threads <= 1 and hasattr(run, "run_serial"):
        run.run_serial()
        return
    for n in range(run.images):
        run.fill(n, 0, run.channels)
        if threads <= 1 or run.tasks < 2 * threads:
            run.run_tasks(n, 0, run.tasks)
        else:
            k = min(run.tasks, PARTS_PER_THREAD * threads)
            cuts = [run.tasks * i // k for i in range(k + 1)]
            run_split(lambda i, n=n, c=cuts: run.run_tasks(n, c[i], c[i + 1]), threads, k)


class SimdDirectConv:
    """A conv with fixed weights on the SIMD direct kernel: ``conv(x, out, residual=None)`` writes
    ``clamp(leaky(conv(x) + bias (+ residual)), lo, hi)`` into ``out`` (C-contiguous float32).

    ``weight`` is (O, C/groups, k) or (O, C/groups, kh, kw); ``pads`` per spatial dim, an int or a
    (before, after) pair; ``lo``/``hi`` the fused clamp (``0, inf`` for relu); ``negative_slope``
    a fused leaky relu (``None``: none). ``lanes_`` forces the vector width (tests; default
    :func:`lanes`). ``rows_interleaved``: the layout of the input copy (:attr:`rows_interleaved`;
    same bits either way). ``row_tile``: :attr:`row_tile` (same bits). ``x`` may be any float32 view.
    """

    def __init__(self, weight, bias, stride, pads, dilation, groups=1, lo=-math.inf, hi=math.inf, lanes_=None,
                 negative_slope=None, rows_interleaved=False, oc_lanes=False, row_tile=0):
        w = np.asarray(weight, np.float32)
        self.nd = w.ndim - 2
        if self.nd not in (1, 2):
            raise ShapeError(f"SimdDirectConv: weight must be 3-D or 4-D, got shape {w.shape}")
        two = lambda v: (tuple(v) if isinstance(v, (tuple, list)) else (v,) * self.nd)
        stride, dilation, pads = two(stride), two(dilation), list(two(pads))
        pads = [tuple(p) if isinstance(p, (tuple, list)) else (p, p) for p in pads]
        if self.nd == 1:
            w = w[:, :, None, :]
            stride, dilation, pads = (1, *stride), (1, *dilation), [(0, 0), *pads]
        O, cg, kh, kw = w.shape
        g = int(groups)
        if O % g:
            raise ShapeError(f"SimdDirectConv: groups {g} must divide out channels {O}")
        self.O, self.cg, self.g, self.Og = O, cg, g, O // g
        self.kernel, self.stride, self.dilation, self.pads = (kh, kw), tuple(stride), tuple(dilation), pads
        self.nl = lanes() if lanes_ is None else int(lanes_)
        #: output channels in the vector lanes (:mod:`.direct_oc`), else output pixels
        self.oc_lanes = bool(oc_lanes)
        ob = 2 * self.nl if self.oc_lanes else OC_BLOCK_16 if self.nl == 16 else OC_BLOCK
        self.nb_oc = -(-self.Og // ob)
        wp = np.zeros((g, self.nb_oc * ob, cg, kh, kw), np.float32)
        wp[:, :self.Og] = w.reshape(g, self.Og, cg, kh, kw)
        # (g, blocks, cg, kh, kw, ob): the block's channels of one tap side by side, read in order
        self.wp = aligned(wp.reshape(g, self.nb_oc, ob, cg, kh, kw).transpose(0, 1, 3, 4, 5, 2).reshape(-1))
        bp = np.zeros((g, self.nb_oc * ob), np.float32)
        if bias is not None:
            bp[:, :self.Og] = np.asarray(bias, np.float32).reshape(g, self.Og)
        self.bp = bp.reshape(-1)
        self.lo, self.hi = float(lo), float(hi)
        self.leaky = negative_slope is not None
        self.slope = np.float32(negative_slope if self.leaky else 1.0)   # torch multiplies in float32
        self.tag = _tag(self.nl)
        self._none = np.zeros(1, np.float32)
        #: two output rows a register block when a row fits one vector (False: never; A/B timing)
        self.row_pairs = True
        #: tasks over spans of the output plane at the input's row pitch (:data:`FLAT`) where that
        #: keeps more lanes busy than rows do (:data:`FLAT_GAIN`); channel-plane copy only
        self.flat = True
        #: the phase-split copy row-interleaved, ``[row, channel, phase, col]``: the input rows of
        #: all channels a task reads side by side (False: channel planes, ``[channel, phase, row,
        #: col]``). Faster with many channels on large planes (96 -> 32 at 64x64, 192 -> 64 at
        #: 32x32: 0.8-0.9x), slower with few (16 channels at 128x128: 1.2x): callers time both
        self.rows_interleaved = bool(rows_interleaved)
        #: outputs of a row per task (0: the whole row), rounded up to ``2 * lanes``: the channel blocks
        #: of a long row's piece run one after another while its input is in cache (a 1-D conv is one
        #: row: without it each block streams the whole input copy). Callers time it
        self.row_tile = int(row_tile)
        self._geom: dict = {}
        self._local = threading.local()

    def out_shape(self, shape):
        N, _, *sp = shape
        if self.nd == 1:
            sp = [1, *sp]
        (kh, kw), (sh, sw), (dh, dw) = self.kernel, self.stride, self.dilation
        Ho = (sp[0] + sum(self.pads[0]) - dh * (kh - 1) - 1) // sh + 1
        Wo = (sp[1] + sum(self.pads[1]) - dw * (kw - 1) - 1) // sw + 1
        return (N, self.O, Wo) if self.nd == 1 else (N, self.O, Ho, Wo)

    def _geometry(self, shape):
        """(Ho, Wo, mode, Hq, Wq, taps, tasks, strides, tile) for an input of 4-D ``shape``: computed once
        per shape (the tap table is a Python loop over channels x taps, ~0.1 ms at 64 channels).
        ``strides``: (channel, phase row, phase column, row) steps of the phase-split copy, as
        :attr:`rows_interleaved` lays it out; ``tile`` the outputs of a :data:`ROWS` task."""
        key = (shape, self.row_pairs, self.rows_interleaved, self.flat, self.row_tile)
        g = self._geom.get(key)
        if g is not None:
            return g
        _, C, H, W = shape
        (kh, kw), (sh, sw), (dh, dw) = self.kernel, self.stride, self.dilation
        Ho = (H + sum(self.pads[0]) - dh * (kh - 1) - 1) // sh + 1
        Wo = (W + sum(self.pads[1]) - dw * (kw - 1) - 1) // sw + 1
        nl = self.nl
        ry, rx = (kh - 1) * dh // sh, (kw - 1) * dw // sw   # the farthest tap's row and column in a phase
        Hin, Win = -(-(H + sum(self.pads[0])) // sh), -(-(W + sum(self.pads[1])) // sw)
        mode = PAIRS if self.row_pairs and Wo <= nl and Ho > 1 else ROWS
        Wr = nl if mode == PAIRS else -(-Wo // (2 * nl)) * 2 * nl
        # the share of the vector lanes that compute an output, in blocks of rows and flat
        busy = Ho * Wo / ((Ho + Ho % 2) * nl if mode == PAIRS else Ho * Wr)
        Wf = max(Win, Wo + rx)
        span = PIXELS if self.oc_lanes else 2 * nl
        spans = -(-Ho * Wf // span)
        if self.oc_lanes or (self.flat and not self.rows_interleaved and Ho * Wo / (spans * span) > FLAT_GAIN * busy):
            mode, Wq = OC_LANES if self.oc_lanes else FLAT, Wf
            # (the last span reads up to its last lane's farthest tap: rows below the output's input)
            Hq = max(Hin, Ho + ry, -(-(spans * span + rx) // Wq) + ry)
            tasks = self.g * self.nb_oc * spans
        else:
            # (pairs: an odd last pair reads one row past the last output row's input)
            Hq = max(Hin, Ho + (Ho % 2 if mode == PAIRS else 0) + ry)
            Wq = max(Win, Wr + rx)
            tasks = self.g * self.nb_oc * ((Ho + 1) // 2 if mode == PAIRS else Ho)
        tile = -(-self.row_tile // (2 * nl)) * 2 * nl if mode == ROWS and self.row_tile > 0 else Wo
        tile = max(1, min(tile, Wo))
        if mode == ROWS:
            tasks *= -(-Wo // tile)
        if self.rows_interleaved and mode != OC_LANES:   # [i, c, a, b, j]
            cs, as_, bs, rs = sh * sw * Wq, sw * Wq, Wq, C * sh * sw * Wq
        else:                       # [c, a, b, i, j]
            cs, as_, bs, rs = sh * sw * Hq * Wq, sw * Hq * Wq, Hq * Wq, Wq
        taps = np.array([ci * cs + (ky * dh % sh) * as_ + (kx * dw % sw) * bs + (ky * dh // sh) * rs + kx * dw // sw
                         for ci in range(self.cg) for ky in range(kh) for kx in range(kw)], np.int64)
        g = self._geom[key] = (Ho, Wo, mode, Hq, Wq, taps, tasks, (cs, as_, bs, rs), tile)
        return g

    def _phase_buffer(self, size):
        # one per thread, kept: a fresh np.empty of a large buffer faults its pages in on every call;
        # zeros: the row phases no tap reads are never filled, and a span's unused lanes may read them
        # (finite values: no slow subnormal arithmetic on garbage)
        buf = getattr(self._local, "xq", None)
        if buf is None or buf.size < size:
            buf = self._local.xq = np.zeros(size, np.float32)
        return buf[:size]

    def bind(self, x, out, residual=None) -> DirectRun:
        """This conv on input ``x`` into ``out`` (and ``residual``), as two steps per image that take a
        range each (:class:`DirectRun`): what :meth:`__call__` runs, and what a caller splitting the
        work over its own threads runs part by part. The calling thread's last bound call is reused
        for the same array objects and settings (an engine's arena buffers: binding costs ~2 us, a
        small layer's whole work); it is per thread, as its phase buffer is."""
        key = (self.row_pairs, self.rows_interleaved, self.flat, self.row_tile)
        last = getattr(self._local, "last", None)
        if (last is not None and last[0] is x and last[1] is out and last[2] is residual and last[3] == key
                and last[4] is self.wp and last[5] is self.bp):
            return last[6]
        if (last is not None and last[0] is x and last[2] is residual and last[3] == key and last[4] is self.wp
                and last[5] is self.bp and out.shape == last[1].shape and out.dtype == last[1].dtype
                and out.flags.c_contiguous and out.flags.aligned):
            # the same call into a fresh output array (a layer whose result the engine returns)
            run = last[6].with_out(out)
            self._local.last = (x, out, residual, key, self.wp, self.bp, run)
            return run
        run = DirectRun(self, x, out, residual)
        # (a bound call holds a flat view of ``out``: of a non-contiguous one, a copy, so never reused)
        if x.flags.c_contiguous and out.flags.c_contiguous and (residual is None or residual.flags.c_contiguous):
            self._local.last = (x, out, residual, key, self.wp, self.bp, run)
        return run

    def __call__(self, x, out, residual=None, threads: int = 1):
        run_bound(self.bind(x, out, residual), threads)   # rows split over the threads
        return out


class DirectRun:
    """One call of a :class:`SimdDirectConv`, per image ``n < images`` in two steps: :meth:`fill`
    copies input channels ``[c0, c1)`` (of ``channels``) into the calling thread's phase buffer (a
    channel's copy writes only its own block of it), then :meth:`run_tasks` computes tasks ``[t0, t1)``
    (of ``tasks``: output rows or spans x channel block). Ranges of one step may run on different threads
    at once (the kernels release the GIL); a task's result does not depend on the range it ran in."""
    __slots__ = ("_args", "_conv", "_cstep", "_fill", "_grid", "_kernel", "_owner", "_reach", "_serial", "_serial_calls",
                 "_x", "_xq", "channels", "images", "tasks")

    def __init__(self, conv: SimdDirectConv, x, out, residual):
        x4 = x[:, :, None, :] if conv.nd == 1 else x
        self.images, self.channels = x4.shape[:2]
        sh, sw = conv.stride
        Ho, Wo, mode, Hq, Wq, taps, self.tasks, strides, tile = conv._geometry(x4.shape)
        # a group's weights larger than its input copy: the weights the one to keep in cache
        pix_inner = conv.wp.size // conv.g > conv.cg * sh * sw * Hq * Wq
        self._cstep = cstep = strides[0]
        self._x, self._xq = x4, conv._phase_buffer(self.channels * sh * sw * Hq * Wq)
        self._conv, self._owner = conv, threading.get_ident()
        self._fill = (sh, sw, conv.pads[0][0], conv.pads[1][0])
        amask = 0
        for ky in range(conv.kernel[0]):
            amask |= 1 << (ky * conv.dilation[0] % sh)
        self._grid = (*strides[1:], Hq, Wq, amask, conv.tag, conv.nl)
        res = conv._none if residual is None else residual.reshape(-1)
        self._args = (self._xq, strides[3], cstep, taps, conv.wp, conv.bp, conv.cg, conv.Og, conv.nb_oc,
                      out.reshape(-1), res, residual is not None, conv.leaky, conv.slope, conv.lo, conv.hi, conv.O,
                      Ho, Wo, conv.tag, conv.nl) + (() if mode == OC_LANES else (mode, tile)) + (pix_inner,)
        self._kernel = conv_tasks_oc if mode == OC_LANES else conv_tasks
        self._serial = None
        self._serial_calls = False
        # what :meth:`task_rows` needs: (tasks per unit of rows, mode, units per output row, farthest
        # tap's phase row and column, pitch, lanes); None where a task range is not a band of rows
        # (groups, rows inner, output channels in the lanes)
        nck = -(-Wo // tile) if mode == ROWS else 1
        self._reach = None if (conv.g > 1 or pix_inner or mode == OC_LANES) else (
            conv.nb_oc, mode, nck, (conv.kernel[0] - 1) * conv.dilation[0] // sh,
            (conv.kernel[1] - 1) * conv.dilation[1] // sw, strides[3], conv.nl, Hq)

    def with_out(self, out) -> DirectRun:
        """This call writing into ``out`` (C-contiguous and aligned, of the same shape and dtype as
        its own output: the argument types, and so the compiled entry points, are the same)."""
        run = object.__new__(DirectRun)
        for name in DirectRun.__slots__:
            setattr(run, name, getattr(self, name))
        a = self._args
        run._args = a[:9] + (out.reshape(-1),) + a[10:]
        return run

    def run_serial(self):
        """Every image on the calling thread, its whole input copy then all its tasks; from the second
        call the two kernels through their compiled entry points (:func:`exact_entry`)."""
        fill_args = (*self._fill, self._xq, 0, self._cstep, *self._grid)
        calls = self._serial
        if calls is None:
            fill, kernel = fill_strided, self._kernel
        else:
            fill, kernel = calls
        x, args, tasks = self._x, self._args, self.tasks
        for n in range(self.images):
            fill(x, n, *fill_args)
            kernel(*args, n, 0, tasks)
        if calls is None:
            # typing the arguments costs ~70 us: only for a run called again (a reused bound call:
            # an engine's arena buffers, not a fresh output array), its overloads compiled by now
            if self._serial_calls:
                self._serial = (exact_entry(fill_strided, (x, 0, *fill_args)),
                                exact_entry(self._kernel, (*args, 0, 0, tasks)))
            self._serial_calls = True

    def serial_calls(self):
        """:meth:`run_serial` as plain ``(fn, args)`` calls on the compiled entry points (see
        ``pointwise_blocked._Run.serial_calls``); None until they are found (from the second run)."""
        if self._serial is None:
            return None
        fill, kernel = self._serial
        fill_args = (*self._fill, self._xq, 0, self._cstep, *self._grid)
        if self.images > 1 and self._kernel is conv_tasks and self._x.flags.c_contiguous:
            a = (self._x, *self._fill, self._xq, self._cstep, *self._grid, self._args[1], *self._args[3:9],
                 *self._args[9:19], *self._args[21:], self.images, self.tasks)
            entry = compiled_entry(images_serial, a)
            if entry is not None:
                return ((entry, a),)
        return tuple(c for n in range(self.images)
                     for c in ((fill, (self._x, n, *fill_args)), (kernel, (*self._args, n, 0, self.tasks))))

    def fill(self, n: int, c0: int, c1: int):
        """Input channels ``[c0, c1)`` of image ``n`` into the phase buffer."""
        fill_strided(self._x[:, c0:c1], n, *self._fill, self._xq, c0 * self._cstep, self._cstep, *self._grid)

    @property
    def task_units(self) -> int:
        """Tasks per band of output rows (:meth:`task_rows` cuts at multiples of it); 0: no bands."""
        return 0 if self._reach is None else self._reach[0]

    def task_rows(self, t0: int, t1: int) -> tuple[int, int] | None:
        """The phase rows ``[i0, i1)`` of the input copy that tasks ``[t0, t1)`` (``t0 < t1``) read, of
        every channel: a part that fills just those (:meth:`fill_rows`) runs its tasks without waiting
        for the whole copy. None when a task range is not a band of rows (:attr:`task_units` 0)."""
        if self._reach is None:
            return None
        per, mode, nck, ry, rx, pitch, nl, Hq = self._reach
        s0, s1 = t0 // per, (t1 - 1) // per       # the first and last unit of rows
        if mode == FLAT:   # spans of 2 * nl positions at the row pitch; a tap reaches rx columns on
            i0, i1 = s0 * 2 * nl // pitch, ((s1 + 1) * 2 * nl - 1 + rx) // pitch + 1
        elif mode == PAIRS:
            i0, i1 = 2 * s0, 2 * s1 + 2
        else:
            i0, i1 = s0 // nck, s1 // nck + 1
        return i0, min(Hq, i1 + ry)

    def own_copy(self, n: int):
        """Image ``n``'s whole input copy in a phase buffer of the calling thread (the bound one's on the
        thread that bound the call, else that thread's own buffer of the conv), for :meth:`run_tasks_on`:
        a part whose tasks read every row copies the input itself rather than read the binding thread's
        copy from another core's cache."""
        if threading.get_ident() == self._owner:
            xq = self._xq
        else:
            xq = self._conv._phase_buffer(self._xq.size)
        fill_strided(self._x, n, *self._fill, xq, 0, self._cstep, *self._grid)
        return xq

    def run_tasks_on(self, xq, n: int, t0: int, t1: int):
        """:meth:`run_tasks` reading the input copy ``xq`` (:meth:`own_copy`'s)."""
        self._kernel(xq, *self._args[1:], n, t0, t1)

    def fill_rows(self, n: int, i0: int, i1: int):
        """Phase rows ``[i0, i1)`` of every input channel of image ``n`` into the phase buffer (the same
        values :meth:`fill` writes there; two parts may write a row they share at once: equal values)."""
        sh, sw, pt, pl = self._fill
        a, b, rs, _, Wq, amask, tag, nl = self._grid
        fill_strided(self._x, n, sh, sw, pt - i0 * sh, pl, self._xq, i0 * rs, self._cstep, a, b, rs, i1 - i0, Wq,
                     amask, tag, nl)

    def run_tasks(self, n: int, t0: int, t1: int):
        """Tasks ``[t0, t1)`` of image ``n`` (its input filled)."""
        self._kernel(*self._args, n, t0, t1)
