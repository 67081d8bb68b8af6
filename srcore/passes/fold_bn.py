"""Folding inference batch norm into the convolution (or linear) before it.

``aten::batch_norm(conv(x, W, b, ...), gamma, beta, mean, var, False, momentum, eps, cudnn)``
becomes ``conv(x, W', b', ...)`` with, per output channel,
``s = gamma / sqrt(var + eps)``, ``W' = W * s`` and ``b' = (b - mean) * s + beta``.
Conditions: ``training`` and ``eps`` are constants (training ``False``); W,
mean, var are tensor constants; gamma, beta, b are tensor constants or
``None``; the conv is ``aten::conv1d/2d/3d`` or a non-transposed
``aten::_convolution``; the conv output has no other use. The new parameters
are named ``<W param>.bnfold`` and ``<b param or W's name with .bias>.bnfold``.
``aten::linear(x, W, b)`` followed by batch norm folds the same way when the
linear output is 2-D (``BatchNorm1d`` on ``(N, C)``).
``aten::_native_batch_norm_legit_no_training(x, gamma, beta, mean, var, momentum, eps)``
(what ``torch.export`` makes of an eval-mode ``BatchNorm``) folds the same way when its
second and third outputs (empty tensors) are unused.
"""
from __future__ import annotations

import numpy as np

from ..ir.graph import Graph, Node, Value
from ._util import base_kind, const_or, is_const, replace_with_values, unique_param_name, walk_blocks

CONV_OPS = frozenset({"aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::_convolution"})


def _tensor(v: Value):
    if not is_const(v):
        return None
    x = const_or(v)
    return x if isinstance(x, np.ndarray) else None


def _param_name(v: Value, fallback: str) -> str:
    return v.node.attrs.get("param") or fallback


def _source(node: Node) -> Node | None:
    src = node.inputs[0].node
    kind = base_kind(src)
    if kind not in CONV_OPS and kind != "aten::linear":
        return None
    if len(src.outputs) != 1 or len(src.output.uses) != 1:
        return None
    if kind == "aten::_convolution" and const_or(src.inputs[6], None) is not False:
        return None  # transposed convolutions keep their batch norm
    if kind == "aten::linear":
        shape = getattr(src.output.type, "shape", None)
        if shape is None or len(shape) != 2:
            return None
    return src


def fold_batch_norm(graph: Graph) -> bool:
    """Fold every eligible conv/linear + inference batch_norm pair; True if any was folded."""
    changed = False
    for block in list(walk_blocks(graph.block)):
        for node in list(block.nodes):
            kind = base_kind(node)
            if kind == "aten::batch_norm" and len(node.inputs) >= 8:
                changed |= _fold(node, const_or(node.inputs[5], None) is False, node.inputs[7])
            elif (kind == "aten::_native_batch_norm_legit_no_training" and len(node.inputs) == 7
                  and not any(o.uses for o in node.outputs[1:])):
                changed |= _fold(node, True, node.inputs[6])
    return changed


def _fold(bn: Node, inference: bool, eps_value: Value) -> bool:
    src = _source(bn)
    if src is None or not inference:
        return False
    eps = const_or(eps_value, None)
    W = _tensor(src.inputs[1])
    mean, var = _tensor(bn.inputs[3]), _tensor(bn.inputs[4])
    if not isinstance(eps, float) or W is None or mean is None or var is None:
        return False
    opt = []
    for v in (bn.inputs[1], bn.inputs[2], src.inputs[2]):  # gamma, beta, conv bias
        if is_const(v) and const_or(v) is None:
            opt.append(None)
        elif _tensor(v) is not None:
            opt.append(_tensor(v))
        else:
            return False
    gamma, beta, b = opt
    c = W.shape[0]
    if mean.shape != (c,) or var.shape != (c,):
        return False
    dtype = W.dtype
    s = (gamma if gamma is not None else 1.0) / np.sqrt(var.astype(np.float64) + eps)
    W2 = (W.astype(np.float64) * s.reshape((c,) + (1,) * (W.ndim - 1))).astype(dtype)
    b0 = b.astype(np.float64) if b is not None else 0.0
    b2 = ((b0 - mean) * s + (beta if beta is not None else 0.0)).astype(dtype)
    g = bn.graph
    wname = _param_name(src.inputs[1], "weight")
    bias_name = wname[:-len("weight")] + "bias" if wname.endswith("weight") else wname + ".bias"
    bname = _param_name(src.inputs[2], bias_name) if b is not None else bias_name
    for index, value, name in ((1, W2, wname), (2, b2, bname)):
        const = g.insert_constant(value, before=src)
        const.node.attrs["param"] = unique_param_name(g, f"{name}.bnfold")
        src.replace_input(index, const)
    replace_with_values(bn, [src.output])  # a _native_batch_norm's other outputs are unused
    return True
