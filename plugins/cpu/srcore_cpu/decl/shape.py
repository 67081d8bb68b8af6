"""Shape and view kernels: natives returning numpy views, out variants for fresh tensors."""
from __future__ import annotations

from srcore.plugin import Kernel

from . import ANY, family

_k = family("shape")

_VIEWS = [  # natives: (op, impl)
    ("aten::view", "view"), ("aten::view.dtype", "view"), ("aten::reshape", "reshape"),
    ("aten::view_as", "view_as"), ("aten::reshape_as", "reshape_as"),
    ("aten::flatten.using_ints", "flatten"), ("aten::unflatten.int", "unflatten"),
    ("aten::permute", "permute"), ("aten::transpose.int", "transpose"), ("aten::t", "t"),
    ("aten::numpy_T", "numpy_T"), ("aten::unfold", "unfold"), ("aten::diagonal", "diagonal"),
    ("aten::meshgrid", "meshgrid"),
    ("aten::tensor_split.sections", "tensor_split"), ("aten::tensor_split.indices", "tensor_split"),
    ("aten::tensor_split.tensor_indices_or_sections", "tensor_split"), ("aten::meshgrid.indexing", "meshgrid"), ("aten::numpy_T.a", "numpy_T"),
    ("aten::contiguous", "contiguous"), ("aten::movedim.int", "movedim"), ("aten::movedim.intlist", "movedim"),
    ("aten::select.int", "select"), ("aten::slice.Tensor", "slice"),
    ("aten::narrow", "narrow"), ("aten::narrow.Tensor", "narrow"),
    ("aten::unsqueeze", "unsqueeze"), ("aten::squeeze", "squeeze"), ("aten::squeeze.dim", "squeeze"),
    ("aten::squeeze.dims", "squeeze"), ("aten::expand", "expand"), ("aten::expand_as", "expand_as"),
    ("aten::split.Tensor", "split"), ("aten::split.sizes", "split"), ("aten::split", "split"),
    ("aten::split_with_sizes", "split"), ("aten::chunk", "chunk"), ("aten::unbind.int", "unbind"),
    ("aten::triu_", "triu_"), ("aten::tril_", "tril_"),
]

_FRESH = [("aten::cat", "cat"), ("aten::stack", "stack"), ("aten::repeat", "repeat"), ("aten::flip", "flip"),
          ("aten::roll", "roll"), ("aten::triu", "triu"), ("aten::tril", "tril")]

KERNELS: list[Kernel] = (
    [_k(op, impl, ANY, kind="native") for op, impl in _VIEWS]
    + [_k(op, impl, ANY) for op, impl in _FRESH]
)
