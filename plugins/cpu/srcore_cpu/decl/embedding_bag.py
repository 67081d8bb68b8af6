"""Kernel declarations of nn.EmbeddingBag (no numpy import here)."""
from __future__ import annotations

from srcore.plugin import Kernel

from . import FLOATS, family

_k = family("embedding_bag")

# int64: the index inputs' dtype is a dispatch dtype of the node
KERNELS: list[Kernel] = [
    _k("aten::embedding_bag", "embedding_bag", FLOATS + ("int64", "int32")),
    _k("aten::embedding_bag.padding_idx", "embedding_bag", FLOATS + ("int64", "int32")),
]
