"""NCHW16c kernels on 8-lane vectors: the 16-lane kernels' own loops run twice per 16-channel block,
once on each half of every vector (their arrays offset by 8 floats), with 8-lane vectors.

:mod:`.dense_blocked`'s register block is 12 pixels x 16 channels and :mod:`.depthwise_blocked`'s 8
pixels x 16 channels; where the CPU has no AVX-512, LLVM splits each 16-lane vector in two and the
24 or 16 ``ymm`` accumulators, with the weights and the loads, pass AVX2's 16 registers and spill.
On one half at a time they are 12 or 8. Every lane's arithmetic is the same (the same bits); only
the order of the halves changes. Candidates beside the 16-lane kernels, chosen by timing.

The depthwise kernel runs on halves only with both sides NCHW16c: its NCHW sides go through 16x16
transposes of whole vectors.
"""
from __future__ import annotations

import numba

from ..errors import ShapeError
from .dense_blocked import BlockedDenseConv, _Run as _DenseRun, dense_tasks
from .depthwise_blocked import BlockedDepthwiseConv, BlockedRun, dwb_range
from .direct import _JIT, _tag

#: floats of a half vector
HALF = 8


@numba.njit(**_JIT)
def dense_halves_tasks(x, C, H, W, sh, sw, dh, dw, pt, pl, KH, KW, wq, bq, nob, out, Ho, Wo, lo, hi, act, tag, n, b0,
                       b1):
    """:func:`.dense_blocked.dense_tasks` (``tag``: 8 lanes) on each half of output blocks ``b0 <= b < b1``."""
    for b in range(b0, b1):
        for h in range(0, 2 * HALF, HALF):
            dense_tasks(x, C, H, W, sh, sw, dh, dw, pt, pl, KH, KW, wq[h:], bq[h:], nob, out[h:], Ho, Wo, lo, hi, act,
                        tag, n, b, b + 1)


@numba.njit(**_JIT)
def dense_halves_images(x, C, H, W, sh, sw, dh, dw, pt, pl, KH, KW, wq, bq, nob, out, Ho, Wo, lo, hi, act, tag, n0,
                        n1, b0, b1):
    """:func:`dense_halves_tasks` for images ``n0 <= n < n1``."""
    for n in range(n0, n1):
        dense_halves_tasks(x, C, H, W, sh, sw, dh, dw, pt, pl, KH, KW, wq, bq, nob, out, Ho, Wo, lo, hi, act, tag, n,
                           b0, b1)


class HalvesDenseConv(BlockedDenseConv):
    """:class:`.dense_blocked.BlockedDenseConv` (same arguments and bits) on 8-lane vectors by halves."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.tag = _tag(HALF)

    def bind(self, x, out, residual=None):
        if residual is not None:
            raise ShapeError("HalvesDenseConv: takes no residual")
        return self._bound.get(lambda x, out, _: _DenseHalvesRun(self, x, out), x, out, None)


class _DenseHalvesRun(_DenseRun):
    __slots__ = ()

    def tasks_kernel(self):
        return dense_halves_tasks

    def images_kernel(self):
        return dense_halves_images

    def run_tasks(self, n: int, t0: int, t1: int):
        dense_halves_tasks(*self._args, n, t0, t1)


@numba.njit(**_JIT)
def dwh_tasks(x, C, H, W, sh, sw, dh, dw, pt, pl, Hp, Wp, KH, KW, wc, bc, out, res, has_res, leaky, slope, lo, hi,
              act, Ho, Wo, tag, xblk, oblk, xb, tb, n, k0, k1):
    """:func:`.depthwise_blocked.dwb_range` (``tag``: 8 lanes; NCHW16c on both sides) on each half of
    channel blocks ``k0 <= k < k1`` of image ``n``, every output row; ``xb``, ``tb`` its buffers."""
    for k in range(k0, k1):
        for h in range(0, 2 * HALF, HALF):
            rh = res[h:] if has_res else res
            dwb_range(x[h:], C, H, W, sh, sw, dh, dw, pt, pl, Hp, Wp, KH, KW, wc[h:], bc[h:], out[h:], rh, has_res, leaky, slope, lo, hi, act, Ho, Wo, tag, xblk, oblk,
                      xb[h:], tb[h:], n, k, k + 1, 0, Ho)


@numba.njit(**_JIT)
def dwh_range(x, C, H, W, sh, sw, dh, dw, pt, pl, Hp, Wp, KH, KW, wc, bc, out, res, has_res, leaky, slope, lo, hi,
              act, Ho, Wo, tag, xblk, oblk, xb, tb, n, k0, k1, h0, h1):
    """:func:`dwh_tasks` on output rows ``h0 <= ho < h1`` only (a band of a split by rows: the same
    arguments and bits as :func:`.depthwise_blocked.dwb_range`)."""
    for k in range(k0, k1):
        for h in range(0, 2 * HALF, HALF):
            rh = res[h:] if has_res else res
            dwb_range(x[h:], C, H, W, sh, sw, dh, dw, pt, pl, Hp, Wp, KH, KW, wc[h:], bc[h:], out[h:], rh, has_res, leaky,
                      slope, lo, hi, act, Ho, Wo, tag, xblk, oblk, xb[h:], tb[h:], n, k, k + 1, h0, h1)


@numba.njit(**_JIT)
def dwh_images(x, C, H, W, sh, sw, dh, dw, pt, pl, Hp, Wp, KH, KW, wc, bc, out, res, has_res, leaky, slope, lo, hi,
               act, Ho, Wo, tag, xblk, oblk, xb, tb, n0, n1, k0, k1):
    """:func:`dwh_tasks` for images ``n0 <= n < n1``."""
    for n in range(n0, n1):
        dwh_tasks(x, C, H, W, sh, sw, dh, dw, pt, pl, Hp, Wp, KH, KW, wc, bc, out, res, has_res, leaky, slope, lo, hi,
                  act, Ho, Wo, tag, xblk, oblk, xb, tb, n, k0, k1)


class HalvesDepthwiseConv(BlockedDepthwiseConv):
    """:class:`.depthwise_blocked.BlockedDepthwiseConv` with both sides NCHW16c (same arguments and
    bits) on 8-lane vectors by halves."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if not (self.blocked_in and self.blocked_out):
            raise ShapeError("HalvesDepthwiseConv: needs both sides NCHW16c (blocked_in and blocked_out), got "
                             f"{self.blocked_in}, {self.blocked_out}")
        self.tag = _tag(HALF)

    def _bind(self, x, out, residual):
        return _DepthwiseHalvesRun(self, x, out, residual)


class _DepthwiseHalvesRun(BlockedRun):
    __slots__ = ()

    def tasks_kernel(self):
        return dwh_tasks

    def images_kernel(self):
        return dwh_images

    def run_tasks(self, n: int, t0: int, t1: int):
        dwh_tasks(*self._args, *self._conv.buffers(*self._sizes), n, t0, t1)
