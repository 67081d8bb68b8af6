"""srcore's explicit-SIMD float32 direct convolution, shared by the backends:
``srcore.plugin.simd_conv`` is :mod:`srcore.conv.direct`. numba is imported on first use."""
from . import direct

__all__ = ["direct"]
