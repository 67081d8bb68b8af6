"""The depthwise conv tactics (groups == in channels): ``depthwise_direct``, a direct numba loop per
output row vectorized over its columns; ``depthwise_channels_last``, the same loop vectorized over
channels on a padded channels-last copy of the input; ``depthwise_simd``, srcore's explicit-SIMD
depthwise kernel (``srcore.plugin.simd_depthwise``: 8 vectors of output pixels in registers) at the
CPU's widest vectors, and ``depthwise_simd8`` the same at 8 lanes where that is 16 (a 7-wide row
fills 7 of 8 lanes, not 7 of 16); ``depthwise_simd_blocked``, the channel-blocked kernel
(``srcore.plugin.simd_depthwise_blocked``: 16 channels of a pixel in a vector). Which is fastest
depends on the plane width against the channel count (wide early layers vs MobileNet's 7x7 / 14x14
late ones): the builder times them all on the real shape."""
from __future__ import annotations

import math

import numpy as np

from ..errors import TacticSpecError
from ..kernels import conv as _k
from .spec import ConvSpec, ConvTactic


class DepthwiseDirectTactic(ConvTactic):
    """groups == in channels (out channels a multiple of them): a direct numba loop, one
    multiply-add pass per tap over each output row, the epilogue on the row."""
    name = "depthwise_direct"

    def __init__(self, spec: ConvSpec, weight, bias, layout=None):
        super().__init__(spec, weight, bias, layout)
        if spec.groups != spec.x_shape[1]:
            raise TacticSpecError(f"{self.name}: needs groups == in channels ({spec.x_shape[1]}), "
                                  f"got groups {spec.groups}")
        self._lay_out_weight(weight)

    def _lay_out_weight(self, weight):
        shape = (self.spec.out_channels, *self.spec.kernel)
        self.w = self._laid_out("w", shape, lambda: np.ascontiguousarray(
            np.asarray(weight, np.float32).reshape(shape)))

    def _run(self, x, out, residual):
        s = self.spec
        res = out if residual is None else residual
        _k.depthwise(x, self.w, self.bias, res, residual is not None, s.relu, out, s.stride[0], s.stride[1],
                     s.padding[0], s.padding[1], s.dilation[0], s.dilation[1], 0, s.out_channels)


class DepthwiseChannelsLastTactic(DepthwiseDirectTactic):
    """groups == in channels: per image a padded (H, W, C) copy of the input, then per output pixel
    and tap one multiply-add over the contiguous channels (:func:`~..kernels.conv.depthwise_channels_last`)."""
    name = "depthwise_channels_last"

    def _lay_out_weight(self, weight):
        shape = (*self.spec.kernel, self.spec.out_channels)
        self.w = self._laid_out("w", shape, lambda: np.ascontiguousarray(
            np.asarray(weight, np.float32).reshape(self.spec.out_channels, *self.spec.kernel).transpose(1, 2, 0)))

    def _run(self, x, out, residual):
        s = self.spec
        res = out if residual is None else residual
        _k.depthwise_channels_last(x, self.w, self.bias, res, residual is not None, s.relu, out, s.stride[0],
                                   s.stride[1], s.padding[0], s.padding[1], s.dilation[0], s.dilation[1])


class DepthwiseSimdTactic(DepthwiseDirectTactic):
    """groups == in channels: srcore's explicit-SIMD depthwise kernel (:mod:`srcore.conv.depthwise`),
    channels split over ``threads``; weights as (O, kh * kw)."""
    name = "depthwise_simd"
    bound_run = True
    # (in the kernel's vector stores, with the separate pass's formulas: the same bits)
    fused_activations = ("leaky_relu", "hardswish", "hardsigmoid", "relu6")

    #: the vector width (None: the CPU's widest, :func:`srcore.plugin.simd_depthwise.lanes`)
    lanes: int | None = None

    def __init__(self, spec: ConvSpec, weight, bias, layout=None, threads: int = 1):
        super().__init__(spec, weight, bias, layout)
        from srcore.plugin import simd_depthwise

        self.conv = simd_depthwise.SimdDepthwiseConv(
            np.zeros((spec.out_channels, 1, *spec.kernel), np.float32), self.bias, spec.stride, spec.padding,
            spec.dilation, lanes_=self.lanes, **_epilogue(spec))
        self.conv.w = self.w.reshape(-1)
        self.threads = threads

    def _run(self, x, out, residual):
        self.conv(x, out, residual, threads=self.threads)


class DepthwiseSimd8Tactic(DepthwiseSimdTactic):
    """:class:`DepthwiseSimdTactic` at 8 lanes, offered where the CPU's vectors are 16 (AVX-512): on
    7-wide planes an 8-lane row wastes one lane, a 16-lane one nine."""
    name = "depthwise_simd8"
    lanes = 8


class DepthwiseBlockedTactic(DepthwiseDirectTactic):
    """groups == in channels == out channels: srcore's channel-blocked depthwise kernel
    (:mod:`srcore.conv.depthwise_blocked`), channel blocks split over ``threads``; weights as
    (O, kh * kw), the kernel's (blocks, taps, 16) packing made from them at construction."""
    name = "depthwise_simd_blocked"
    bound_run = True
    fused_activations = DepthwiseSimdTactic.fused_activations

    def __init__(self, spec: ConvSpec, weight, bias, layout=None, threads: int = 1):
        if spec.out_channels != spec.x_shape[1]:
            raise TacticSpecError(f"{self.name}: needs out channels == in channels ({spec.x_shape[1]}), "
                                  f"got {spec.out_channels}")
        super().__init__(spec, weight, bias, layout)
        from srcore.plugin import simd_depthwise_blocked

        self.conv = simd_depthwise_blocked.BlockedDepthwiseConv(
            self.w.reshape(spec.out_channels, 1, *spec.kernel), self.bias, spec.stride, spec.padding, spec.dilation,
            **_epilogue(spec))
        self.threads = threads

    def _run(self, x, out, residual):
        self.conv(x, out, residual, threads=self.threads)


def _epilogue(spec: ConvSpec) -> dict:
    """The SIMD depthwise kernels' fused epilogue arguments for ``spec``."""
    return {"lo": 0.0 if spec.relu or spec.activation == "relu6" else -math.inf,
            "hi": 6.0 if spec.activation == "relu6" else math.inf,
            "negative_slope": spec.negative_slope if spec.activation == "leaky_relu" else None,
            "activation": spec.activation if spec.activation in ("hardswish", "hardsigmoid") else None}
