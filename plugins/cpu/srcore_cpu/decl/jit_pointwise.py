"""Compiled one-pass activations (``kernels/jit_pointwise.py``, numba): priority 2, so they are tried
first; their matcher (``kernels/pointwise_match.py``) declines small or non-float32 nodes, which
the numpy kernels then take."""
from __future__ import annotations

from srcore.plugin import Kernel

_IMPL = "srcore_cpu.kernels.jit_pointwise:make_pointwise"
_MATCH = "srcore_cpu.kernels.pointwise_match:pointwise_matcher"
_OPS = ("silu", "sigmoid", "gelu", "hardsigmoid", "hardswish", "leaky_relu", "hardtanh", "relu6")

KERNELS: list[Kernel] = (
    [Kernel(f"aten::{op}", "cpu", "out", ("float32",), _IMPL, matcher=_MATCH, priority=2) for op in _OPS]
    + [Kernel(f"aten::{op}_", "cpu", "native", ("float32",), _IMPL, matcher=_MATCH, priority=2) for op in _OPS]
)
