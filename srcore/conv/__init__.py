"""srcore's explicit-SIMD float32 convolutions, shared by the backends: ``srcore.plugin.simd_conv``
is :mod:`srcore.conv.direct` (dense and grouped), ``srcore.plugin.simd_depthwise``
:mod:`srcore.conv.depthwise`, ``srcore.plugin.simd_depthwise_blocked``
:mod:`srcore.conv.depthwise_blocked` (16 channels a vector),
``srcore.plugin.simd_pointwise`` :mod:`srcore.conv.pointwise` (1x1), ``srcore.plugin.nchwc``
:mod:`srcore.conv.nchwc` (the NCHW16c layout), ``srcore.plugin.simd_pointwise_blocked``
:mod:`srcore.conv.pointwise_blocked` (1x1 with either side NCHW16c) and
``srcore.plugin.simd_dense_blocked`` :mod:`srcore.conv.dense_blocked` (dense, NCHW into NCHW16c),
``srcore.plugin.simd_dense_nchwc`` :mod:`srcore.conv.dense_nchwc` (dense, either side NCHW16c),
``srcore.plugin.simd_pointwise_halves`` :mod:`srcore.conv.pointwise_halves`,
``srcore.plugin.simd_halves`` :mod:`srcore.conv.halves` and ``srcore.plugin.simd_dense_nchwc_halves``
:mod:`srcore.conv.dense_nchwc_halves` (the NCHW16c kernels on 8-lane vectors);
``srcore.plugin.conv_transpose`` :mod:`srcore.conv.transpose` (transposed, any rank).
numba is imported on first use."""
from . import (dense_blocked, dense_nchwc, dense_nchwc_halves, depthwise, depthwise_blocked, direct, halves, nchwc,
               pointwise, pointwise_blocked, pointwise_halves, transpose)

__all__ = ["dense_blocked", "dense_nchwc", "dense_nchwc_halves", "depthwise", "depthwise_blocked", "direct", "halves",
           "nchwc", "pointwise", "pointwise_blocked", "pointwise_halves", "transpose"]
