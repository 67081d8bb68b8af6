"""The float32-fast exact GELU (``kernels/activation_fast.py``); priority 1 so it wins over
``decl/activation.py``'s scipy-erf ``aten::gelu`` deterministically (no numpy import here)."""
from __future__ import annotations

from srcore.plugin import Kernel

KERNELS: list[Kernel] = [
    Kernel("aten::gelu", "cpu", "out", ("float32", "float64"), "srcore_cpu.kernels.activation_fast:gelu",
           priority=1),
]
