"""Kernel declarations of the embedding family (no numpy import here)."""
from __future__ import annotations

from srcore.plugin import Kernel

KERNELS: list[Kernel] = [
    # dispatch dtypes are the weight's (and output's) and the indices'
    Kernel("aten::embedding", "cpu", "out", ("float32", "float64", "int64", "int32"),
           "srcore_cpu.kernels.embedding:embedding"),
]
