"""srcore's explicit-SIMD float32 convolutions, shared by the backends: ``srcore.plugin.simd_conv``
is :mod:`srcore.conv.direct` (dense and grouped), ``srcore.plugin.simd_depthwise``
:mod:`srcore.conv.depthwise`,
``srcore.plugin.simd_pointwise`` :mod:`srcore.conv.pointwise` (1x1). numba is imported on first use."""
from . import depthwise, direct, pointwise

__all__ = ["depthwise", "direct", "pointwise"]
