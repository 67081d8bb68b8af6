"""srcore's exact int8 GEMM (``u8 x s8 -> s32``) and its fused requantization, shared by the
backends: ``srcore.plugin.int8_gemm`` is :mod:`srcore.int8.gemm` (numba, imported on first use),
``srcore.plugin.int8_means`` :mod:`srcore.int8.means` (torch's roundings of quantized means),
``srcore.plugin.int8_onednn`` :mod:`srcore.int8.onednn` (oneDNN's requantization)."""
from . import gemm, means, onednn

__all__ = ["gemm", "means", "onednn"]
