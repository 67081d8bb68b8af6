"""The SIMD conv kernels split over the intra-op threads at the caller: ``simd_direct_split`` and
``depthwise_simd_split``, offered beside their one-thread tactics at more than one intra-op thread
(the builder times both on the layer's shapes and keeps the faster); and the direct conv's same split
over numba's OpenMP team instead, ``simd_direct_omp`` / ``simd_direct_rows_omp`` (at the end).

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

from srcore.plugin import simd_conv

from ..errors import TacticSpecError
from ..kernels import threads as _threads
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


class SimdDirectOmpTactic(SimdDirectTactic):
    """:class:`.SimdDirectTactic` with each image's phase copy (by input channels) and tasks (bands of
    output rows x channel blocks) in ``threads`` ranges over numba's OpenMP team, one region an image
    (:func:`..kernels.direct_split.direct`), governed: the same pool as the engine's packed convs, group
    norms and resizes (``numba_split``), whose worker is still spinning when this layer starts, where
    ``simd_direct_split``'s Python team is a third thread to wake. The bits of the one-thread tactic,
    whose layout it keeps."""
    name = "simd_direct_omp"

    def __init__(self, spec: ConvSpec, weight, bias, layout=None, threads: int = 2):
        super().__init__(spec, weight, bias, layout, threads=1)
        self.nt = threads
        self.governor = _threads.Governor(threads)

    def serial_calls(self, x, out, residual):
        return None   # (never the one-thread kernel's calls in its place)

    def _run(self, x, out, residual):
        from ..kernels.direct_split import direct

        run = self.conv.bind(x, out, residual)
        if run._kernel is not simd_conv.conv_tasks:   # (the oc-lanes kernel: not this tactic's)
            raise TacticSpecError(f"{self.name}: the rows / pairs / flat kernel only")
        sh, sw, pt, pl = run._fill
        for n in range(run.images):
            self.governor.run(direct, run._x, n, sh, sw, pt, pl, run._cstep, run._grid, run._args, run.channels,
                              run.tasks, self.nt)


class SimdDirectRowsOmpTactic(SimdDirectOmpTactic):
    """:class:`SimdDirectOmpTactic` on the row-interleaved input copy (``simd_direct_rows``' layout)."""
    name = "simd_direct_rows_omp"
    rows_interleaved = True
