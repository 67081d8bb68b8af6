"""Matchers of the kernels whose dtypes list an index, mask or repeat-count dtype beside the quantized
ones (``index_select``'s int64 index, ``masked_fill``'s bool mask): by dtypes alone such a kernel would
also take a node whose tensors are all plain integers or bools (quantized_cpu comes first in the
default backend order), and fail there at run time. A matcher takes the node only if its ``self``
is quantized (or of a dtype not known at load); otherwise cpu's kernel runs it.

Imports no kernel module until a node matches, so that a float model's load stays as cheap.
"""
from __future__ import annotations

import importlib

from srcore.plugin import QDTYPES


def _when_self_quantized(ref: str):
    module, attr = ref.split(":")

    def matcher(info):
        dtype = getattr(info.args[0].type, "dtype", None)
        if dtype is not None and dtype not in QDTYPES:
            return None
        return getattr(importlib.import_module(f"srcore_quantized.kernels.{module}"), attr)

    matcher.__name__ = f"{attr}_matcher"
    return matcher


index_select = _when_self_quantized("shape:index_select_out")
index = _when_self_quantized("shape:index")
repeat_interleave = _when_self_quantized("shape:repeat_interleave")
masked_fill = _when_self_quantized("shape:masked_fill_out")
max_dim = _when_self_quantized("reduce:max_dim")
min_dim = _when_self_quantized("reduce:min_dim")
eq = _when_self_quantized("compare:eq_out")
ne = _when_self_quantized("compare:ne_out")
lt = _when_self_quantized("compare:lt_out")
le = _when_self_quantized("compare:le_out")
gt = _when_self_quantized("compare:gt_out")
ge = _when_self_quantized("compare:ge_out")
equal = _when_self_quantized("compare:equal")
fill_ = _when_self_quantized("shape:fill_")
index_put_ = _when_self_quantized("shape:index_put_")
index_put = _when_self_quantized("shape:index_put_out")


def sort_stable(info):
    """``sort.stable``: the stable kernel for a constant ``stable=True``, else the one that also takes
    torch's unstable order (``reduce.sort_unstable``)."""
    if info.is_const("stable") and info.const("stable") is True:
        return _when_self_quantized("reduce:sort_stable")(info)
    return _when_self_quantized("reduce:sort_stable_flag")(info)


sort_unstable = _when_self_quantized("reduce:sort_unstable")
topk = _when_self_quantized("reduce:topk")
argsort = _when_self_quantized("reduce:argsort")
argsort_stable = _when_self_quantized("reduce:argsort_stable")


def grid_sampler(info):
    """A quint8 4-D input with constant bilinear mode (torch's only quantized one): others are refused at
    load, naming the op."""
    t = info.args[0].type
    if getattr(t, "dtype", None) != "quint8" or getattr(t, "rank", 4) not in (4, None):
        return None
    if not info.is_const("interpolation_mode") or info.const("interpolation_mode") != 0:
        return None
    return _when_self_quantized("grid_sample:grid_sampler_2d_out")(info)
