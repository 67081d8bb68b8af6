"""Kernel declarations of the pool family (no numpy import here)."""
from __future__ import annotations

from srcore.plugin import Kernel

_M = "srcore_cpu.kernels.pool:"
FLOATS = ("float32", "float64")

KERNELS: list[Kernel] = [
    # the matcher fixes the intra-op thread count at load (parallel.py)
    Kernel("aten::max_pool1d", "cpu", "out", FLOATS, _M + "max_pool1d", matcher=_M + "max_pool_matcher"),
    Kernel("aten::max_pool2d", "cpu", "out", FLOATS + ("int8", "uint8"), _M + "max_pool2d", matcher=_M + "max_pool_matcher"),
    Kernel("aten::max_pool3d", "cpu", "out", FLOATS, _M + "max_pool3d"),
    Kernel("aten::avg_pool1d", "cpu", "out", FLOATS, _M + "avg_pool1d"),
    Kernel("aten::avg_pool3d", "cpu", "out", FLOATS, _M + "avg_pool3d"),
    Kernel("aten::adaptive_avg_pool3d", "cpu", "out", FLOATS, _M + "adaptive_avg_pool3d"),
    Kernel("aten::_adaptive_avg_pool2d", "cpu", "out", FLOATS, _M + "adaptive_avg_pool2d"),
    Kernel("aten::max_pool3d_with_indices", "cpu", "out", FLOATS + ("int64",), _M + "max_pool3d_with_indices"),
    Kernel("aten::avg_pool2d", "cpu", "out", FLOATS, _M + "avg_pool2d"),
    Kernel("aten::adaptive_avg_pool1d", "cpu", "out", FLOATS, _M + "adaptive_avg_pool1d",
           matcher=_M + "adaptive_avg_pool_matcher"),
    Kernel("aten::adaptive_avg_pool2d", "cpu", "out", FLOATS, _M + "adaptive_avg_pool2d",
           matcher=_M + "adaptive_avg_pool_matcher"),
    # indices are int64: a dispatch dtype of the node
    Kernel("aten::max_pool1d_with_indices", "cpu", "out", FLOATS + ("int64",), _M + "max_pool1d_with_indices"),
    Kernel("aten::max_pool2d_with_indices", "cpu", "out", FLOATS + ("int64",), _M + "max_pool2d_with_indices"),
    Kernel("aten::adaptive_max_pool2d", "cpu", "out", FLOATS + ("int64",), _M + "adaptive_max_pool2d"),
    Kernel("aten::adaptive_max_pool1d", "cpu", "out", FLOATS + ("int64",), _M + "adaptive_max_pool1d"),
    # the compiled ones (kernels/jit_pool_indices.py) first; their matchers decline other dtypes and
    # ranks, which the numpy kernels above take
    Kernel("aten::max_pool2d_with_indices", "cpu", "out", FLOATS + ("int64",), _M + "max_pool2d_with_indices",
           matcher=_M + "max_pool2d_with_indices_matcher", priority=2),
    Kernel("aten::adaptive_max_pool2d", "cpu", "out", FLOATS + ("int64",), _M + "adaptive_max_pool2d",
           matcher=_M + "adaptive_max_pool2d_matcher", priority=2),
    # kernels/jit_avg_pool.py, the same way
    Kernel("aten::avg_pool3d", "cpu", "out", FLOATS, _M + "avg_pool3d", matcher=_M + "avg_pool3d_matcher", priority=2),
    Kernel("aten::avg_pool2d", "cpu", "out", FLOATS, _M + "avg_pool2d", matcher=_M + "avg_pool2d_matcher", priority=2),
]
