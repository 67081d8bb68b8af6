"""The conv wing: 2-D convolution and pooling tactics, float32 NCHW, static shapes.

:mod:`.spec` (``ConvSpec``, the ``ConvTactic`` base), :mod:`.tactics` (every algorithm that applies
to a spec: ``conv_tactics``/``conv_tactic_builders``), the algorithms :mod:`.gemm` (1x1, im2col),
:mod:`.packed`, :mod:`.winograd`, :mod:`.winograd_packed`, :mod:`.depthwise`, :mod:`.simd_direct`, :mod:`.simd_1x1`, :mod:`.conv_pool`
(conv + max pool in one pass), and :mod:`.pool`. They know nothing of engines or layers.
"""
from __future__ import annotations

from .conv_pool import PackedConvMaxPool
from .depthwise import (DepthwiseBlockedTactic, DepthwiseChannelsLastTactic, DepthwiseDirectTactic,
                        DepthwiseSimd8Tactic, DepthwiseSimdTactic)
from .gemm import Gemm1x1Tactic, Im2colGemmTactic
from .packed import PackedGemmTactic
from .pool import AdaptiveAvgPool2d, AvgPool2d, MaxPool2d
from .simd_1x1 import Simd1x1Tactic
from .simd_direct import (SimdDirect8Tactic, SimdDirectOcTactic, SimdDirectRowsTactic, SimdDirectTactic,
                          SimdDirectTiledTactic)
from .spec import ConvSpec, ConvTactic
from .tactics import conv_tactic_builders, conv_tactics
from .winograd import WinogradTactic
from .winograd_packed import WinogradPackedTactic

__all__ = ["ConvSpec", "ConvTactic", "conv_tactics", "conv_tactic_builders", "Gemm1x1Tactic", "Im2colGemmTactic",
           "PackedGemmTactic", "WinogradTactic", "WinogradPackedTactic", "DepthwiseDirectTactic",
           "DepthwiseChannelsLastTactic", "DepthwiseSimdTactic", "DepthwiseSimd8Tactic", "DepthwiseBlockedTactic",
           "SimdDirectTactic", "SimdDirectRowsTactic", "SimdDirectOcTactic", "SimdDirect8Tactic",
           "SimdDirectTiledTactic", "Simd1x1Tactic",
           "PackedConvMaxPool", "MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d"]
