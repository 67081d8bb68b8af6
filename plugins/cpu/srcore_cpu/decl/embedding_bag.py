"""Kernel declarations of nn.EmbeddingBag (no numpy import here)."""
from __future__ import annotations

from srcore.plugin import Kernel

from . import FLOATS, family

_JIT = "srcore_cpu.kernels.embedding_bag:"
_k = family("embedding_bag")

# int64: the index inputs' dtype is a dispatch dtype of the node
KERNELS: list[Kernel] = [
    # the compiled gather-reduce (kernels/jit_embedding_bag.py) first; its matcher declines what it
    # does not take (2-D ids, a mode or padding_idx not constant), which the numpy kernel below runs
    *(Kernel(op, "cpu", "out", FLOATS + ("int64", "int32"), _JIT + "embedding_bag",
             matcher=_JIT + "embedding_bag_matcher", priority=2)
      for op in ("aten::embedding_bag", "aten::embedding_bag.padding_idx")),
    _k("aten::embedding_bag", "embedding_bag", FLOATS + ("int64", "int32")),
    _k("aten::embedding_bag.padding_idx", "embedding_bag", FLOATS + ("int64", "int32")),
]
