"""The SGEMM-tile conv tactics split over numba's OpenMP team (``kernels/range_split.py``):
``pointwise_sgemm_omp`` (a 1x1 conv writing NCHW: each image's pixel panels in ``threads`` ranges, each
part copying only its pixels of the input) and ``dense_tile_nchw16c_omp`` (a stem: each image's output
rows in ``threads`` ranges, each part padding only the input rows it reads). Offered beside their
one-thread tactics at more than one intra-op thread whatever the layer's size, timed, never chosen by
rule; each region under a :class:`..kernels.threads.Governor` (a taken core puts the layer back on
the calling thread at run time). A unit's arithmetic is the one-thread kernel's: the same bits."""
from __future__ import annotations

import threading

import numpy as np

from ..kernels import threads as _threads
from .dense_tile import DenseTileTactic
from .pointwise_sgemm import LANES, PointwiseSgemmTactic


class _Split:
    """Each part's buffer row (per calling thread: a ``RuntimePool``'s calls run at once), the governor,
    and the range kernel's address (found on the first call: it depends on the arguments' types only)."""

    def _setup(self, threads: int, buf_size: int):
        self.nt = threads
        self.governor = _threads.Governor(threads)
        self._size = max(buf_size, 1)
        self._local = threading.local()
        self._last = None

    @property
    def bufs(self) -> np.ndarray:
        bufs = getattr(self._local, "bufs", None)
        if bufs is None:
            bufs = self._local.bufs = np.zeros((self.nt, self._size), np.float32)
        return bufs

    def serial_calls(self, x, out, residual):
        return None   # (never the one-thread kernel's calls in its place)

    def _fn(self, kernel, head, tail) -> int:
        if self._last is None:
            from ..kernels.range_split import address

            self._last = address(kernel, head, self.bufs[0], tail)
        return self._last


class PointwiseSgemmOmpTactic(_Split, PointwiseSgemmTactic):
    """:class:`.PointwiseSgemmTactic` with each image's pixel panels in ``threads`` ranges."""
    name = "pointwise_sgemm_omp"

    def __init__(self, spec, weight, bias, blocked_in: bool, layout=None, threads: int = 2):
        super().__init__(spec, weight, bias, blocked_in, layout)
        O, HW, C, ld = self._dims
        self._setup(threads, C * ld)

    def _run(self, x, out, residual):
        from ..kernels import sgemm
        from ..kernels.range_split import ranges

        O, HW, C, ld = self._dims
        panels = -(-HW // (2 * LANES))
        bufs = self.bufs
        for n in range(x.shape[0]):
            head = (self.wa, x[n].reshape(-1))
            t = (out[n].reshape(-1), O, HW, C, self.blocked_in, LANES, self.tag, self.bias, self.lo, self.hi)
            fn = self._fn(sgemm.conv1x1_range, head, t)
            self.governor.run(ranges, fn, head, bufs, t, panels, self.nt)


class DenseTileOmpTactic(_Split, DenseTileTactic):
    """:class:`.DenseTileTactic` with each image's output rows in ``threads`` ranges."""
    name = "dense_tile_nchw16c_omp"

    def __init__(self, spec, weight, bias, layout=None, threads: int = 2):
        super().__init__(spec, weight, bias, layout)
        C, H, W, pt, pl, Hp, Wp, sh, sw, Ho, Wo, OB = self._geom
        self._setup(threads, C * Hp * Wp)
        self.span = (spec.weight_shape[2] - 1) * spec.dilation[0] + 1

    def _run(self, x, out, residual):
        from ..kernels import dense_tile
        from ..kernels.range_split import ranges

        C, H, W, pt, pl, Hp, Wp, sh, sw, Ho, Wo, OB = self._geom
        bufs = self.bufs
        for n in range(x.shape[0]):
            head = (x[n].reshape(-1),)
            t = (self.wq, self.taps, out[n].reshape(-1), C, H, W, pt, pl, Hp, Wp, sh, sw, Ho, Wo, OB, self.bq,
                 self.lo, self.hi, self.slope, self.leaky, LANES, self.tag, self.span)
            fn = self._fn(dense_tile.dense_range, head, t)
            self.governor.run(ranges, fn, head, bufs, t, Ho, self.nt)


def tile_omp_builders(spec, weight, bias, blocked: tuple[bool, bool]):
    """``(name, build)`` of the split twins of the SGEMM-tile tactics a layer is offered, at more than one
    intra-op thread (at least two units to split), else none."""
    threads = _threads.count()
    if threads <= 1 or len(spec.x_shape) != 4:
        return []
    if spec.groups == 1 and (spec.kernel, spec.stride, spec.padding) != ((1, 1), (1, 1), (0, 0)):
        if tuple(blocked) == (False, True) and not spec.residual and spec.out_shape[2] >= 2:
            return [(DenseTileOmpTactic.name,
                     lambda layout=None: DenseTileOmpTactic(spec, weight, bias, layout, threads))]
        return []
    if spec.groups == 1 and not blocked[1] and not spec.residual \
            and spec.out_shape[2] * spec.out_shape[3] > 2 * LANES:
        return [(PointwiseSgemmOmpTactic.name,
                 lambda layout=None: PointwiseSgemmOmpTactic(spec, weight, bias, blocked[0], layout, threads))]
    return []
