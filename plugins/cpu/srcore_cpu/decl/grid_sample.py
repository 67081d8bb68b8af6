"""Kernel declarations of F.grid_sample / F.affine_grid (no numpy import here)."""
from __future__ import annotations

from srcore.plugin import Kernel

from . import FLOATS, family

_k = family("grid_sample")
_M = "srcore_cpu.kernels.grid_sample:"

KERNELS: list[Kernel] = [
    # the compiled float32 kernel (kernels/jit_grid_sample.py) first; its matcher declines other
    # dtypes, which the numpy kernel below takes
    *(Kernel(op, "cpu", "out", ("float32",), _M + "grid_sampler", matcher=_M + "grid_sampler_matcher", priority=2)
      for op in ("aten::grid_sampler", "aten::grid_sampler_2d")),
    _k("aten::grid_sampler", "grid_sampler", FLOATS), _k("aten::grid_sampler_2d", "grid_sampler", FLOATS),
    _k("aten::grid_sampler_3d", "grid_sampler", FLOATS),
    _k("aten::affine_grid_generator", "affine_grid_generator", FLOATS),
]
