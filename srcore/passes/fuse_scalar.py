"""Fusion of a data-dependent branch condition: ``aten::Bool(aten::gt(aten::sum(x), c))`` -> ``srcore::sum_gt``.

The condition of ``if bool(x.sum() > c):`` is three dispatched nodes (a 0-d sum, a 0-d
comparison, the conversion to a Python bool) for one number; the fused op computes it
in one call. Conditions: ``sum`` without ``dim``/``dtype`` (``dtype`` the constant None),
``x`` a float32/float64 tensor (the sum stays in its dtype, as ``aten::sum`` does), ``c``
a constant int or float (not bool), and the sum and the comparison each used once.
"""
from __future__ import annotations

from ..ir.graph import Node, Value
from ..ir.types import TensorType
from ._util import base_kind, const_or, is_const


def _single_use(v: Value, kind: str) -> Node | None:
    n = v.node
    if base_kind(n) != kind or len(n.outputs) != 1 or len(v.uses) != 1:
        return None
    return n


def sum_gt(conv: Node):
    """Match ``aten::Bool`` of ``gt(sum(x), c)``: ``(kind, inputs, absorbed)`` or None."""
    if len(conv.inputs) != 1:
        return None
    gt = _single_use(conv.inputs[0], "aten::gt")
    if gt is None or len(gt.inputs) != 2 or not is_const(gt.inputs[1]):
        return None
    c = const_or(gt.inputs[1])
    if isinstance(c, bool) or not isinstance(c, (int, float)):
        return None
    s = _single_use(gt.inputs[0], "aten::sum")
    if s is None or len(s.inputs) not in (1, 2):
        return None
    if len(s.inputs) == 2 and not (is_const(s.inputs[1]) and const_or(s.inputs[1]) is None):
        return None
    x = s.inputs[0]
    if not isinstance(x.type, TensorType) or x.type.dtype not in ("float32", "float64"):
        return None
    return "srcore::sum_gt", [x, gt.inputs[1]], [gt, s]
