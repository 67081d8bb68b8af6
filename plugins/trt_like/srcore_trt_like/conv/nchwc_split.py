"""The NCHW16c 1x1 and depthwise tactics split over numba's OpenMP team by output channel blocks
(:mod:`..kernels.blocked_split`): ``pointwise_nchw16c_omp`` and ``depthwise_nchw16c_omp``, offered
beside their one-thread tactics at more than one intra-op thread whatever the layer's size (a
mobile net's layers are all under :data:`..kernels.threads.PARALLEL_MIN_WORK`); the builder times
both and keeps the faster, never the split by rule. Each region runs under a
:class:`..kernels.threads.Governor` (a taken core puts the layer back on the calling thread at run
time) and gives the one-thread kernel's bits."""
from __future__ import annotations

import numpy as np

from ..kernels import threads as _threads
from .nchwc import LANES, DepthwiseNchwcTactic, PointwiseNchwcTactic
from .spec import ConvSpec


class PointwiseNchwcOmpTactic(PointwiseNchwcTactic):
    """:class:`.PointwiseNchwcTactic` with each image's output blocks in ``threads`` parts."""
    name = "pointwise_nchw16c_omp"

    def __init__(self, spec: ConvSpec, weight, bias, blocked: tuple[bool, bool], layout=None, threads: int = 2):
        super().__init__(spec, weight, bias, blocked, layout, threads=1)
        self.nt = threads
        self.governor = _threads.Governor(threads)
        self.scr = np.zeros((threads, 2 * LANES * LANES), np.float32)

    def _run(self, x, out, residual):
        from ..kernels.blocked_split import pointwise

        run = self.conv.bind(x, out, residual)
        for n in range(run.images):
            self.governor.run(pointwise, run.args, self.scr, n, self.nt)


class DepthwiseNchwcOmpTactic(DepthwiseNchwcTactic):
    """:class:`.DepthwiseNchwcTactic` with each image's channel blocks in ``threads`` parts."""
    name = "depthwise_nchw16c_omp"

    def __init__(self, spec: ConvSpec, weight, bias, blocked: tuple[bool, bool], layout=None, threads: int = 2):
        super().__init__(spec, weight, bias, blocked, layout, threads=1)
        self.nt = threads
        self.governor = _threads.Governor(threads)
        self._bufs: tuple = (None, None, None)

    def _run(self, x, out, residual):
        from ..kernels.blocked_split import depthwise

        run = self.conv.bind(x, out, residual)
        sizes = run.buffer_sizes
        if self._bufs[0] != sizes:
            xb, tb = self.conv.buffers(*sizes)    # this thread's: their sizes, one row per part
            self._bufs = (sizes, np.zeros((self.nt, xb.size), np.float32), np.zeros((self.nt, tb.size), np.float32))
        _, xb, tb = self._bufs
        for n in range(run.images):
            self.governor.run(depthwise, run.args, xb, tb, n, self.nt)


def nchwc_omp_builders(spec: ConvSpec, weight, bias, blocked: tuple[bool, bool]):
    """``(name, build)`` of the split twin of a 1x1 or depthwise NCHW16c layer's tactic, at more than
    one intra-op thread and more than one channel block to split (else none)."""
    threads = _threads.count()
    if threads <= 1 or -(-spec.out_channels // LANES) < 2:
        return []
    if spec.groups == 1 and (spec.kernel, spec.stride, spec.padding) == ((1, 1), (1, 1), (0, 0)):
        return [(PointwiseNchwcOmpTactic.name, lambda layout=None: PointwiseNchwcOmpTactic(
            spec, weight, bias, blocked, layout, threads))]
    if spec.groups > 1 and spec.groups == spec.x_shape[1] == spec.out_channels:
        return [(DepthwiseNchwcOmpTactic.name, lambda layout=None: DepthwiseNchwcOmpTactic(
            spec, weight, bias, blocked, layout, threads))]
    return []
