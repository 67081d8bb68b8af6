"""``conv_nchwc_planes`` (the NCHW16c dense kernel with NCHW on both sides, a candidate of plain NCHW
layers) split over numba's OpenMP team: ``conv_nchwc_planes_omp`` by ranges of block-group tasks,
``conv_nchwc_planes_rows_omp`` by bands of output rows, the dense conv's twins of ``nchwc_split.py``
on unblocked sides. Offered beside it at more than one intra-op thread, any size, timed; it runs on one
thread itself (its split on ``srcore.conv``'s Python team was a third thread beside libgomp's worker:
``nchwc.nchwc_tactic_builders``). The bits of the one-thread tactic, whose stored layout they take."""
from __future__ import annotations

from ..kernels import threads as _threads
from .nchwc import LANES
from .nchwc import ConvNchwcHalvesTactic
from .nchwc_split import ConvNchwcOmpTactic, ConvNchwcRowsTactic
from .spec import ConvSpec

UNBLOCKED = (False, False)


class ConvNchwcPlanesOmpTactic(ConvNchwcOmpTactic):
    name = "conv_nchwc_planes_omp"

    def __init__(self, spec: ConvSpec, weight, bias, layout=None, threads: int = 2):
        super().__init__(spec, weight, bias, UNBLOCKED, layout, threads)


class ConvNchwcPlanesRowsTactic(ConvNchwcRowsTactic):
    name = "conv_nchwc_planes_rows_omp"

    def __init__(self, spec: ConvSpec, weight, bias, layout=None, threads: int = 2):
        super().__init__(spec, weight, bias, UNBLOCKED, layout, threads)


class ConvNchwcPlanesHalvesOmpTactic(ConvNchwcPlanesOmpTactic):
    """``conv_nchwc_planes_h8``'s twin (the 8-lane tiles, its bits)."""
    name = "conv_nchwc_planes_h8_omp"
    halves = True
    _kernel_class = staticmethod(ConvNchwcHalvesTactic._kernel_class)


class ConvNchwcPlanesHalvesRowsTactic(ConvNchwcPlanesRowsTactic):
    name = "conv_nchwc_planes_h8_rows_omp"
    halves = True
    _kernel_class = staticmethod(ConvNchwcHalvesTactic._kernel_class)


def planes_omp_builders(spec: ConvSpec, weight, bias):
    """``(name, build)`` of the split twins of a layer's ``conv_nchwc_planes`` at more than one intra-op
    thread (by block groups where there are two or more, by rows where there are two or more)."""
    threads = _threads.count()
    if threads <= 1:
        return []
    from srcore.plugin import simd_dense_nchwc

    groups = len(simd_dense_nchwc.block_groups(-(-spec.out_channels // LANES)))
    rows = spec.out_shape[2] >= 2
    kinds = [(ConvNchwcPlanesOmpTactic, groups >= 2), (ConvNchwcPlanesRowsTactic, rows),
             (ConvNchwcPlanesHalvesOmpTactic, groups >= 2), (ConvNchwcPlanesHalvesRowsTactic, rows)]
    return [(cls.name, lambda layout=None, cls=cls: cls(spec, weight, bias, layout, threads)) for cls, ok in kinds if ok]
