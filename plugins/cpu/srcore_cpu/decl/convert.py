"""Conversion kernels: ``aten::to`` (natives: they may alias), clone (out), tensor -> number."""
from __future__ import annotations

from srcore.plugin import Kernel

from . import ANY, family

_k = family("convert")

_NATIVE = [
    ("aten::to.dtype", "to_dtype"), ("aten::to.device", "to_device"), ("aten::to.other", "to_other"),
    ("aten::to.dtype_layout", "to_dtype_layout"), ("aten::to.prim_Device", "to_prim_device"),
    ("aten::to.prim_dtype", "to_prim_dtype"), ("aten::to.prim_other", "to_prim_other"),
    ("aten::type_as", "type_as"), ("aten::detach", "detach"),
    ("aten::copy_", "copy_"), ("aten::copy_.Tensor", "copy_"), ("aten::copy_.int", "copy_"),
    ("aten::copy_.float", "copy_"),
    ("aten::item", "item"), ("aten::ScalarImplicit", "item"),
    ("aten::Int.Tensor", "int_"), ("aten::Float.Tensor", "float_"), ("aten::Bool.Tensor", "bool_"),
]

KERNELS: list[Kernel] = (
    [_k(op, impl, ANY, kind="native") for op, impl in _NATIVE]
    + [_k("aten::clone", "clone", ANY)]
)
