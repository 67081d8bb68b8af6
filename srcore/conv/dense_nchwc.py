"""Explicit-SIMD float32 dense convolution on the NCHW16c layout (:mod:`.nchwc`), either side blocked
or NCHW: ONNX Runtime's NCHWc conv (MLAS ``MlasNchwcConvolution``), for the dense 3x3 convs of
detection and segmentation backbones between NCHW16c layers.

A vector holds 16 output channels of one pixel. A task is a band of output rows (one on large
planes, up to a whole small plane: :func:`band_rows`) of a group of up to 4 output blocks (64
channels). Per input block of 16 channels, the input rows the band's taps read are copied into a
small padded window (zero columns at the sides, so no tap is checked; kernel rows in the top or
bottom padding are skipped); from a blocked input only the columns of the tiles that reach the
side padding are, the others read the input in place (the copy was 10-16% of a stride-2 layer);
from NCHW 16 columns of the block's 16 channel rows at a time, through a 16x16 register transpose
(element by element, the copy took a quarter of a stride-2 layer). Each row goes by register tiles of ``nb`` output
blocks x ``P`` pixels (4 x 6, 2 x 12 and 1 x 12 in 24 or 12 accumulators; 4 and 1 pixels at a
row's end): per (tap, input channel) ``nb`` weight vectors and ``P`` broadcasts of the window for
``nb * P`` FMAs. The weights of a group for one input block (``nb`` x 16 x kh x kw vectors, 36 KB
at 4 x 3x3) stay in L1 across the band; in a group's first band the tiles prefetch the next
block's into L2 (a slice each), so on small planes, where each block's weights serve one band,
they do not wait on memory. Partial sums over the input blocks wait in a per-thread row
buffer; the last block's go through the epilogue (bias the accumulators' start; residual in the
output's layout, leaky relu, clamp, hardswish / hardsigmoid: :func:`.depthwise.finish`) into the
output: stored whole when blocked, else transposed into the NCHW planes (16x16 register transposes,
:func:`.depthwise_blocked._t16`). A window copy costs a
few per cent of the taps it feeds (3 rows x W x 16 floats against 16 x 9 x nb x Wo FMAs).

The tiles are generated (:func:`_tile_source`): one function per (blocks, pixels), called by
:func:`dense_nchwc_tasks`. numba's on-disk cache keys the kernel on this module's
source: after editing :mod:`.simd`, :func:`.depthwise.finish` or :mod:`.depthwise_blocked`'s transposes, delete this module's
``__pycache__/*.nbi``/``*.nbc``.
"""
from __future__ import annotations

import math
import threading

import numba
import numpy as np
from numba.extending import overload

from ..errors import ShapeError
from ._jit import plain_args
from . import nchwc
from .depthwise import check_args, finish, out_hw
from .direct import _JIT, SerialTasks, _tag, aligned, run_bound
from .depthwise_blocked import _put16, _rows, _t16
from .simd import fptr, prefetch, vadd, vbcast, vfma, vload, vsplat, vstore, vstore_n

#: channels per block (the vector's lanes)
LANES = 16
#: (output blocks, pixels) of the register tiles: the widest of each block count first
TILES = {4: (6, 4, 1), 2: (12, 4, 1), 1: (12, 4, 1)}
#: input channels a tile's inner loop takes per iteration
UNROLL = 2
#: tiles of at most this many accumulators sum the odd input channels apart (:func:`_tile_source`)
SPLIT_MAX = 4
#: the bytes of a task's input window and of its partial sums (4 blocks x its output rows) at most
WINDOW_BYTES, SUMS_BYTES = 12 << 10, 16 << 10
#: the widest tile's pixels at 4 and at 2 or 1 output blocks
TILES_BIG = (TILES[4][0], TILES[2][0])


def _tile_source(nb: int, P: int) -> str:
    """The source of ``_tile_{nb}x{P}``: ``P`` output pixels of a row x ``nb`` output blocks over one
    input block. Pixel ``p``'s tap ``(ky, kx)`` at window element ``x0 + p * xs + ky * wrow + kx * dwv``
    (+ input channel); the weights of tap ``(ky, kx)``, channel ``ic``, block ``j`` at
    ``wg + ((ky * KW + kx) * 16 + ic) * nb * 16 + j * 16``. Accumulators start at the bias (``first``)
    or the row buffer ``sc`` (block ``j``, pixel ``p`` at ``si + j * srs + p * 16``); they end in the
    row buffer, or (``fin``) through the epilogue in the blocked output (``oi + j * obs + p * 16``).
    A tile of at most :data:`SPLIT_MAX` accumulators keeps a second set for the odd input channels,
    added at the end: one set is that many chains of dependent FMAs, fewer than the FMA ports'
    latency hides (a 9-pixel row's 4 + 4 + 1 pixels ran at a quarter of the 12-pixel tile's speed)."""
    acc = [[f"a{j}_{p}" for p in range(P)] for j in range(nb)]
    flat = [a for row in acc for a in row]
    split = nb * P <= SPLIT_MAX
    odd = [[f"c{j}_{p}" for p in range(P)] for j in range(nb)] if split else acc
    L = ["def _tile_%dx%d(pw, px, psc, pb, pout, pres, wg, x0, xs, wrow, dwv, ky0, ky1, KW, si, srs, bi, oi, obs, "
         "first, fin, has_res, leaky, slope, lo, hi, act, c3, c6, z, pfo, pfn):" % (nb, P)]
    L.append("    if first:")
    for j in range(nb):
        L.append(f"        b{j} = vload(pb, bi + {j * LANES}, z)")
    L.append("        " + ", ".join(flat) + " = " + ", ".join(f"b{j}" for j in range(nb) for _ in range(P)))
    L.append("    else:")
    for j in range(nb):
        for p in range(P):
            L.append(f"        {acc[j][p]} = vload(psc, si + {j} * srs + {p * LANES}, z)")
    if split:
        L.append("    " + ", ".join(a for row in odd for a in row) + " = " + ", ".join("z" for _ in flat))
    L.append("    for ky in range(ky0, ky1):")
    L.append("        for kx in range(KW):")
    L.append("            xr = x0 + ky * wrow + kx * dwv")
    L.append(f"            wr = wg + (ky * KW + kx) * {LANES * nb * LANES}")
    L.append("            for q in range(pfn):")
    L.append(f"                prefetch(pw, pfo + ((ky * KW + kx) * pfn + q) * {LANES})")
    L.append(f"            for i2 in range(0, {LANES}, {UNROLL}):")
    for u in range(UNROLL):
        L.append(f"                ic = i2 + {u}")
        for j in range(nb):
            L.append(f"                w{j} = vload(pw, wr + ic * {nb * LANES} + {j * LANES}, z)")
        into = odd if u % 2 else acc
        for p in range(P):
            L.append(f"                v{p} = vbcast(px, xr + {p} * xs + ic, z)")
            for j in range(nb):
                L.append(f"                {into[j][p]} = vfma(v{p}, w{j}, {into[j][p]})")
    if split:
        for j in range(nb):
            for p in range(P):
                L.append(f"    {acc[j][p]} = vadd({acc[j][p]}, {odd[j][p]})")
    L.append("    if fin:")
    for j in range(nb):
        for p in range(P):
            o = f"oi + {j} * obs + {p * LANES}"
            L.append(f"        vstore(pout, {o}, finish({acc[j][p]}, pres, {o}, {LANES}, has_res, leaky, slope, lo, hi, "
                     "act, c3, c6))")
    L.append("    else:")
    for j in range(nb):
        for p in range(P):
            L.append(f"        vstore(psc, si + {j} * srs + {p * LANES}, {acc[j][p]})")
    return "\n".join(L) + "\n"


# (compiled apart and called, not inlined: numba's IR inliner took minutes and gigabytes over nine of them)
_TILE = numba.njit(nogil=True, error_model="numpy", boundscheck=False)
for _nb, _ps in TILES.items():
    for _p in _ps:
        exec(_tile_source(_nb, _p), globals())   # noqa: S102 (generated from the constants above)
        globals()[f"_tile_{_nb}x{_p}"] = _TILE(globals()[f"_tile_{_nb}x{_p}"])


@_TILE
def _row_tile16(nb, P, pw, px, psc, pb, pout, pres, wg, x0, xs, wrow, dwv, ky0, ky1, KW, si, srs, bi, oi, obs, first,
              fin, has_res, leaky, slope, lo, hi, act, c3, c6, z, pfo, pfn):
    """The tile ``(nb, P)`` (one of :data:`TILES`)."""
    if nb == 4:
        if P == 6:
            _tile_4x6(pw, px, psc, pb, pout, pres, wg, x0, xs, wrow, dwv, ky0, ky1, KW, si, srs, bi, oi, obs, first,  # noqa: F821
                      fin, has_res, leaky, slope, lo, hi, act, c3, c6, z, pfo, pfn)
        elif P == 4:
            _tile_4x4(pw, px, psc, pb, pout, pres, wg, x0, xs, wrow, dwv, ky0, ky1, KW, si, srs, bi, oi, obs, first,  # noqa: F821
                      fin, has_res, leaky, slope, lo, hi, act, c3, c6, z, pfo, pfn)
        else:
            _tile_4x1(pw, px, psc, pb, pout, pres, wg, x0, xs, wrow, dwv, ky0, ky1, KW, si, srs, bi, oi, obs, first,  # noqa: F821
                      fin, has_res, leaky, slope, lo, hi, act, c3, c6, z, pfo, pfn)
    elif nb == 2:
        if P == 12:
            _tile_2x12(pw, px, psc, pb, pout, pres, wg, x0, xs, wrow, dwv, ky0, ky1, KW, si, srs, bi, oi, obs, first,  # noqa: F821
                       fin, has_res, leaky, slope, lo, hi, act, c3, c6, z, pfo, pfn)
        elif P == 4:
            _tile_2x4(pw, px, psc, pb, pout, pres, wg, x0, xs, wrow, dwv, ky0, ky1, KW, si, srs, bi, oi, obs, first,  # noqa: F821
                      fin, has_res, leaky, slope, lo, hi, act, c3, c6, z, pfo, pfn)
        else:
            _tile_2x1(pw, px, psc, pb, pout, pres, wg, x0, xs, wrow, dwv, ky0, ky1, KW, si, srs, bi, oi, obs, first,  # noqa: F821
                      fin, has_res, leaky, slope, lo, hi, act, c3, c6, z, pfo, pfn)
    else:
        if P == 12:
            _tile_1x12(pw, px, psc, pb, pout, pres, wg, x0, xs, wrow, dwv, ky0, ky1, KW, si, srs, bi, oi, obs, first,  # noqa: F821
                       fin, has_res, leaky, slope, lo, hi, act, c3, c6, z, pfo, pfn)
        elif P == 4:
            _tile_1x4(pw, px, psc, pb, pout, pres, wg, x0, xs, wrow, dwv, ky0, ky1, KW, si, srs, bi, oi, obs, first,  # noqa: F821
                      fin, has_res, leaky, slope, lo, hi, act, c3, c6, z, pfo, pfn)
        else:
            _tile_1x1(pw, px, psc, pb, pout, pres, wg, x0, xs, wrow, dwv, ky0, ky1, KW, si, srs, bi, oi, obs, first,  # noqa: F821
                      fin, has_res, leaky, slope, lo, hi, act, c3, c6, z, pfo, pfn)


def _row_tile(nb, P, pw, px, psc, pb, pout, pres, wg, x0, xs, wrow, dwv, ky0, ky1, KW, si, srs, bi, oi, obs, first,
              fin, has_res, leaky, slope, lo, hi, act, c3, c6, z, pfo, pfn):
    """The tile ``(nb, P)`` at the width of ``z``: 16 lanes :func:`_row_tile16`, 8 lanes the tiles of
    :mod:`.dense_nchwc_halves` (chosen at compile time: the driver compiles once per width tag)."""
    raise NotImplementedError("compiled code only")


@overload(_row_tile, jit_options={"nogil": True, "error_model": "numpy", "boundscheck": False})
def _row_tile_at_width(nb, P, pw, px, psc, pb, pout, pres, wg, x0, xs, wrow, dwv, ky0, ky1, KW, si, srs, bi, oi, obs,
                       first, fin, has_res, leaky, slope, lo, hi, act, c3, c6, z, pfo, pfn):
    if getattr(z, "lanes", LANES) == LANES:
        tile = _row_tile16
    else:
        from .dense_nchwc_halves import row_tile as tile

    def impl(nb, P, pw, px, psc, pb, pout, pres, wg, x0, xs, wrow, dwv, ky0, ky1, KW, si, srs, bi, oi, obs, first,
             fin, has_res, leaky, slope, lo, hi, act, c3, c6, z, pfo, pfn):
        tile(nb, P, pw, px, psc, pb, pout, pres, wg, x0, xs, wrow, dwv, ky0, ky1, KW, si, srs, bi, oi, obs, first,
             fin, has_res, leaky, slope, lo, hi, act, c3, c6, z, pfo, pfn)
    return impl


#: 16 lanes: the window copies and transposes and the NCHW output's epilogue are 16-lane whatever the tiles' width
_WIDE = np.zeros((1, 1), np.float32)


@plain_args
@numba.njit(**_JIT)
def dense_nchwc_tasks(x, C, H, W, sh, sw, dh, dw, pt, pl, Wp, KH, KW, wq, goff, gb0, gnb, bq, out, res, has_res, leaky,
                      slope, lo, hi, act, O, Ho, Wo, R, tag, bin_, bout, xw, sc, n, t0, t1):
    """Tasks ``t0 <= t < t1`` of image ``n``: output rows ``k * R .. k * R + R`` (``k = t % bands``) of
    block group ``g = t // bands`` (blocks ``gb0[g] .. gb0[g] + gnb[g]``, weights from ``goff[g]``:
    (input blocks, kh, kw, 16, nb, 16)). ``x`` NCHW16c (``bin_``) or NCHW, flat; ``out`` (and ``res``)
    NCHW16c (``bout``) or NCHW, flat. ``xw`` the window (the band's input rows, (rows, Wp, 16), zero
    columns at the sides), ``sc`` the band's row buffer (4 * R * Wo * 16): this thread's."""
    z = vsplat(tag, np.float32(0.0))
    c3, c6 = vsplat(tag, 3.0), vsplat(tag, 6.0)
    zw = vsplat(_WIDE, np.float32(0.0))
    c3w, c6w = vsplat(_WIDE, 3.0), vsplat(_WIDE, 6.0)
    px, pw, pout, pb, pres, psc = fptr(xw), fptr(wq), fptr(out), fptr(bq), fptr(res), fptr(sc)
    pin = fptr(x)
    ncb, nob = -(-C // LANES), -(-O // LANES)
    bands = -(-Ho // R)
    wrow, wrow_in, srs, KK = dh * Wp * LANES, dh * W * LANES, R * Wo * LANES, KH * KW
    # output columns whose every tap lies inside the row
    oxa = min(Wo, -(-pl // sw))
    oxb = max(oxa, min(Wo, (W - 1 + pl - (KW - 1) * dw) // sw + 1))
    for t in range(t0, t1):
        g, oy0 = t // bands, (t % bands) * R
        rows = min(R, Ho - oy0)
        b0, nb = gb0[g], gnb[g]
        iya = oy0 * sh - pt
        # the input rows of the band that lie inside the plane, as window rows iy - iya
        wr0, wr1 = max(0, -iya), min((rows - 1) * sh + (KH - 1) * dh + 1, H - iya)
        big = TILES_BIG[0] if nb == 4 else TILES_BIG[1]
        nbig, rest = Wo // big, Wo % big
        if nb == 4 and nbig > 0 and 2 <= rest <= 3:
            nbig = nbig - 1   # 4 + 4 (+ 1), not 2-3 single pixels
        # a blocked input is read in place by the tiles whose taps all lie inside the row; the window
        # holds only the input columns of the others: [0, cl) (the row's first tiles) and [cr, W)
        lend, rbeg, ox = 0, Wp, 0
        while ox < Wo:
            P = big if ox < nbig * big else (4 if Wo - ox >= 4 else 1)
            if not (bin_ and oxa <= ox and ox + P <= oxb):
                if ox < oxa:
                    lend = max(lend, (ox + P - 1) * sw + (KW - 1) * dw + 1)
                else:
                    rbeg = min(rbeg, ox * sw)
            ox += P
        ntile = nbig + (Wo - nbig * big) // 4 + (Wo - nbig * big) % 4
        cl = min(W, max(0, lend - pl))
        cr = max(cl, min(W, max(0, rbeg - pl)))
        for cb in range(ncb):
            for wr in range(wr0, wr1):
                wi = (wr * Wp + pl) * LANES
                if bin_:
                    xi = ((n * ncb + cb) * H + iya + wr) * W * LANES
                    for e in range(0, cl * LANES, LANES):
                        vstore(px, wi + e, vload(pin, xi + e, zw))
                    for e in range(cr * LANES, W * LANES, LANES):
                        vstore(px, wi + e, vload(pin, xi + e, zw))
                else:
                    # 16 columns of the block's channel rows at a time, transposed in registers (lanes
                    # past C zero, as their weights); a row's last 16 overlap the ones before
                    cn = min(LANES, C - cb * LANES)
                    xi = ((n * C + cb * LANES) * H + iya + wr) * W
                    for c0 in range(0, W, LANES):
                        if W >= LANES:
                            c1 = min(c0, W - LANES)
                            _put16(px, wi + c1 * LANES, _t16(_rows(pin, xi + c1, H * W, cn, LANES, zw)))
                        else:
                            tr = _t16(_rows(pin, xi, H * W, cn, W, zw))
                            for j in range(W):
                                vstore(px, wi + j * LANES, tr[j])
            wg = goff[g] + cb * KK * LANES * nb * LANES
            first, fin = cb == 0, cb == ncb - 1 and bout
            # the weights after this block's (the next block's, or the next group's) into L2 while it
            # runs, a slice of their lines in each tile, in a group's first band (the later bands find
            # them in L2): on small planes a block's 36 KB is read in one band, from memory (512 ->
            # 512 at 7x7 on weights not in cache: 2.17 -> 1.46 ms)
            blk = KK * LANES * nb * LANES
            pfn = -(-nb * LANES // (rows * ntile)) if t == t0 or oy0 == 0 else 0
            pfi = 0
            xin = ((n * ncb + cb) * H + iya) * W * LANES   # (the band's first input row, maybe above the plane)
            for r in range(rows):
                # kernel rows ky0 <= ky < ky1 read inside the plane
                iy0 = (oy0 + r) * sh - pt
                ky0 = min(KH, -(iy0 // dh)) if iy0 < 0 else 0
                ky1 = max(ky0, min(KH, (H - 1 - iy0) // dh + 1))
                ox = 0
                while ox < Wo:
                    P = big if ox < nbig * big else (4 if Wo - ox >= 4 else 1)
                    oi = ((n * nob + b0) * Ho + oy0 + r) * Wo * LANES + ox * LANES
                    pf = pfn if pfi * pfn < nb * LANES else 0
                    if bin_ and oxa <= ox and ox + P <= oxb:   # in place
                        src, x0, step = pin, xin + (r * sh * W + ox * sw - pl) * LANES, wrow_in
                    else:
                        src, x0, step = px, (r * sh * Wp + ox * sw) * LANES, wrow
                    _row_tile(nb, P, pw, src, psc, pb, pout, pres, wg, x0, sw * LANES, step, dw * LANES, ky0, ky1, KW,
                              (r * Wo + ox) * LANES, srs, b0 * LANES, oi, Ho * Wo * LANES, first, fin, has_res, leaky,
                              slope, lo, hi, act, c3, c6, z, wg + blk + pfi * pfn * KK * LANES, pf)
                    pfi += 1
                    ox += P
        if not bout:
            # the band's sums back to the NCHW planes, 16 pixels of 16 channels at a time (the band's
            # rows are whole, so its pixels are contiguous in a plane), the epilogue in the stores
            Q = rows * Wo
            for j in range(nb):
                cn = min(LANES, O - (b0 + j) * LANES)
                for p0 in range(0, Q, LANES):
                    cnt = min(LANES, Q - p0)
                    tr = _t16(_rows(psc, j * srs + p0 * LANES, LANES, cnt, LANES, zw))
                    for c in range(cn):
                        oi = ((n * O + (b0 + j) * LANES + c) * Ho + oy0) * Wo + p0
                        v = finish(tr[c], pres, oi, cnt, has_res, leaky, slope, lo, hi, act, c3w, c6w)
                        if cnt == LANES:
                            vstore(pout, oi, v)
                        else:
                            vstore_n(pout, oi, v, cnt)


@numba.njit(**_JIT)
def dense_nchwc_images(x, C, H, W, sh, sw, dh, dw, pt, pl, Wp, KH, KW, wq, goff, gb0, gnb, bq, out, res, has_res,
                       leaky, slope, lo, hi, act, O, Ho, Wo, R, tag, bin_, bout, xw, sc, n0, n1, t0, t1):
    """:func:`dense_nchwc_tasks` for images ``n0 <= n < n1`` (a batch in one call: :class:`.direct.SerialTasks`)."""
    for n in range(n0, n1):
        dense_nchwc_tasks(x, C, H, W, sh, sw, dh, dw, pt, pl, Wp, KH, KW, wq, goff, gb0, gnb, bq, out, res, has_res,
                          leaky, slope, lo, hi, act, O, Ho, Wo, R, tag, bin_, bout, xw, sc, n, t0, t1)


def band_rows(Ho: int, Wo: int, Wp: int, sh: int, span: int) -> int:
    """Output rows a task takes: as many as keep the window (the rows' input rows, ``span`` rows per
    output row plus ``sh`` more for each next) within :data:`WINDOW_BYTES` and the row buffer within
    :data:`SUMS_BYTES`, the bands as even as they can be. On small planes a group's weights for one
    input block (36 KB at 4 blocks of 3x3) then serve several rows from L1, not one row each from L2."""
    fit = 1 + max(0, (WINDOW_BYTES // (Wp * LANES * 4) - span) // sh)
    fit = max(1, min(Ho, fit, SUMS_BYTES // (4 * Wo * LANES * 4)))
    return -(-Ho // -(-Ho // fit))


def block_groups(nob: int) -> list[tuple[int, int]]:
    """``(first block, blocks)`` of the tasks' block groups: 4 at a time, then 2, then 1."""
    groups, b = [], 0
    for size in (4, 2, 1):
        while nob - b >= size:
            groups.append((b, size))
            b += size
    return groups


class NchwcDenseConv:
    """A dense (ungrouped) conv with fixed weights (O, C, kh, kw) on the NCHW16c kernel:
    ``conv(x, out, residual=None, threads=1)`` writes ``act(clamp(leaky(conv(x) + bias (+ residual)),
    lo, hi))`` into ``out``. ``blocked_in`` / ``blocked_out``: the input / the output (and residual)
    in the NCHW16c layout ((N, ceil(C / 16), H, W, 16)), else NCHW; all C-contiguous float32.
    ``pads`` an int, a pair or ``[(top, bottom), (left, right)]``; ``activation`` None,
    ``"hardswish"`` or ``"hardsigmoid"``; ``negative_slope`` a fused leaky relu."""

    def __init__(self, weight, bias, stride=1, pads=0, dilation=1, lo=-math.inf, hi=math.inf, negative_slope=None,
                 activation=None, blocked_in=True, blocked_out=True):
        w = np.asarray(weight, np.float32)
        if w.ndim != 4:
            raise ShapeError(f"NchwcDenseConv: weight must be (O, C, kh, kw), got shape {w.shape}")
        _, self.stride, self.dilation, self.pads, self.act = check_args(
            "NchwcDenseConv", "O", w[:, :1], stride, pads, dilation, activation)
        self.O, self.C, kh, kw = w.shape
        self.kernel = (kh, kw)
        ncb, self.nob = -(-self.C // LANES), -(-self.O // LANES)
        self.groups = block_groups(self.nob)
        wp = np.zeros((self.nob * LANES, ncb * LANES, kh, kw), np.float32)
        wp[:self.O, :self.C] = w
        parts, offs = [], []
        for b0, nb in self.groups:
            # (input blocks, kh, kw, 16 input channels, nb blocks, 16 output channels)
            g = wp[b0 * LANES:(b0 + nb) * LANES].reshape(nb, LANES, ncb, LANES, kh, kw)
            offs.append(sum(p.size for p in parts))
            parts.append(np.ascontiguousarray(g.transpose(2, 4, 5, 3, 0, 1)).reshape(-1))
        self.wq = np.concatenate(parts)
        self.goff = np.array(offs, np.int64)
        self.gb0 = np.array([b for b, _ in self.groups], np.int64)
        self.gnb = np.array([nb for _, nb in self.groups], np.int64)
        self.bq = np.zeros(self.nob * LANES, np.float32)
        if bias is not None:
            self.bq[:self.O] = np.asarray(bias, np.float32).reshape(self.O)
        self.lo, self.hi = float(lo), float(hi)
        self.leaky = negative_slope is not None
        self.slope = np.float32(negative_slope if self.leaky else 1.0)
        self.blocked_in, self.blocked_out = bool(blocked_in), bool(blocked_out)
        self.tag = _tag(LANES)
        self._none = np.zeros(1, np.float32)
        self._local = threading.local()
        self._bound = nchwc.LastBind()
        #: a bound call's bands of output rows are at least this many where the plane has the rows (a
        #: caller splitting each block group's bands over a team sets its team size: on a small plane
        #: :func:`band_rows` makes one band). The same bits: a pixel's sums do not depend on its band
        self.min_bands = 1

    @property
    def wq(self) -> np.ndarray:
        """The packed weights, at a 64-byte boundary (a whole-vector load then stays in one cache line)."""
        return self._wq

    @wq.setter
    def wq(self, wq):
        self._wq = aligned(np.asarray(wq, np.float32).reshape(-1))

    def out_shape(self, shape):
        """The output shape (in the output's layout) for a logical (N, C, H, W) input ``shape``."""
        Ho, Wo = out_hw(shape, self.kernel, self.stride, self.pads, self.dilation)
        s = (shape[0], self.O, Ho, Wo)
        return nchwc.blocked_shape(s, LANES) if self.blocked_out else s

    def buffers(self, window: int, pixels: int) -> tuple[np.ndarray, np.ndarray]:
        """This thread's zeroed window (``window`` floats) and row buffer (4 blocks of ``pixels``), made
        once per size (only the window's interior is ever written, so its side columns stay zero)."""
        got = getattr(self._local, "bufs", None)
        if got is None or got[0] != (window, pixels):
            got = ((window, pixels), aligned(np.zeros(window, np.float32)),
                   aligned(np.zeros(4 * pixels * LANES, np.float32)))
            self._local.bufs = got
        return got[1:]

    def bind(self, x, out, residual=None) -> _Run:
        return self._bound.get(lambda x, out, residual: _Run(self, x, out, residual), x, out, residual)

    def __call__(self, x, out, residual=None, threads: int = 1):
        run_bound(self.bind(x, out, residual), threads)
        return out


class _Run(SerialTasks):
    """One call (the bound-call protocol of :func:`.direct.run_bound`): tasks are (block group,
    band of output rows) pairs; each range of them runs on its thread's own buffers."""
    __slots__ = ("_args", "_conv", "_entry", "_sizes", "bands", "channels", "images", "rows", "tasks")

    def __init__(self, conv: NchwcDenseConv, x, out, residual):
        if conv.blocked_in:
            N, C, H, W = nchwc.check_blocked("NchwcDenseConv", x, conv.C, LANES)
        elif x.ndim != 4 or x.shape[1] != conv.C or not x.flags.c_contiguous:
            raise ShapeError(f"NchwcDenseConv: input must be a C-contiguous (N, {conv.C}, H, W) array, got {x.shape}")
        else:
            N, C, H, W = x.shape
        if x.dtype != np.float32:
            raise ShapeError(f"NchwcDenseConv: input must be float32, got {x.dtype}")
        want = conv.out_shape((N, C, H, W))
        if tuple(out.shape) != want or not out.flags.c_contiguous or (
                residual is not None and (tuple(residual.shape) != want or not residual.flags.c_contiguous)):
            raise ShapeError(f"NchwcDenseConv: out / residual must be C-contiguous {want}, got {tuple(out.shape)} / "
                             f"{None if residual is None else tuple(residual.shape)}")
        (kh, kw), (sh, sw), (dh, dw) = conv.kernel, conv.stride, conv.dilation
        (pt, _), (pl, pr) = conv.pads
        Ho, Wo = out_hw((N, C, H, W), conv.kernel, conv.stride, conv.pads, conv.dilation)
        Wp = max(W + pl + pr, (Wo - 1) * sw + (kw - 1) * dw + 1)
        R = band_rows(Ho, Wo, Wp, sh, (kh - 1) * dh + 1)
        if conv.min_bands > 1 and -(-Ho // R) < conv.min_bands:
            R = -(-Ho // min(Ho, conv.min_bands))
        #: output rows a task takes, bands of them in a block group
        self.rows, self.bands = R, -(-Ho // R)
        self.images, self.channels, self.tasks = N, 0, len(conv.groups) * -(-Ho // R)
        res = conv._none if residual is None else residual.reshape(-1)
        self._args = (x.reshape(-1), C, H, W, sh, sw, dh, dw, pt, pl, Wp, kh, kw, conv.wq, conv.goff, conv.gb0,
                      conv.gnb, conv.bq, out.reshape(-1), res, residual is not None, conv.leaky, conv.slope, conv.lo,
                      conv.hi, conv.act, conv.O, Ho, Wo, R, conv.tag, conv.blocked_in, conv.blocked_out)
        self._conv, self._sizes = conv, (((R - 1) * sh + (kh - 1) * dh + 1) * Wp * LANES, R * Wo)
        self._entry = None

    @property
    def args(self) -> tuple:
        """:func:`dense_nchwc_tasks`' arguments before ``(xw, sc, n, t0, t1)``: for a caller that runs
        the task ranges its own way (an OpenMP region), each range with its own window and row
        buffer, shaped as :meth:`NchwcDenseConv.buffers` makes them for :attr:`buffer_sizes` (task
        ``t`` is band ``t % bands`` of block group ``t // bands``)."""
        return self._args

    @property
    def buffer_sizes(self) -> tuple[int, int]:
        return self._sizes

    def fill(self, n: int, c0: int, c1: int):
        """Nothing: each task copies the input rows it reads."""

    def run_tasks(self, n: int, t0: int, t1: int):
        dense_nchwc_tasks(*self._args, *self._conv.buffers(*self._sizes), n, t0, t1)

    def tasks_kernel(self):
        return dense_nchwc_tasks

    def images_kernel(self):
        return dense_nchwc_images

    def task_args(self) -> tuple:
        return (*self._args, *self._conv.buffers(*self._sizes))
