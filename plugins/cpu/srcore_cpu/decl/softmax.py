"""Kernel declarations of the softmax family (no numpy import here)."""
from __future__ import annotations

from srcore.plugin import Kernel

_M = "srcore_cpu.kernels.softmax:"
FLOATS = ("float32", "float64")

KERNELS: list[Kernel] = [
    Kernel("aten::softmax.int", "cpu", "out", FLOATS, _M + "softmax", matcher=_M + "softmax_matcher"),
    Kernel("aten::log_softmax.int", "cpu", "out", FLOATS, _M + "log_softmax", matcher=_M + "log_softmax_matcher"),
    Kernel("aten::_softmax", "cpu", "out", FLOATS, _M + "_softmax", matcher=_M + "softmax_matcher"),
    Kernel("aten::_log_softmax", "cpu", "out", FLOATS, _M + "_log_softmax", matcher=_M + "log_softmax_matcher"),
]
