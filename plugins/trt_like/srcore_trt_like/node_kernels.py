"""Per-node kernels of backend ``trt_like`` (numpy, float32/float16)."""
from __future__ import annotations

import numpy as np

from srcore.plugin import Const, NodeInfo, Specialized


def relu_out(self, *, out=None):
    return np.maximum(self, 0, out=out)


def relu_matcher(node: NodeInfo):
    """A known output dtype: ``numpy.maximum(self, zero, out=...)`` with the zero already of that dtype
    (a Python ``0`` is converted on every call); else :func:`relu_out`."""
    dtype = getattr(node.output_types[0], "dtype", None) if node.output_types else None
    if dtype not in ("float32", "float16"):
        return relu_out
    return Specialized(np.maximum, args=(0, Const(np.dtype(dtype).type(0))))


def add_out(self, other, *, alpha=1, out=None):
    if alpha != 1:
        other = np.multiply(other, alpha)
    return np.add(self, other, out=out)


def add_matcher(node: NodeInfo):
    """Only ``alpha == 1`` (a constant): then the node is just ``numpy.add(self, other, out=...)``."""
    if node.const("alpha", None) == 1:
        return Specialized(np.add, args=(0, 1))
    return None
