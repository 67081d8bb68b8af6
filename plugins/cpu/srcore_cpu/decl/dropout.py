"""Kernel declarations of the dropout family (no numpy import here)."""
from __future__ import annotations

from srcore.plugin import Kernel

_M = "srcore_cpu.kernels.dropout:"

KERNELS: list[Kernel] = [
    # native: the result is the input itself (torch returns its input in eval mode too)
    Kernel(f"aten::{op}", "cpu", "native", ("*",), _M + "dropout", matcher=_M + "dropout_matcher")
    for op in ("dropout", "feature_dropout", "alpha_dropout", "feature_alpha_dropout")
]
