"""Creation kernels: out variants (the planner's buffer is filled), natives for literal tensors."""
from __future__ import annotations

from srcore.plugin import Kernel

from . import ANY, family

_k = family("creation")

KERNELS: list[Kernel] = [
    _k("aten::arange", "arange", ANY), _k("aten::arange.start", "arange", ANY),
    _k("aten::arange.start_step", "arange", ANY),
    _k("aten::zeros", "zeros", ANY), _k("aten::ones", "ones", ANY), _k("aten::full", "full", ANY),
    _k("aten::empty.memory_format", "empty", ANY),
    _k("aten::zeros_like", "zeros_like", ANY), _k("aten::ones_like", "ones_like", ANY),
    _k("aten::full_like", "full_like", ANY), _k("aten::empty_like", "empty_like", ANY),
    _k("aten::new_zeros", "new_zeros", ANY), _k("aten::new_ones", "new_ones", ANY),
    _k("aten::new_full", "new_full", ANY), _k("aten::new_empty", "new_empty", ANY),
    _k("aten::scalar_tensor", "scalar_tensor", ANY),
    _k("aten::eye", "eye", ANY), _k("aten::eye.m", "eye", ANY),
    _k("aten::fill.Scalar", "fill", ANY), _k("aten::fill.Tensor", "fill", ANY),
    _k("aten::tensor", "tensor", ANY, kind="native"), _k("aten::tensor.int", "tensor", ANY, kind="native"),
    _k("aten::tensor.float", "tensor", ANY, kind="native"), _k("aten::tensor.bool", "tensor", ANY, kind="native"),
    _k("prim::NumToTensor.Scalar", "num_to_tensor", ANY, kind="native"),
    _k("prim::NumToTensor.bool", "num_to_tensor", ANY, kind="native"),
]
