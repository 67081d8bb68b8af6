"""The NCHW16c tactics split over numba's OpenMP team by output channel blocks
(:mod:`..kernels.blocked_split`): ``pointwise_nchw16c_omp``, ``depthwise_nchw16c_omp`` and
``conv_nchw16c_omp`` (the dense conv: ranges of its (block group, band) tasks), ``dense_nchw16c_omp``
(a stem's conv from few NCHW channels), or by bands of rows:
``pointwise_nchw16c_rows_omp``, ``depthwise_nchw16c_rows_omp`` and ``conv_nchw16c_rows_omp``, offered
beside their one-thread tactics at more than one intra-op thread whatever the layer's size (a
mobile net's layers are all under :data:`..kernels.threads.PARALLEL_MIN_WORK`); the builder times
both and keeps the faster, never the split by rule. Each region runs under a
:class:`..kernels.threads.Governor` (a taken core puts the layer back on the calling thread at run
time) and gives the one-thread kernel's bits.

The dense conv's twins are not behind an engine option (the 1x1 and depthwise ones are: they lost in
mobilenet_v3's sequence on a loaded machine): where the layer is large enough to split at all, its
one-thread tactic splits on ``srcore.conv``'s Python team, whose worker sleeps between layers and
is woken by a futex and the GIL, where libgomp's workers spin between an engine call's regions."""
from __future__ import annotations

import threading

import numpy as np

from ..kernels import threads as _threads
from .nchwc import (LANES, ConvNchwcHalvesTactic, ConvNchwcTactic, DenseNchwcHalvesTactic, DenseNchwcTactic,
                    DepthwiseNchwcHalvesTactic, DepthwiseNchwcTactic, PointwiseNchwcHalvesTactic, PointwiseNchwcTactic)
from .spec import ConvSpec


class _Addressed:
    """The address of a driver's kernel (``blocked_split.addresses``; with ``halves``, its 8-lane
    kernel, ``blocked_split.HALVES``) for the last bound call a tactic ran: found once per binding (an
    engine's calls bind the same arrays every time), not per call."""
    __slots__ = ("_last", "_halves")

    def __init__(self, halves: bool = False):
        self._last = None
        self._halves = halves

    def fn(self, driver, run, *tail) -> int:
        last = self._last   # (read and replaced whole: calls on several threads stay correct)
        if last is None or last[0] is not run or last[1] is not driver:
            from ..kernels.blocked_split import HALVES, addresses

            kernel = HALVES[driver] if self._halves else None
            last = self._last = (run, driver, addresses(driver, run.args, tail, kernel))
        return last[2]


class PointwiseNchwcOmpTactic(PointwiseNchwcTactic):
    """:class:`.PointwiseNchwcTactic` with each image's output blocks in ``threads`` parts."""
    name = "pointwise_nchw16c_omp"
    halves = False

    def __init__(self, spec: ConvSpec, weight, bias, blocked: tuple[bool, bool], layout=None, threads: int = 2):
        super().__init__(spec, weight, bias, blocked, layout, threads=1)
        self.nt = threads
        self.governor = _threads.Governor(threads)
        self._fn = _Addressed(self.halves)
        self.scr = np.zeros((threads, 2 * LANES * LANES), np.float32)

    def serial_calls(self, x, out, residual):
        return None   # (never the one-thread kernel's calls in its place)

    def _run(self, x, out, residual):
        from ..kernels.blocked_split import pointwise

        run = self.conv.bind(x, out, residual)
        fn = self._fn.fn(pointwise, run, self.scr[0], 0, 0, 0)
        for n in range(run.images):
            self.governor.run(pointwise, fn, run.args, self.scr, n, self.nt)


class DepthwiseNchwcOmpTactic(DepthwiseNchwcTactic):
    """:class:`.DepthwiseNchwcTactic` with each image's channel blocks in ``threads`` parts."""
    name = "depthwise_nchw16c_omp"
    halves = False

    def __init__(self, spec: ConvSpec, weight, bias, blocked: tuple[bool, bool], layout=None, threads: int = 2):
        super().__init__(spec, weight, bias, blocked, layout, threads=1)
        self.nt = threads
        self.governor = _threads.Governor(threads)
        self._fn = _Addressed(self.halves)
        self._bufs: tuple = (None, None, None)

    def serial_calls(self, x, out, residual):
        return None   # (never the one-thread kernel's calls in its place)

    def _run(self, x, out, residual):
        from ..kernels.blocked_split import depthwise

        run = self.conv.bind(x, out, residual)
        sizes = run.buffer_sizes
        if self._bufs[0] != sizes:
            xb, tb = self.conv.buffers(*sizes)    # this thread's: their sizes, one row per part
            self._bufs = (sizes, np.zeros((self.nt, xb.size), np.float32), np.zeros((self.nt, tb.size), np.float32))
        _, xb, tb = self._bufs
        fn = self._fn.fn(depthwise, run, xb[0], tb[0], 0, 0, 0)
        for n in range(run.images):
            self.governor.run(depthwise, fn, run.args, xb, tb, n, self.nt)


class PointwiseNchwcRowsTactic(PointwiseNchwcOmpTactic):
    """:class:`.PointwiseNchwcTactic` with each image in ``threads`` bands of rows, every output block
    in each: a thread reads only its band of the input, written by the same thread where the layer
    before was split by rows too (the band stays on its core), unlike the split by output blocks,
    whose threads each read the whole input."""
    name = "pointwise_nchw16c_rows_omp"

    def _run(self, x, out, residual):
        from ..kernels.blocked_split import pointwise_rows

        run = self.conv.bind(x, out, residual)
        W = self.spec.x_shape[3]
        fn = self._fn.fn(pointwise_rows, run, self.scr[0], 0, 0, 0, 0, 0)
        for n in range(run.images):
            self.governor.run(pointwise_rows, fn, run.args, self.scr, n, self.nt, W)


class DepthwiseNchwcRowsTactic(DepthwiseNchwcOmpTactic):
    """:class:`.DepthwiseNchwcTactic` (NCHW16c input) with each image in ``threads`` bands of output
    rows, every channel block in each: a thread reads its band's input rows and the taps' halo."""
    name = "depthwise_nchw16c_rows_omp"

    def _run(self, x, out, residual):
        from ..kernels.blocked_split import depthwise_rows

        run = self.conv.bind(x, out, residual)
        sizes = run.buffer_sizes
        if self._bufs[0] != sizes:
            xb, tb = self.conv.buffers(*sizes)
            self._bufs = (sizes, np.zeros((self.nt, xb.size), np.float32), np.zeros((self.nt, tb.size), np.float32))
        _, xb, tb = self._bufs
        fn = self._fn.fn(depthwise_rows, run, xb[0], tb[0], 0, 0, 0, 0, 0)
        for n in range(run.images):
            self.governor.run(depthwise_rows, fn, run.args, xb, tb, n, self.nt)


class ConvNchwcOmpTactic(ConvNchwcTactic):
    """:class:`.ConvNchwcTactic` with each image's (block group, band) tasks in ``threads`` ranges, block
    group major: whole groups of output blocks per thread where there are enough of them."""
    name = "conv_nchw16c_omp"
    halves = False

    def __init__(self, spec: ConvSpec, weight, bias, blocked: tuple[bool, bool], layout=None, threads: int = 2):
        super().__init__(spec, weight, bias, blocked, layout, threads=1)
        self.nt = threads
        self.governor = _threads.Governor(threads)
        self._fn = _Addressed(self.halves)
        self._local = threading.local()

    def serial_calls(self, x, out, residual):
        return None   # (never the one-thread kernel's calls in its place)

    def _buffers(self, run):
        """Each part's window and row buffer (rows of two arrays, 64-byte aligned: their sizes are
        multiples of 16 floats), made once per size and calling thread (a RuntimePool's calls run at
        once), zeroed (the window's side columns stay zero)."""
        sizes = run.buffer_sizes
        bufs = getattr(self._local, "bufs", None)
        if bufs is None or bufs[0] != sizes:
            from srcore.plugin import simd_conv

            window, pixels = sizes
            zeros = lambda size: simd_conv.aligned(np.zeros(self.nt * size, np.float32)).reshape(self.nt, size)
            bufs = self._local.bufs = (sizes, zeros(window), zeros(4 * pixels * LANES))
        return bufs[1:]

    def _run(self, x, out, residual):
        from ..kernels.blocked_split import dense

        run = self.conv.bind(x, out, residual)
        xw, sc = self._buffers(run)
        fn = self._fn.fn(dense, run, xw[0], sc[0], 0, 0, 0)
        for n in range(run.images):
            self.governor.run(dense, fn, run.args, xw, sc, n, self.nt, run.tasks)


class ConvNchwcRowsTactic(ConvNchwcOmpTactic):
    """:class:`.ConvNchwcTactic` with each image's bands of output rows in ``threads`` ranges, every
    block group in each: a thread reads only its rows of the input (and the taps' halo). The conv
    makes at least ``threads`` bands (a small plane's one band cut in rows; the same bits)."""
    name = "conv_nchw16c_rows_omp"

    def __init__(self, spec: ConvSpec, weight, bias, blocked: tuple[bool, bool], layout=None, threads: int = 2):
        super().__init__(spec, weight, bias, blocked, layout, threads)
        self.conv.min_bands = threads

    def _run(self, x, out, residual):
        from ..kernels.blocked_split import dense_rows

        run = self.conv.bind(x, out, residual)
        xw, sc = self._buffers(run)
        groups = len(self.conv.groups)
        fn = self._fn.fn(dense_rows, run, xw[0], sc[0], 0, 0, 0)
        for n in range(run.images):
            self.governor.run(dense_rows, fn, run.args, xw, sc, n, self.nt, run.bands, groups)


class DenseNchwcOmpTactic(DenseNchwcTactic):
    """:class:`.DenseNchwcTactic` (a stem: NCHW in on few channels, NCHW16c out) with each image's output
    blocks in ``threads`` ranges."""
    name = "dense_nchw16c_omp"
    halves = False

    def __init__(self, spec: ConvSpec, weight, bias, blocked: tuple[bool, bool], layout=None, threads: int = 2):
        super().__init__(spec, weight, bias, blocked, layout, threads=1)
        self.nt = threads
        self.governor = _threads.Governor(threads)
        self._fn = _Addressed(self.halves)

    def serial_calls(self, x, out, residual):
        return None   # (never the one-thread kernel's calls in its place)

    def _run(self, x, out, residual):
        from ..kernels.blocked_split import dense_few

        run = self.conv.bind(x, out, None)
        fn = self._fn.fn(dense_few, run, 0, 0, 0)
        for n in range(run.images):
            self.governor.run(dense_few, fn, run.args, n, self.nt, run.tasks)


# The 8-lane (``_h8``) tactics' twins: the same drivers, parts and buffers, each part running the 8-lane
# kernel (``blocked_split.HALVES``), so the bits of the one-thread ``_h8`` tactic (which are the 16-lane
# one's). Without them a build at 2+ threads on an AVX2 CPU chose between a one-thread 8-lane kernel and
# a split 16-lane one whose register blocks spill.


class PointwiseNchwcHalvesOmpTactic(PointwiseNchwcOmpTactic):
    name = "pointwise_nchw16c_h8_omp"
    halves = True
    _kernel_class = staticmethod(PointwiseNchwcHalvesTactic._kernel_class)


class PointwiseNchwcHalvesRowsTactic(PointwiseNchwcRowsTactic):
    name = "pointwise_nchw16c_h8_rows_omp"
    halves = True
    _kernel_class = staticmethod(PointwiseNchwcHalvesTactic._kernel_class)


class DepthwiseNchwcHalvesOmpTactic(DepthwiseNchwcOmpTactic):
    """Both sides NCHW16c, as :class:`.DepthwiseNchwcHalvesTactic`."""
    name = "depthwise_nchw16c_h8_omp"
    halves = True
    _kernel_class = staticmethod(DepthwiseNchwcHalvesTactic._kernel_class)


class DepthwiseNchwcHalvesRowsTactic(DepthwiseNchwcRowsTactic):
    name = "depthwise_nchw16c_h8_rows_omp"
    halves = True
    _kernel_class = staticmethod(DepthwiseNchwcHalvesTactic._kernel_class)


class ConvNchwcHalvesOmpTactic(ConvNchwcOmpTactic):
    name = "conv_nchw16c_h8_omp"
    halves = True
    _kernel_class = staticmethod(ConvNchwcHalvesTactic._kernel_class)


class ConvNchwcHalvesRowsTactic(ConvNchwcRowsTactic):
    name = "conv_nchw16c_h8_rows_omp"
    halves = True
    _kernel_class = staticmethod(ConvNchwcHalvesTactic._kernel_class)


class DenseNchwcHalvesOmpTactic(DenseNchwcOmpTactic):
    name = "dense_nchw16c_h8_omp"
    halves = True
    _kernel_class = staticmethod(DenseNchwcHalvesTactic._kernel_class)


def nchwc_omp_builders(spec: ConvSpec, weight, bias, blocked: tuple[bool, bool]):
    """``(name, build)`` of the split twins of an NCHW16c layer's tactic at more than one intra-op
    thread: by output channel blocks (more than one to split; a dense conv: more than one block
    group) and by rows (more than one output row; a depthwise one with an NCHW16c input), else none."""
    threads = _threads.count()
    if threads <= 1:
        return []
    nob = -(-spec.out_channels // LANES)
    blocks, rows = nob >= 2, spec.out_shape[2] >= 2
    kinds = []
    if spec.groups == 1 and (spec.kernel, spec.stride, spec.padding) != ((1, 1), (1, 1), (0, 0)):
        from srcore.plugin import simd_dense_nchwc

        groups = len(simd_dense_nchwc.block_groups(nob)) >= 2
        stem = blocks and tuple(blocked) == (False, True) and not spec.residual
        kinds = [(ConvNchwcOmpTactic, groups), (ConvNchwcRowsTactic, rows), (DenseNchwcOmpTactic, stem),
                 (ConvNchwcHalvesOmpTactic, groups), (ConvNchwcHalvesRowsTactic, rows),
                 (DenseNchwcHalvesOmpTactic, stem)]
    elif spec.groups == 1:
        kinds = [(PointwiseNchwcOmpTactic, blocks), (PointwiseNchwcRowsTactic, rows),
                 (PointwiseNchwcHalvesOmpTactic, blocks), (PointwiseNchwcHalvesRowsTactic, rows)]
    elif spec.groups > 1 and spec.groups == spec.x_shape[1] == spec.out_channels:
        both = tuple(blocked) == (True, True)   # (the 8-lane depthwise kernel's layouts)
        kinds = [(DepthwiseNchwcOmpTactic, blocks), (DepthwiseNchwcRowsTactic, rows and blocked[0]),
                 (DepthwiseNchwcHalvesOmpTactic, blocks and both), (DepthwiseNchwcHalvesRowsTactic, rows and both)]
    return [(cls.name, lambda layout=None, cls=cls: cls(spec, weight, bias, blocked, layout, threads))
            for cls, ok in kinds if ok]
