"""Reduction kernels: out variants (tuples of outs for (values, indices) results)."""
from __future__ import annotations

from srcore.plugin import Kernel

from . import ALL, FLOATS, NUMERIC, SMALL_INTS, WIDE_UINTS, family

_WIDE = ALL + SMALL_INTS

_k = family("reduce")

KERNELS: list[Kernel] = [
    _k("aten::sum", "sum", _WIDE), _k("aten::sum.dim_IntList", "sum", _WIDE),
    _k("aten::mean", "mean", NUMERIC), _k("aten::mean.dim", "mean", NUMERIC),
    _k("aten::prod", "prod", _WIDE), _k("aten::prod.dim_int", "prod", _WIDE),
    _k("aten::amax", "amax", _WIDE), _k("aten::amin", "amin", _WIDE),
    _k("aten::max", "max", ALL), _k("aten::min", "min", ALL),
    _k("aten::max.dim", "max", _WIDE), _k("aten::min.dim", "min", _WIDE),
    _k("aten::argmax", "argmax", _WIDE), _k("aten::argmin", "argmin", _WIDE),
    _k("aten::all", "all", ALL), _k("aten::all.dim", "all", ALL), _k("aten::all.dims", "all", ALL),
    _k("aten::any", "any", ALL), _k("aten::any.dim", "any", ALL), _k("aten::any.dims", "any", ALL),
    _k("aten::norm.Scalar", "norm", FLOATS), _k("aten::norm.ScalarOpt_dim", "norm", FLOATS),
    _k("aten::norm.ScalarOpt_dim_dtype", "norm", FLOATS), _k("aten::norm.ScalarOpt_dtype", "norm", FLOATS),
    _k("aten::linalg_vector_norm", "linalg_vector_norm", FLOATS),
    _k("aten::std", "std", FLOATS), _k("aten::std.dim", "std", FLOATS), _k("aten::std.correction", "std", FLOATS),
    _k("aten::var", "var", FLOATS), _k("aten::var.dim", "var", FLOATS), _k("aten::var.correction", "var", FLOATS),
    _k("aten::cumsum", "cumsum", _WIDE), _k("aten::cumprod", "cumprod", ALL),
    _k("aten::median", "median", NUMERIC), _k("aten::median.dim", "median", NUMERIC),
    _k("aten::logsumexp", "logsumexp", NUMERIC),
    _k("aten::sort", "sort", NUMERIC), _k("aten::sort.stable", "sort", NUMERIC),
    _k("aten::topk", "topk", NUMERIC + WIDE_UINTS),
    # the compiled heap selection (kernels/jit_topk.py) first; its matcher declines short rows,
    # other dtypes and non-constant k / dim / largest, which the numpy kernel above takes
    Kernel("aten::topk", "cpu", "out", ("float32", "float64", "int32", "int64"),
           "srcore_cpu.kernels.reduce:topk", matcher="srcore_cpu.kernels.reduce:topk_matcher", priority=2),
]
