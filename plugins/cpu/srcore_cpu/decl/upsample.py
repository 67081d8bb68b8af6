"""Kernel declarations of the upsample family (no numpy import here)."""
from __future__ import annotations

from srcore.plugin import Kernel

_M = "srcore_cpu.kernels.upsample:"
FLOATS = ("float32", "float64")

#: every upsample op srcore-cpu runs, each with its classic and its ``.vec`` overload
_OPS = ("nearest1d", "nearest2d", "nearest3d", "linear1d", "bilinear2d", "trilinear3d", "bicubic2d")

KERNELS: list[Kernel] = [
    # the compiled bilinear kernel (kernels/jit_upsample.py) first; its matcher declines small or
    # non-float32 nodes, which the numpy kernels below take
    Kernel(f"aten::upsample_bilinear2d{ov}", "cpu", "out", ("float32",), f"{_M}upsample_bilinear2d{impl}",
           matcher=_M + "bilinear2d_matcher", priority=2)
    for ov, impl in (("", ""), (".vec", "_vec"))
] + [
    # and the compiled bicubic kernel (kernels/jit_upsample.py), declined as the bilinear one
    Kernel(f"aten::upsample_bicubic2d{ov}", "cpu", "out", ("float32",), f"{_M}upsample_bicubic2d{impl}",
           matcher=_M + "bicubic2d_matcher", priority=2)
    for ov, impl in (("", ""), (".vec", "_vec"))
] + [
    # nearest 2-D split by planes over the intra-op threads where that times faster at load; its
    # matcher declines everything else (1 thread, small or dynamic nodes), which the numpy kernel takes
    Kernel(f"aten::upsample_nearest2d{ov}", "cpu", "out", ("float32",), f"{_M}upsample_nearest2d{impl}",
           matcher=_M + "nearest2d_matcher", priority=2)
    for ov, impl in (("", ""), (".vec", "_vec"))
] + [
    Kernel(f"aten::upsample_{op}{ov}", "cpu", "out", FLOATS, f"{_M}upsample_{op}{impl}")
    for op in _OPS for ov, impl in (("", ""), (".vec", "_vec"))
] + [
    Kernel(f"aten::__interpolate{ov}", "cpu", "out", FLOATS, _M + "__interpolate")
    for ov in ("", ".scale_list", ".size_list", ".size_list_scale_list")
] + [
    Kernel(f"aten::_upsample_nearest_exact{nd}{ov}", "cpu", "out", FLOATS, f"{_M}_upsample_nearest_exact{nd}{impl}")
    for nd in ("1d", "2d", "3d") for ov, impl in (("", ""), (".vec", "_vec"))
]
