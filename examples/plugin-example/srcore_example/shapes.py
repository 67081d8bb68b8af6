"""The example's shape rules: what propagation knows of a node's outputs, from its inputs.

A rule gets a ``srcore.plugin.ShapeContext`` and returns one type per output.
Imported only when a model uses the op.
"""
from __future__ import annotations

from srcore.plugin import TensorType

FLOATS = ("float16", "bfloat16", "float32", "float64")


def scaled_tanh(ctx):
    """``example::scaled_tanh`` keeps the shape of ``self``; like ``torch.tanh``, integers give float32."""
    x = ctx.tensor(0, "self")
    dtype = x.dtype if x.dtype is None or x.dtype in FLOATS else "float32"
    return [TensorType(dtype, x.shape)]
