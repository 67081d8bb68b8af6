"""The SIMD conv kernels split over the intra-op threads at the caller: ``simd_direct_split`` and
``depthwise_simd_split``, offered beside their one-thread tactics at more than one intra-op thread
(the builder times both on the layer's shapes and keeps the faster).

srcore's kernels (``srcore.plugin.simd_conv`` / ``simd_depthwise``) do each image in two steps, a
padded, phase-split copy of the input and the register-block tasks; a bound call (``conv.bind``,
the one the kernels' own ``__call__`` runs) takes the range of each: the copy a channel range (a
channel's copy never writes outside its own block of the buffer), the tasks a task range (output
row x channel block for the direct conv, output channels for the depthwise one; the depthwise
kernel copies each input channel inside its tasks, so its copy step is empty). Here both steps run
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

from ..kernels.blas_team import TeamParts, ranges
from .depthwise import DepthwiseSimdTactic
from .simd_direct import SimdDirectTactic
from .spec import ConvSpec


def _split(tactic: TeamParts, run):
    """Each image of a kernel's bound call (``SimdDirectConv.bind`` / ``SimdDepthwiseConv.bind``):
    its input copy by channel parts, then its tasks in parts, each phase on the team."""
    cparts, tparts = ranges(run.channels), ranges(run.tasks)
    for n in range(run.images):
        tactic._parts(lambda i, n=n: run.fill(n, *cparts[i]), len(cparts))
        tactic._parts(lambda i, n=n: run.run_tasks(n, *tparts[i]), len(tparts))


class SimdDirectSplitTactic(TeamParts, SimdDirectTactic):
    """:class:`.SimdDirectTactic` with each image's phase copy split by input channels and its tasks
    (output rows x 6-channel blocks) in fixed parts, on a team of ``threads``."""
    name = "simd_direct_split"

    def __init__(self, spec: ConvSpec, weight, bias, layout=None, threads: int = 2):
        super().__init__(spec, weight, bias, layout, threads=1)
        self._init_team(threads)

    def _run(self, x, out, residual):
        _split(self, self.conv.bind(x, out, residual))


class DepthwiseSimdSplitTactic(TeamParts, DepthwiseSimdTactic):
    """:class:`.DepthwiseSimdTactic` with each image's padded copy split by input channels and its
    output channels in fixed parts, on a team of ``threads``."""
    name = "depthwise_simd_split"

    def __init__(self, spec: ConvSpec, weight, bias, layout=None, threads: int = 2):
        super().__init__(spec, weight, bias, layout, threads=1)
        self._init_team(threads)

    def _run(self, x, out, residual):
        _split(self, self.conv.bind(x, out, residual))
