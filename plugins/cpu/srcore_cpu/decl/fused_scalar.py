"""Kernel declarations of srcore:: fused ops ending in a scalar (kernels/fused_scalar.py)."""
from __future__ import annotations

from srcore.plugin import Kernel

KERNELS: list[Kernel] = [
    Kernel("srcore::sum_gt", "cpu", "native", ("float32", "float64"), "srcore_cpu.kernels.fused_scalar:sum_gt"),
]
