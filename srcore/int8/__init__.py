"""srcore's exact int8 GEMM (``u8 x s8 -> s32``) and its fused requantization, shared by the
backends: ``srcore.plugin.int8_gemm`` is :mod:`srcore.int8.gemm` (numba, imported on first use),
``srcore.plugin.int8_means`` :mod:`srcore.int8.means` (torch's roundings of quantized means)."""
from . import gemm, means

__all__ = ["gemm", "means"]
