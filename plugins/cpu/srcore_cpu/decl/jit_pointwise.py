"""Compiled one-pass activations (``kernels/jit_pointwise.py``, numba): priority 2, so they are tried
first; their matcher declines small or non-float32 nodes, which the numpy kernels then take."""
from __future__ import annotations

from srcore.plugin import Kernel

_M = "srcore_cpu.kernels.jit_pointwise:"
_OPS = ("silu", "sigmoid", "gelu", "hardsigmoid", "hardswish", "leaky_relu", "hardtanh", "relu6")

KERNELS: list[Kernel] = (
    [Kernel(f"aten::{op}", "cpu", "out", ("float32",), _M + "make_pointwise", matcher=_M + "pointwise_matcher",
            priority=2) for op in _OPS]
    + [Kernel(f"aten::{op}_", "cpu", "native", ("float32",), _M + "make_pointwise",
              matcher=_M + "pointwise_matcher", priority=2) for op in _OPS]
)
