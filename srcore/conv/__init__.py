"""srcore's explicit-SIMD float32 convolutions, shared by the backends: ``srcore.plugin.simd_conv``
is :mod:`srcore.conv.direct` (dense and grouped), ``srcore.plugin.simd_depthwise``
:mod:`srcore.conv.depthwise`, ``srcore.plugin.simd_depthwise_blocked``
:mod:`srcore.conv.depthwise_blocked` (16 channels a vector),
``srcore.plugin.simd_pointwise`` :mod:`srcore.conv.pointwise` (1x1). numba is imported on first use."""
from . import depthwise, depthwise_blocked, direct, pointwise

__all__ = ["depthwise", "depthwise_blocked", "direct", "pointwise"]
