"""Kernel declarations of the linalg family (no numpy import here)."""
from __future__ import annotations

from srcore.plugin import Kernel

_M = "srcore_cpu.kernels.linalg:"
FLOATS = ("float32", "float64")
NUMERIC = ("float32", "float64", "int64", "int32")

KERNELS: list[Kernel] = [
    Kernel("aten::linear", "cpu", "out", FLOATS, _M + "linear", matcher=_M + "linear_matcher"),
    Kernel("aten::addmm", "cpu", "out", FLOATS, _M + "addmm", matcher=_M + "addmm_matcher"),
    Kernel("aten::baddbmm", "cpu", "out", FLOATS, _M + "baddbmm"),
    Kernel("aten::matmul", "cpu", "out", NUMERIC, _M + "matmul", matcher=_M + "matmul_matcher"),
    Kernel("aten::mm", "cpu", "out", NUMERIC, _M + "mm", matcher=_M + "mm_matcher"),
    Kernel("aten::bmm", "cpu", "out", NUMERIC, _M + "bmm", matcher=_M + "bmm_matcher"),
    Kernel("aten::dot", "cpu", "out", NUMERIC, _M + "dot"),
    Kernel("aten::outer", "cpu", "out", NUMERIC, _M + "outer"),
    Kernel("aten::cosine_similarity", "cpu", "out", FLOATS, _M + "cosine_similarity"),
    Kernel("aten::linalg_norm", "cpu", "out", FLOATS, _M + "linalg_norm"),
    Kernel("aten::linalg_norm.ord_str", "cpu", "out", FLOATS, _M + "linalg_norm"),
    Kernel("aten::cdist", "cpu", "out", FLOATS, _M + "cdist"),
    Kernel("aten::_cdist_forward", "cpu", "out", FLOATS, _M + "cdist"),
    Kernel("aten::pairwise_distance", "cpu", "out", FLOATS, _M + "pairwise_distance"),
    # (complex too: spectral layers multiply modes by complex weights; np.einsum computes them in C)
    Kernel("aten::einsum", "cpu", "out", NUMERIC + ("complex64", "complex128"), _M + "einsum"),
]
