"""The SIMD conv kernels split over the intra-op threads at the caller: ``simd_direct_split`` and
``depthwise_simd_split``, offered beside their one-thread tactics at more than one intra-op thread
(the builder times both on the layer's shapes and keeps the faster).

srcore's kernels (``srcore.plugin.simd_conv`` / ``simd_depthwise``) do each image in two steps, a
padded, phase-split copy of the input and the register-block tasks, and take the range of each:
the copy a channel range (a view of the input's channels and the matching slice of the buffer:
a channel's copy never writes outside its own block), the tasks a task range (output row x
channel block for the direct conv, output channels for the depthwise one). Here both steps run
in fixed parts (a function of the shape alone) on the process's thread team
(:mod:`..kernels.blas_team`: the calling thread takes parts too, a worker that wakes late finds
less left), each step on the team only when its own timing says so
(:class:`..kernels.blas_team.TeamParts`). A task's result does not depend on which thread or
range runs it, so the split gives the bits of the one-thread kernel.

Against the kernels' own ``threads=`` (a ``ThreadPoolExecutor`` taking fixed halves while the
caller waits, the copy on the caller alone): on the 2-vCPU EPYC the copy was a quarter of the
resnet stem's time and stayed on one core.
"""
from __future__ import annotations

import numpy as np

from srcore.plugin import simd_conv, simd_depthwise

from ..kernels.blas_team import TeamParts, ranges
from .depthwise import DepthwiseSimdTactic
from .simd_direct import SimdDirectTactic
from .spec import ConvSpec


class SimdDirectSplitTactic(TeamParts, SimdDirectTactic):
    """:class:`.SimdDirectTactic` with each image's phase copy split by input channels and its tasks
    (output rows x 6-channel blocks) in fixed parts, on a team of ``threads``."""
    name = "simd_direct_split"

    def __init__(self, spec: ConvSpec, weight, bias, layout=None, threads: int = 2):
        super().__init__(spec, weight, bias, layout, threads=1)
        self._init_team(threads)

    def _run(self, x, out, residual):
        c = self.conv
        N, C = x.shape[:2]
        (sh, sw), (pt, pl) = c.stride, (c.pads[0][0], c.pads[1][0])
        Ho, Wo, pairs, Hq, Wq, taps, tasks = c._geometry(x.shape)
        cstep = sh * sw * Hq * Wq
        xq = c._phase_buffer(C * cstep)
        flat = out.reshape(-1)
        res = c._none if residual is None else residual.reshape(-1)
        cparts, tparts = ranges(C), ranges(tasks)
        fill, conv_tasks = simd_conv.fill_phases, simd_conv.conv_tasks
        for n in range(N):
            self._parts(lambda i: fill(x[:, cparts[i][0]:cparts[i][1]], n, sh, sw, pt, pl,
                                       xq[cparts[i][0] * cstep:cparts[i][1] * cstep], Hq, Wq, c.tag, c.nl),
                        len(cparts))
            args = (xq, Wq, cstep, taps, c.wp, c.bp, c.cg, c.Og, c.nb_oc, flat, res, residual is not None, c.lo, c.hi,
                    n, c.O, Ho, Wo, c.tag, c.nl, pairs)
            self._parts(lambda i: conv_tasks(*args, *tparts[i]), len(tparts))


class DepthwiseSimdSplitTactic(TeamParts, DepthwiseSimdTactic):
    """:class:`.DepthwiseSimdTactic` with each image's padded copy split by input channels and its
    output channels in fixed parts, on a team of ``threads``."""
    name = "depthwise_simd_split"

    def __init__(self, spec: ConvSpec, weight, bias, layout=None, threads: int = 2):
        super().__init__(spec, weight, bias, layout, threads=1)
        self._init_team(threads)

    def _run(self, x, out, residual):
        c = self.conv
        N, C, H, W = x.shape
        geom = c._geometry.get(x.shape)
        if geom is None:
            geom = c._geometry[x.shape] = c._plan(x.shape)
        Ho, Wo, rb, cb, Hq, Wq, taps = geom
        (sh, sw), (pt, pl) = c.stride, (c.pads[0][0], c.pads[1][0])
        cstep, plane = sh * sw * Hq * Wq, H * W
        xq = getattr(c._local, "xq", None)
        if xq is None or xq.shape[0] < C * cstep:
            xq = np.empty(C * cstep, np.float32)
            if C * cstep <= simd_depthwise.KEEP_BUFFER_FLOATS:
                c._local.xq = xq
        flat = out.reshape(-1)
        res = c._none if residual is None else residual.reshape(-1)
        xc = np.ascontiguousarray(x, np.float32).reshape(N, -1)   # (a copy only for a strided view)
        O = c.O
        cparts, oparts = ranges(C), ranges(O)
        fill, dw_tasks = simd_depthwise.fill_padded, simd_depthwise.dw_tasks
        for n in range(N):
            xn = xc[n]
            # each part's slices of the input and the buffer: a vector that runs past a row's end
            # stays inside its part (the kernel guards the arrays' ends)
            self._parts(lambda i: fill(xn[cparts[i][0] * plane:cparts[i][1] * plane], cparts[i][1] - cparts[i][0], H,
                                       W, sh, sw, pt, pl, xq[cparts[i][0] * cstep:cparts[i][1] * cstep], Hq, Wq,
                                       c.tag), len(cparts))
            args = (xq, Wq, cstep, O // C, taps, c.w, c.b, flat, res, residual is not None, c.lo, c.hi, n, O, Ho, Wo,
                    rb, cb, c.tag, c.nl)
            self._parts(lambda i: dw_tasks(*args, *oparts[i]), len(oparts))
