"""``scalar_operands``: a 0-d constant tensor as the second operand of arithmetic becomes a number.

``torch.jit.trace`` records the Python number of ``x * 2.0`` or ``y - 0.5`` as a 0-d ``Double()``
tensor constant (``aten::mul.Tensor(%x, %_tensor_constant_0)``), where scripting gives the
``.Scalar`` overload with a number. torch computes both alike: a 0-d operand does not promote a
tensor of rank >= 1 in its dtype category, and is cast to the result's dtype before the arithmetic.
Engines refuse a float64 operand, so each traced constant cut a float32 model in two. The
constant becomes that number (``aten::mul.Scalar(%x, 2.)``) when it is a real or int 0-d array, the
other operand is a floating-point tensor of known rank >= 1, and the op is ``add``, ``sub``
(``alpha`` any), ``mul``, ``div`` (no rounding mode) or ``rsub``.
"""
from __future__ import annotations

import numpy as np

from ..ir.graph import Graph
from ..ir.types import TensorType
from ._util import base_kind, const_or, is_const, is_floating
from .triggers import SCALAR_OPERAND_OPS

__all__ = ["scalar_operands"]

#: op -> the number of inputs of its ``.Tensor`` overload (with ``alpha`` for add/sub/rsub)
_OPS = SCALAR_OPERAND_OPS


def scalar_operands(graph: Graph) -> bool:
    """Rewrite every eligible operand; True if any changed."""
    changed = False
    for n in list(graph.all_nodes()):
        kind = base_kind(n)
        if _OPS.get(kind) != len(n.inputs) or len(n.outputs) != 1:
            continue
        x, c = n.inputs[0], n.inputs[1]
        t = x.type
        if not (isinstance(t, TensorType) and is_floating(t.dtype) and t.shape is not None and len(t.shape) >= 1):
            continue
        if not is_const(c):
            continue
        value = const_or(c)
        if not (isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "iuf"):
            continue
        number = value.item()
        const = graph.insert_constant(number, before=n)
        n.replace_input(1, const)
        n.schema = None  # resolved again: the .Scalar overload
        changed = True
    return changed
