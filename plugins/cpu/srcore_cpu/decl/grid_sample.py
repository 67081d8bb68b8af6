"""Kernel declarations of F.grid_sample / F.affine_grid (no numpy import here)."""
from __future__ import annotations

from srcore.plugin import Kernel

from . import FLOATS, family

_k = family("grid_sample")

KERNELS: list[Kernel] = [
    _k("aten::grid_sampler", "grid_sampler", FLOATS), _k("aten::grid_sampler_2d", "grid_sampler", FLOATS),
    _k("aten::affine_grid_generator", "affine_grid_generator", FLOATS),
]
