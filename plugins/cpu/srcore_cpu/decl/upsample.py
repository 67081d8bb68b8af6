"""Kernel declarations of the upsample family (no numpy import here)."""
from __future__ import annotations

from srcore.plugin import Kernel

_M = "srcore_cpu.kernels.upsample:"
FLOATS = ("float32", "float64")

KERNELS: list[Kernel] = [
    Kernel("aten::upsample_nearest2d", "cpu", "out", FLOATS, _M + "upsample_nearest2d"),
    Kernel("aten::upsample_nearest2d.vec", "cpu", "out", FLOATS, _M + "upsample_nearest2d_vec"),
    Kernel("aten::upsample_bilinear2d", "cpu", "out", FLOATS, _M + "upsample_bilinear2d"),
    Kernel("aten::upsample_bilinear2d.vec", "cpu", "out", FLOATS, _M + "upsample_bilinear2d_vec"),
] + [
    Kernel(f"aten::__interpolate{ov}", "cpu", "out", FLOATS, _M + "__interpolate")
    for ov in ("", ".scale_list", ".size_list", ".size_list_scale_list")
]
