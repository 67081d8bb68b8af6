"""Kernel declarations of srcore:: fused linear + elementwise ops (kernels/fused_elementwise.py)."""
from __future__ import annotations

from srcore.plugin import Kernel

_M = "srcore_cpu.kernels.fused_elementwise:"

KERNELS: list[Kernel] = [
    Kernel(f"srcore::{name}", "cpu", "out", ("float32", "float64"), _M + name, matcher=_M + name + "_matcher")
    for name in ("linear_tanh", "linear_sigmoid", "ew_chain")
]
