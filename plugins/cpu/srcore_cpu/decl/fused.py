"""Kernel declarations of srcore:: fused ops (schemas in srcore/ops/srcore.yaml; no numpy import here)."""
from __future__ import annotations

from srcore.plugin import Kernel

_M = "srcore_cpu.kernels.fused:"
FLOATS = ("float32", "float64")


def _k(name, matcher=True, module=_M):
    return Kernel(f"srcore::{name}", "cpu", "out", FLOATS, module + name,
                  matcher=module + name + "_matcher" if matcher else None)


KERNELS: list[Kernel] = [
    _k("linear_relu"), _k("linear_gelu"), _k("linear_silu"),
    _k("conv2d_relu", module="srcore_cpu.kernels.fused_conv:"),
    _k("conv2d_add_relu", module="srcore_cpu.kernels.fused_conv:"), _k("add_relu", matcher=False),
]
