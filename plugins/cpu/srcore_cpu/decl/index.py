"""Indexing kernels: gather/scatter/index_select (out variants), data-dependent shapes (natives)."""
from __future__ import annotations

from srcore.plugin import Kernel

from . import ANY, family

_k = family("index")

KERNELS: list[Kernel] = [
    _k("aten::gather", "gather", ANY),
    _k("aten::index_select", "index_select", ANY),
    _k("aten::bucketize.Tensor", "bucketize", ANY), _k("aten::bucketize.Scalar", "bucketize", ANY),
    _k("aten::searchsorted.Tensor", "searchsorted", ANY), _k("aten::searchsorted.Scalar", "searchsorted", ANY),
    # the compiled one (kernels/jit_binning.py) first; its matcher declines what it does not take
    Kernel("aten::searchsorted.Tensor", "cpu", "out", ANY, "srcore_cpu.kernels.index:searchsorted",
           matcher="srcore_cpu.kernels.index:searchsorted_matcher", priority=2),
    _k("aten::diag", "diag", ANY),
    _k("aten::scatter.src", "scatter", ANY), _k("aten::scatter.value", "scatter", ANY),
    _k("aten::scatter.reduce", "scatter", ANY), _k("aten::scatter.value_reduce", "scatter", ANY),
    _k("aten::scatter_.src", "scatter_", ANY, kind="native"),
    _k("aten::scatter_.value", "scatter_", ANY, kind="native"),
    _k("aten::scatter_add", "scatter_add", ANY), _k("aten::scatter_add_", "scatter_add_", ANY, kind="native"),
    _k("aten::index_add", "index_add", ANY),
    _k("aten::index_fill.int_Scalar", "index_fill", ANY), _k("aten::index_fill.int_Tensor", "index_fill", ANY), _k("aten::index_add_", "index_add_", ANY, kind="native"),
    _k("aten::index.Tensor", "index", ANY, kind="native"),
    _k("aten::index.Tensor_hacked_twin", "index", ANY, kind="native"),
    _k("aten::masked_select", "masked_select", ANY, kind="native"),
    _k("aten::nonzero", "nonzero", ANY, kind="native"),
    _k("aten::where", "where_nonzero", ANY, kind="native"),
    _k("aten::index_put", "index_put", ANY),
    _k("aten::index_put_", "index_put_", ANY, kind="native"),
    # native: with num_classes=-1 the output shape depends on the values
    _k("aten::one_hot", "one_hot", ("int64",), kind="native"),
]
