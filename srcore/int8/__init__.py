"""srcore's exact int8 GEMM (``u8 x s8 -> s32``) and its fused requantization, shared by the
backends: ``srcore.plugin.int8_gemm`` is :mod:`srcore.int8.gemm`. numba is imported on first use."""
from . import gemm

__all__ = ["gemm"]
