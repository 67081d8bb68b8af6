"""Kernel declarations of the norm family (no numpy import here)."""
from __future__ import annotations

from srcore.plugin import Kernel

_M = "srcore_cpu.kernels.norm:"
FLOATS = ("float32", "float64")

KERNELS: list[Kernel] = [
    Kernel("aten::batch_norm", "cpu", "out", FLOATS, _M + "batch_norm", matcher=_M + "batch_norm_matcher"),
    Kernel("aten::_native_batch_norm_legit_no_training", "cpu", "out", FLOATS,
           _M + "_native_batch_norm_legit_no_training"),
    Kernel("aten::native_batch_norm", "cpu", "out", FLOATS, _M + "native_batch_norm"),
    Kernel("aten::_native_batch_norm_legit", "cpu", "out", FLOATS, _M + "_native_batch_norm_legit"),
    Kernel("aten::_native_batch_norm_legit.no_stats", "cpu", "out", FLOATS,
           _M + "_native_batch_norm_legit_no_stats"),
    Kernel("aten::layer_norm", "cpu", "out", FLOATS, _M + "layer_norm", matcher=_M + "layer_norm_matcher"),
    Kernel("aten::native_layer_norm", "cpu", "out", FLOATS, _M + "native_layer_norm"),
    Kernel("aten::rms_norm", "cpu", "out", FLOATS, _M + "rms_norm"),
    # the compiled group norm (kernels/jit_norm.py) first; its matchers decline small or
    # non-float32 nodes, which the numpy kernels below take
    Kernel("aten::native_group_norm", "cpu", "out", ("float32",), _M + "native_group_norm",
           matcher=_M + "native_group_norm_matcher", priority=2),
    Kernel("aten::group_norm", "cpu", "out", ("float32",), _M + "group_norm",
           matcher=_M + "group_norm_matcher", priority=2),
    Kernel("aten::instance_norm", "cpu", "out", ("float32",), _M + "instance_norm",
           matcher=_M + "instance_norm_matcher", priority=2),
    Kernel("aten::native_group_norm", "cpu", "out", FLOATS, _M + "native_group_norm"),
    Kernel("aten::group_norm", "cpu", "out", FLOATS, _M + "group_norm"),
    Kernel("aten::instance_norm", "cpu", "out", FLOATS, _M + "instance_norm"),
]
