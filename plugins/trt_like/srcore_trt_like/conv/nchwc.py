"""The conv tactics of layers the builder keeps in the NCHW16c layout (``builder/layout.py``), whose
input, output or both are channel-blocked: ``pointwise_nchw16c`` (1x1 with either side in either
layout; ``srcore.plugin.simd_pointwise_blocked``) and ``depthwise_nchw16c`` (the channel-blocked
depthwise kernel with either side in either layout; ``srcore.plugin.simd_depthwise_blocked``).
``dense_nchw16c`` (a dense conv on few input channels, NCHW in, NCHW16c out;
``srcore.plugin.simd_dense_blocked``) and ``conv_nchw16c`` (any dense conv, either side in either
layout; ``srcore.plugin.simd_dense_nchwc``). ``..._h8`` (1x1, depthwise, dense): the same kernels'
arithmetic on 8-lane vectors, register blocks sized for 16 ``ymm`` registers (timed beside them;
``conv_nchw16c_h8``, ``conv_nchwc_planes_h8``: the dense conv's). ``blocked = (input blocked, output blocked)``; the residual
is in the output's layout."""
from __future__ import annotations

import math

import numpy as np

from ..errors import TacticSpecError
from .dense_tile import DenseTileTactic
from .depthwise import DepthwiseDirectTactic, _epilogue
from .pointwise_sgemm import PointwiseSgemmTactic
from .spec import ConvSpec, ConvTactic

LANES = 16


def _blocked(shape) -> tuple[int, ...]:
    N, C, H, W = shape
    return (N, -(-C // LANES), H, W, LANES)


class PointwiseNchwcTactic(ConvTactic):
    """1x1, stride 1, unpadded, ungrouped, each side in the layout ``blocked`` says; the weight packed
    once into the kernel's (out blocks, in channels, 16) layout (stored as ``wq``)."""
    name = "pointwise_nchw16c"
    bound_run = True
    fused_activations = ("hardswish", "hardsigmoid", "relu6")

    def __init__(self, spec: ConvSpec, weight, bias, blocked: tuple[bool, bool], layout=None, threads: int = 1):
        super().__init__(spec, weight, bias, layout)
        if spec.kernel != (1, 1) or spec.stride != (1, 1) or spec.padding != (0, 0) \
                or spec.groups != 1:
            raise TacticSpecError(f"{self.name}: needs a 1x1, stride 1, unpadded, ungrouped conv; "
                                  f"got kernel {spec.kernel}, stride {spec.stride}, padding {spec.padding}, "
                                  f"groups {spec.groups}, layouts {blocked}")
        O, C = spec.out_channels, spec.x_shape[1]
        self.conv = self._kernel_class()(
            np.asarray(weight, np.float32).reshape(O, C), self.bias, **_clamp(spec),
            activation=spec.activation if spec.activation in ("hardswish", "hardsigmoid") else None,
            blocked_in=blocked[0], blocked_out=blocked[1])
        self.wq = self._laid_out("wq", self.conv.wq.shape, lambda: self.conv.wq)
        self.conv.wq = self.wq
        self.x_shape = _blocked(spec.x_shape) if blocked[0] else spec.x_shape
        self.out_shape = _blocked(spec.out_shape) if blocked[1] else spec.out_shape
        self.threads = threads

    @staticmethod
    def _kernel_class():
        from srcore.plugin import simd_pointwise_blocked
        return simd_pointwise_blocked.BlockedPointwiseConv

    def _run(self, x, out, residual):
        self.conv(x, out, residual, threads=self.threads)


class PointwiseNchwcHalvesTactic(PointwiseNchwcTactic):
    """:class:`PointwiseNchwcTactic` (same layouts, packed weight and bits) on the kernel with 8-lane
    vectors, two a 16-channel block (``srcore.plugin.simd_pointwise_halves``): its register block
    fits 16 ``ymm`` registers where the 16-lane one spills without AVX-512. A candidate everywhere,
    timed beside it."""
    name = "pointwise_nchw16c_h8"

    @staticmethod
    def _kernel_class():
        from srcore.plugin import simd_pointwise_halves
        return simd_pointwise_halves.HalvesPointwiseConv


class DepthwiseNchwcTactic(DepthwiseDirectTactic):
    """groups == in channels == out channels on the channel-blocked depthwise kernel, each side in
    the layout ``blocked`` says; weights as (O, kh * kw), packed by the kernel at construction."""
    name = "depthwise_nchw16c"
    bound_run = True
    fused_activations = ("leaky_relu", "hardswish", "hardsigmoid", "relu6")

    def __init__(self, spec: ConvSpec, weight, bias, blocked: tuple[bool, bool], layout=None, threads: int = 1):
        if spec.out_channels != spec.x_shape[1]:
            raise TacticSpecError(f"{self.name}: needs out channels == in channels ({spec.x_shape[1]}), "
                                  f"got {spec.out_channels}")
        super().__init__(spec, weight, bias, layout)
        self.conv = self._kernel_class()(
            self.w.reshape(spec.out_channels, 1, *spec.kernel), self.bias, spec.stride, spec.padding, spec.dilation,
            blocked_in=blocked[0], blocked_out=blocked[1], **_epilogue(spec))
        self.x_shape = _blocked(spec.x_shape) if blocked[0] else spec.x_shape
        self.out_shape = _blocked(spec.out_shape) if blocked[1] else spec.out_shape
        self.threads = threads

    @staticmethod
    def _kernel_class():
        from srcore.plugin import simd_depthwise_blocked
        return simd_depthwise_blocked.BlockedDepthwiseConv

    def _run(self, x, out, residual):
        self.conv(x, out, residual, threads=self.threads)


class DepthwiseNchwcHalvesTactic(DepthwiseNchwcTactic):
    """:class:`DepthwiseNchwcTactic` with both sides NCHW16c (same bits) on 8-lane vectors, each half
    of a block in turn (``srcore.plugin.simd_halves``): 8 accumulators, not 16 ``ymm`` registers,
    where there is no AVX-512. A candidate everywhere, timed beside it."""
    name = "depthwise_nchw16c_h8"

    def __init__(self, spec: ConvSpec, weight, bias, blocked: tuple[bool, bool], layout=None, threads: int = 1):
        if tuple(blocked) != (True, True):
            raise TacticSpecError(f"{self.name}: needs both sides NCHW16c, got layouts {blocked}")
        super().__init__(spec, weight, bias, blocked, layout, threads)

    @staticmethod
    def _kernel_class():
        from srcore.plugin import simd_halves
        return simd_halves.HalvesDepthwiseConv


class DenseNchwcTactic(ConvTactic):
    """An ungrouped conv, NCHW in, NCHW16c out, no residual (a mobile net's stem); the weight packed
    once into the kernel's (out blocks, C, kh, kw, 16) layout (stored as ``wq``)."""
    name = "dense_nchw16c"
    bound_run = True
    fused_activations = ("hardswish", "hardsigmoid", "relu6")

    def __init__(self, spec: ConvSpec, weight, bias, blocked: tuple[bool, bool], layout=None, threads: int = 1):
        super().__init__(spec, weight, bias, layout)
        if spec.groups != 1 or spec.residual or blocked != (False, True):
            raise TacticSpecError(f"{self.name}: needs an ungrouped conv without residual, NCHW in and NCHW16c out; "
                                  f"got groups {spec.groups}, residual {spec.residual}, layouts {blocked}")
        self.conv = self._kernel_class()(
            np.asarray(weight, np.float32), self.bias, spec.stride, spec.padding, spec.dilation, **_clamp(spec),
            activation=spec.activation if spec.activation in ("hardswish", "hardsigmoid") else None)
        self.wq = self._laid_out("wq", self.conv.wq.shape, lambda: self.conv.wq)
        self.conv.wq = self.wq
        self.out_shape = _blocked(spec.out_shape)
        self.threads = threads

    @staticmethod
    def _kernel_class():
        from srcore.plugin import simd_dense_blocked
        return simd_dense_blocked.BlockedDenseConv

    def _run(self, x, out, residual):
        self.conv(x, out, None, threads=self.threads)


class DenseNchwcHalvesTactic(DenseNchwcTactic):
    """:class:`DenseNchwcTactic` (same bits) on 8-lane vectors, each half of a block in turn
    (``srcore.plugin.simd_halves``): 12 accumulators, not 24 ``ymm`` registers, where there is no
    AVX-512. A candidate everywhere, timed beside it."""
    name = "dense_nchw16c_h8"

    @staticmethod
    def _kernel_class():
        from srcore.plugin import simd_halves
        return simd_halves.HalvesDenseConv


class ConvNchwcTactic(ConvTactic):
    """An ungrouped conv, each side in the layout ``blocked`` says (ONNX Runtime's NCHWc conv); the
    weight packed once into the kernel's per block group layout (stored as ``wq``)."""
    name = "conv_nchw16c"
    bound_run = True
    fused_activations = ("leaky_relu", "hardswish", "hardsigmoid", "relu6")

    def __init__(self, spec: ConvSpec, weight, bias, blocked: tuple[bool, bool], layout=None, threads: int = 1):
        super().__init__(spec, weight, bias, layout)
        if spec.groups != 1:
            raise TacticSpecError(f"{self.name}: needs an ungrouped conv, got groups {spec.groups}")
        self.conv = self._kernel_class()(
            np.asarray(weight, np.float32), self.bias, spec.stride, spec.padding, spec.dilation, **_epilogue(spec),
            blocked_in=blocked[0], blocked_out=blocked[1])
        self.conv.wq = self._laid_out("wq", self.conv.wq.shape, lambda: self.conv.wq)
        self.wq = self.conv.wq   # (64-byte aligned by the kernel: a restored layout may not be)
        self.x_shape = _blocked(spec.x_shape) if blocked[0] else spec.x_shape
        self.out_shape = _blocked(spec.out_shape) if blocked[1] else spec.out_shape
        self.threads = threads

    @staticmethod
    def _kernel_class():
        from srcore.plugin import simd_dense_nchwc
        return simd_dense_nchwc.NchwcDenseConv

    def _run(self, x, out, residual):
        self.conv(x, out, residual, threads=self.threads)


class ConvNchwcHalvesTactic(ConvNchwcTactic):
    """:class:`ConvNchwcTactic` (same layouts, packed weight and bits) on 8-lane register tiles of
    12 accumulators (``srcore.plugin.simd_dense_nchwc_halves``), where the 16-lane tiles' 24 (48
    ``ymm``) spill without AVX-512. A candidate everywhere, timed beside it."""
    name = "conv_nchw16c_h8"

    @staticmethod
    def _kernel_class():
        from srcore.plugin import simd_dense_nchwc_halves
        return simd_dense_nchwc_halves.HalvesNchwcDenseConv


class ConvNchwcPlanesTactic(ConvNchwcTactic):
    """:class:`ConvNchwcTactic` with NCHW on both sides, a candidate of plain NCHW layers
    (``conv/tactics.py``): no blocked tensor between layers, so it stays with the layout off."""
    name = "conv_nchwc_planes"

    def __init__(self, spec: ConvSpec, weight, bias, layout=None, threads: int = 1):
        super().__init__(spec, weight, bias, (False, False), layout, threads)


class ConvNchwcPlanesHalvesTactic(ConvNchwcPlanesTactic):
    """:class:`ConvNchwcPlanesTactic` on the 8-lane tiles (:class:`ConvNchwcHalvesTactic`)."""
    name = "conv_nchwc_planes_h8"
    _kernel_class = staticmethod(ConvNchwcHalvesTactic._kernel_class)


def _clamp(spec: ConvSpec) -> dict:
    """The clamp of relu / relu6 (``lo``, ``hi``), fused into the kernels' stores."""
    return {"lo": 0.0 if spec.relu or spec.activation == "relu6" else -math.inf,
            "hi": 6.0 if spec.activation == "relu6" else math.inf}


def nchwc_tactic_builders(spec: ConvSpec, weight, bias, blocked: tuple[bool, bool], threads: int = 1):
    """``(name, build)`` of the tactic for a conv layer with an NCHW16c side (one per layer kind)."""
    if spec.groups == 1 and (spec.kernel, spec.stride, spec.padding) != ((1, 1), (1, 1), (0, 0)):
        # on one thread at any count: its split is its OpenMP twins' (nchwc_split.py, offered beside it
        # at more than one intra-op thread and timed). On srcore.conv's Python team it was ungoverned and
        # its worker a third thread beside the caller and libgomp's worker, which spins after the
        # engine's OpenMP regions: unet_small at 2 threads (2026-11-28, loaded 2-vCPU Sapphire Rapids,
        # per-thread schedstat) had that worker waiting for a core in 196-199 of 200 calls, 0-2 calls
        # of 200 clean; built on one thread, 107-152 clean
        dense = [(ConvNchwcTactic.name, lambda layout=None: ConvNchwcTactic(
            spec, weight, bias, blocked, layout, 1)),
                 (ConvNchwcHalvesTactic.name, lambda layout=None: ConvNchwcHalvesTactic(
            spec, weight, bias, blocked, layout, 1))]
        if blocked == (False, True) and not spec.residual:   # (the stem kernel: no input copy, wins on few channels)
            dense.append((DenseNchwcTactic.name, lambda layout=None: DenseNchwcTactic(
                spec, weight, bias, blocked, layout, threads)))
            dense.append((DenseNchwcHalvesTactic.name, lambda layout=None: DenseNchwcHalvesTactic(
                spec, weight, bias, blocked, layout, threads)))
            if len(spec.x_shape) == 4:   # (at any thread count: its split is tile_split.py's twin)
                dense.append((DenseTileTactic.name, lambda layout=None: DenseTileTactic(spec, weight, bias, layout)))
        return dense
    if spec.groups == 1:
        out = [(PointwiseNchwcTactic.name, lambda layout=None: PointwiseNchwcTactic(
            spec, weight, bias, blocked, layout, threads)),
               (PointwiseNchwcHalvesTactic.name, lambda layout=None: PointwiseNchwcHalvesTactic(
            spec, weight, bias, blocked, layout, threads))]
        if not blocked[1] and not spec.residual and len(spec.x_shape) == 4:
            # NCHW out on the SGEMM's tiles (at any thread count: its split is tile_split.py's twin; left
            # out at 2 threads, a 2-thread build ran detection_head's 64 -> 75 head on the 16x16-transposing
            # 1x1 kernel at ~2x this one's time)
            out.append((PointwiseSgemmTactic.name, lambda layout=None: PointwiseSgemmTactic(
                spec, weight, bias, blocked[0], layout)))
        return out
    depthwise = [(DepthwiseNchwcTactic.name, lambda layout=None: DepthwiseNchwcTactic(
        spec, weight, bias, blocked, layout, threads))]
    if tuple(blocked) == (True, True):
        depthwise.append((DepthwiseNchwcHalvesTactic.name, lambda layout=None: DepthwiseNchwcHalvesTactic(
            spec, weight, bias, blocked, layout, threads)))
    return depthwise
