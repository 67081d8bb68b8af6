"""2-D convolution tactics of the trt_like engine: float32, NCHW, static shapes.

``conv_tactics(spec, weight, bias)`` returns every tactic that computes ``spec``; the engine
builder times them on the real shapes (:func:`srcore_trt_like.tactics.timing.time_tactics`)
and keeps the fastest. Each is called as ``tactic(x, out, residual=None)`` and writes
``relu?(conv(x) + bias (+ residual))`` into ``out``; the epilogue runs in the tactic's last pass
(the output transform or depthwise row loop; after a BLAS GEMM, one pass over the output chunk
the GEMM just wrote, while it is in cache).

=================== ========================================================================
``gemm_1x1``        1x1, unpadded, ungrouped: one GEMM on the input (stride: a gather first)
``im2col_gemm``     any kernel, stride, padding, dilation, groups: numba column gather with the
                    padding folded in, in chunks of output rows (~1 MiB of columns), one GEMM each
``packed_gemm``     any ungrouped conv: im2col straight into the operand layout of the numba
                    packed GEMM (explicit AVX-512 vectors), the weight packed once
                    (``packed.py``, ``kernels/gemm.py``)
``winograd_f4x4_packed``, ``winograd_f2x2_packed``  the same on the packed GEMM with vector
                    transforms, in chunks of tile rows (``winograd_packed.py``)
``winograd_f2x2``   3x3, stride 1, undilated, ungrouped: Winograd F(2x2, 3x3) (``winograd.py``)
``winograd_f4x4``   the same shapes: Winograd F(4x4, 3x3)
``winograd_f4x4_sgemm``, ``winograd_f2x2_sgemm``  the same with the products on the packed-panel SGEMM's
                    6 x 16 tile (``winograd_sgemm.py``); ``..._sgemm_omp`` at more than one intra-op
                    thread: every phase split on numba's OpenMP team, the one-thread bits
``depthwise_direct`` groups == in channels: a numba direct loop per output row
``depthwise_channels_last`` the same, vectorized over channels on a padded channels-last copy
``depthwise_simd``  the same: srcore's explicit-SIMD depthwise kernel, 8 vectors of output pixels
                    in registers (``srcore.plugin.simd_depthwise``)
``depthwise_simd8`` the same at 8 lanes, where the CPU's vectors are 16
``depthwise_simd_blocked`` the same with 16 channels of a pixel in a vector, NCHW in and out
                    (``srcore.plugin.simd_depthwise_blocked``; out channels == in channels)
``im2col_gemm_team``, ``winograd_f4x4_team``, ``winograd_f2x2_team``  at more than one intra-op
                    thread, large layers: the BLAS tactics in fixed parts on the OpenBLAS team
                    (``kernels/blas_team.py``)
``grouped_depthwise`` 2 to 8 channels per group, out channels == in channels: k passes of the
                    channel-blocked depthwise kernel on rotated copies of the input (``grouped.py``)
``simd_direct``     dense convs (more than one input channel per group, or one group): srcore's explicit-SIMD direct conv
                    (``srcore.plugin.simd_conv``; ``simd_direct.py``)
``simd_direct_rows`` the same with its input copy row-interleaved (many channels, large planes)
``simd_direct_tiled`` the same with rows longer than ``ROW_TILE`` in pieces (long 1-D convs)
``simd_direct_oc``  on a 16-lane CPU: the same with output channels in the vector lanes (small planes)
``simd_direct_8``   on a 16-lane CPU: ``simd_direct`` at 8 lanes
``conv_nchwc_planes`` dense convs but a 1x1 stride 1: the NCHW16c dense kernel (``nchwc.py``'s
                    ``conv_nchw16c``, which the layers with a blocked side have) with NCHW on both sides
``conv_nchwc_planes_blockdiag`` 2 to :data:`BLOCK_DIAGONAL_MAX_GROUPS` groups of more than one
                    channel (RegNet's / ResNet-D's group width 8): ``conv_nchwc_planes`` on the dense
                    block-diagonal weight, groups x the multiply-adds on the tuned dense kernel
``patchify_gemm``, ``patchify_direct``, ``patchify_dots`` kernel == stride, unpadded, ungrouped (patch
                    embeddings): the patches gathered as GEMM rows and one GEMM, or the whole layer in
                    one compiled call, pixels or the patch (dot products) along the vector (``patchify.py``)
``pointwise_simd``  1x1, stride 1, unpadded, ungrouped: srcore's explicit-SIMD 1x1 kernel on the
                    NCHW input in place (``srcore.plugin.simd_pointwise``; ``simd_1x1.py``)
``pointwise_simd8`` the same at 8 lanes, where the CPU's vectors are 16
``simd_direct_split``, ``depthwise_simd_split``  at more than one intra-op thread, large layers: the
                    two SIMD kernels with their input copy and tasks in fixed parts on the thread
                    team (``simd_split.py``; the bits of the one-thread tactic)
``simd_direct_omp``, ``simd_direct_rows_omp``  at more than one intra-op thread, any size: the SIMD
                    direct conv's copy and tasks in ranges over numba's OpenMP team (``simd_split.py``)
=================== ========================================================================
"""
from __future__ import annotations

import attrs
import numpy as np

from srcore.plugin import simd_conv

from ..errors import TacticSpecError
from ..kernels import threads as _threads
from ..kernels.winograd_math import F2, F4
from .depthwise import (DepthwiseBlockedTactic, DepthwiseChannelsLastTactic, DepthwiseDirectTactic,
                        DepthwiseSimd8Tactic, DepthwiseSimdTactic)
from .gemm import Gemm1x1Tactic, Im2colGemmTactic
from .grouped import GroupedDepthwiseTactic, grouped_depthwise_applies
from .nchwc import ConvNchwcPlanesHalvesTactic, ConvNchwcPlanesTactic
from .packed import PackedGemmTactic
from .patchify import PatchifyDirectTactic, PatchifyDotsTactic, PatchifyGemmTactic, patchify_applies
from .simd_1x1 import Simd1x1Lanes8Tactic, Simd1x1Tactic, simd_1x1_applies
from .simd_direct import (SimdDirect8Tactic, SimdDirectOcTactic, SimdDirectRowsTactic, SimdDirectTactic,
                          SimdDirectTiledTactic, simd_direct_applies)
from .planes_split import planes_omp_builders
from .simd_split import (DepthwiseSimdSplitTactic, SimdDirectOmpTactic, SimdDirectRowsOmpTactic,
                         SimdDirectSplitTactic)
from .spec import ConvSpec, ConvTactic
from .winograd import WinogradTactic, transform_weight, winograd_applies
from .winograd_packed import WinogradPackedTactic
from .winograd_sgemm import WinogradSgemmTactic

__all__ = ["ConvSpec", "ConvTactic", "Gemm1x1Tactic", "Im2colGemmTactic", "WinogradTactic", "WinogradPackedTactic", "WinogradSgemmTactic",
           "PackedGemmTactic", "DepthwiseDirectTactic", "DepthwiseChannelsLastTactic", "DepthwiseSimdTactic",
           "DepthwiseSimd8Tactic", "DepthwiseBlockedTactic",
           "SimdDirectTactic", "SimdDirectRowsTactic", "SimdDirectOcTactic", "SimdDirect8Tactic",
           "Simd1x1Tactic", "Simd1x1Lanes8Tactic", "SimdDirectSplitTactic",
           "DepthwiseSimdSplitTactic", "PatchifyGemmTactic", "PatchifyDirectTactic",
           "conv_tactics", "conv_tactic_builders"]


#: a grouped conv with at most this many groups is also offered as the dense conv of its
#: block-diagonal weight (ResNet-D's 32 channels in 4 groups, 3x3/2 on 15x15, batch 2, loaded SPR:
#: 35 us against the grouped ``simd_direct_8``'s 48; at 8 groups the dense conv lost, 108 against 52)
BLOCK_DIAGONAL_MAX_GROUPS = 4


def block_diagonal(weight: np.ndarray, groups: int) -> np.ndarray:
    """The (O, C, kh, kw) dense weight of a grouped conv's (O, C / groups, kh, kw) one: zeros
    outside each group's block."""
    O, cg = weight.shape[:2]
    og = O // groups
    dense = np.zeros((O, cg * groups, *weight.shape[2:]), np.float32)
    for g in range(groups):
        dense[g * og:(g + 1) * og, g * cg:(g + 1) * cg] = weight[g * og:(g + 1) * og]
    return dense


def _simd_lanes() -> int:
    from srcore.plugin import simd_depthwise
    return simd_depthwise.lanes()


def conv_tactic_builders(spec: ConvSpec, weight: np.ndarray, bias: np.ndarray | None) -> list[tuple[str, object]]:
    """``(name, build)`` for every tactic that computes ``spec`` (im2col_gemm always; the others where
    they apply); ``build(layout=None)`` lays out the weights (or takes them from ``layout``, a
    tactic's :meth:`~.spec.ConvTactic.layout`), so a builder that already knows its winner (the
    timing cache, a serialized plan) constructs only that one."""
    if not isinstance(spec, ConvSpec):
        raise TacticSpecError(f"conv_tactics: spec must be a ConvSpec, got {type(spec).__name__}")
    out: list[tuple[str, object]] = []
    threads = _threads.for_work(spec.macs)   # small layers stay on one thread (see kernels/threads.py)
    # the BLAS tactics split over the OpenBLAS team (kernels/blas_team.py), where OpenBLAS takes a
    # per-thread count
    team = threads if threads > 1 and _threads._set_local() else 1
    if spec.kernel == (1, 1) and spec.padding == (0, 0) and spec.groups == 1:
        out.append((Gemm1x1Tactic.name, lambda layout=None: Gemm1x1Tactic(spec, weight, bias, layout)))
    if simd_1x1_applies(spec):
        out.append((Simd1x1Tactic.name, lambda layout=None: Simd1x1Tactic(spec, weight, bias, layout, threads)))
        if _simd_lanes() == 16:
            out.append((Simd1x1Lanes8Tactic.name,
                        lambda layout=None: Simd1x1Lanes8Tactic(spec, weight, bias, layout, threads)))
    if winograd_applies(spec):
        u: dict[int, np.ndarray] = {}

        def transformed(m: int) -> np.ndarray:
            # the float64 weight transform once per tile size, shared by the packed and OpenBLAS
            # tactics (resnet's 512-channel layer: ~40 ms each)
            if m not in u:
                u[m] = transform_weight(np.asarray(weight), F4 if m == 4 else F2)
            return u[m]
        for m in (4, 2):
            out.append((f"winograd_f{m}x{m}_packed",
                        lambda layout=None, m=m: WinogradPackedTactic(
                            # U when another candidate made it already; else transformed and packed
                            # by channel blocks, without the whole U (see WinogradPackedTactic)
                            spec, weight, bias, m=m, threads=threads, u=None if layout else u.get(m),
                            layout=layout)))
        for m in (4, 2):
            out.append((f"winograd_f{m}x{m}", lambda layout=None, m=m: WinogradTactic(
                spec, weight, bias, m=m, u=None if layout else transformed(m), layout=layout)))
        # the products on the packed-panel SGEMM's tiles (winograd_sgemm.py): one thread, and split on
        # numba's OpenMP team at more than one intra-op thread (every phase, the one-thread bits)
        omp = _threads.count()
        for nt in ((1, omp) if omp > 1 else (1,)):
            for m in (4, 2):
                out.append((WinogradSgemmTactic.tactic_name(m, nt), lambda layout=None, m=m, nt=nt: WinogradSgemmTactic(
                    spec, weight, bias, m=m, threads=nt, u=None if layout else transformed(m), layout=layout)))
        if team > 1:
            for m in (4, 2):
                out.append((f"winograd_f{m}x{m}_team", lambda layout=None, m=m: WinogradTactic(
                    spec, weight, bias, m=m, u=None if layout else transformed(m), layout=layout, team=team)))
    if spec.groups > 1 and spec.groups == spec.x_shape[1]:
        out.append((DepthwiseDirectTactic.name, lambda layout=None: DepthwiseDirectTactic(spec, weight, bias, layout)))
        out.append((DepthwiseChannelsLastTactic.name,
                    lambda layout=None: DepthwiseChannelsLastTactic(spec, weight, bias, layout)))
        out.append((DepthwiseSimdTactic.name, lambda layout=None: DepthwiseSimdTactic(spec, weight, bias, layout)))
        if _simd_lanes() == 16:   # the 8-lane kernel too (a feature test; the timing picks)
            out.append((DepthwiseSimd8Tactic.name,
                        lambda layout=None: DepthwiseSimd8Tactic(spec, weight, bias, layout)))
        if spec.out_channels == spec.x_shape[1]:
            out.append((DepthwiseBlockedTactic.name,
                        lambda layout=None: DepthwiseBlockedTactic(spec, weight, bias, layout)))
        if threads > 1:
            out.append((DepthwiseSimdSplitTactic.name,
                        lambda layout=None: DepthwiseSimdSplitTactic(spec, weight, bias, layout, threads)))
    if grouped_depthwise_applies(spec):
        out.append((GroupedDepthwiseTactic.name,
                    lambda layout=None: GroupedDepthwiseTactic(spec, weight, bias, layout)))
    if simd_direct_applies(spec):
        # one thread, and split over the intra-op threads (simd_split.py): the timing picks
        out.append((SimdDirectTactic.name, lambda layout=None: SimdDirectTactic(spec, weight, bias, layout)))
        out.append((SimdDirectRowsTactic.name, lambda layout=None: SimdDirectRowsTactic(spec, weight, bias, layout)))
        if spec.out_shape[3] > simd_conv.ROW_TILE:
            out.append((SimdDirectTiledTactic.name,
                        lambda layout=None: SimdDirectTiledTactic(spec, weight, bias, layout)))
        if simd_conv.lanes() == 16:   # by the CPU's features: the oc-lanes block and the other width
            out.append((SimdDirectOcTactic.name, lambda layout=None: SimdDirectOcTactic(spec, weight, bias, layout)))
            out.append((SimdDirect8Tactic.name, lambda layout=None: SimdDirect8Tactic(spec, weight, bias, layout)))
        if threads > 1:
            out.append((SimdDirectSplitTactic.name,
                        lambda layout=None: SimdDirectSplitTactic(spec, weight, bias, layout, threads)))
        omp = _threads.count()
        if omp > 1 and spec.out_shape[2] * spec.out_channels > 1:
            # the same split on numba's OpenMP team, any size (simd_split.py): its worker spins between
            # an engine call's regions, where the Python team is a third thread to wake; timed
            for cls in (SimdDirectOmpTactic, SimdDirectRowsOmpTactic):
                out.append((cls.name, lambda layout=None, cls=cls: cls(spec, weight, bias, layout, omp)))
    if spec.groups == 1 and (spec.kernel, spec.stride, spec.padding) != ((1, 1), (1, 1), (0, 0)):
        # the NCHW16c dense kernel with NCHW on both sides (the window transposed in registers):
        # ahead of the SIMD direct conv on some small-plane layers (ConvNeXt's 2x2 s2 downsample on
        # 8x8, 16 -> 32: 8.1 -> 5.4 us), behind on others
        # (on one thread: its split is its OpenMP twins', planes_split.py)
        out.append((ConvNchwcPlanesTactic.name, lambda layout=None: ConvNchwcPlanesTactic(spec, weight, bias, layout)))
        out.append((ConvNchwcPlanesHalvesTactic.name, lambda layout=None: ConvNchwcPlanesHalvesTactic(
            spec, weight, bias, layout)))
        out += planes_omp_builders(spec, weight, bias)
    if (1 < spec.groups <= BLOCK_DIAGONAL_MAX_GROUPS and spec.groups < spec.x_shape[1]
            and (spec.kernel, spec.stride, spec.padding) != ((1, 1), (1, 1), (0, 0))):   # (as conv_nchwc_planes)
        dense = attrs.evolve(spec, groups=1)
        out.append((ConvNchwcPlanesTactic.name + "_blockdiag", lambda layout=None: ConvNchwcPlanesTactic(
            dense, block_diagonal(np.asarray(weight, np.float32), spec.groups), bias, layout)))
    if patchify_applies(spec):
        out.append((PatchifyGemmTactic.name, lambda layout=None: PatchifyGemmTactic(spec, weight, bias, layout)))
        out.append((PatchifyDirectTactic.name, lambda layout=None: PatchifyDirectTactic(spec, weight, bias, layout)))
        out.append((PatchifyDotsTactic.name, lambda layout=None: PatchifyDotsTactic(spec, weight, bias, layout)))
    if spec.groups == 1:
        out.append((PackedGemmTactic.name, lambda layout=None: PackedGemmTactic(spec, weight, bias, threads=threads, layout=layout)))
    out.append((Im2colGemmTactic.name, lambda layout=None: Im2colGemmTactic(spec, weight, bias, layout)))
    if team > 1 and spec.groups == 1:
        out.append(("im2col_gemm_team", lambda layout=None: Im2colGemmTactic(spec, weight, bias, layout, team=team)))
    return out


def conv_tactics(spec: ConvSpec, weight: np.ndarray, bias: np.ndarray | None) -> list[ConvTactic]:
    """Every tactic that computes ``spec``, weights laid out (see :func:`conv_tactic_builders`)."""
    return [build() for _, build in conv_tactic_builders(spec, weight, bias)]
