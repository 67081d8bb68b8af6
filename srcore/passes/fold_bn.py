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
from .triggers import BATCH_NORMS, CONVS as CONV_OPS


def tensor_const(v: Value):
    """The ndarray ``v`` is a constant of, else None."""
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
            if base_kind(node) in BATCH_NORMS:
                changed |= _fold(node)
    return changed


def inference_affine(bn: Node):
    """``(scale, shift)`` (float64, per channel) of an inference batch norm node with constant
    parameters, so that it computes ``x * scale + shift``; None for any other node."""
    kind = base_kind(bn)
    if kind == "aten::batch_norm" and len(bn.inputs) >= 8:
        if const_or(bn.inputs[5], None) is not False:
            return None
        eps_value = bn.inputs[7]
    elif (kind == "aten::_native_batch_norm_legit_no_training" and len(bn.inputs) == 7
          and not any(o.uses for o in bn.outputs[1:])):
        eps_value = bn.inputs[6]
    else:
        return None
    eps = const_or(eps_value, None)
    mean, var = tensor_const(bn.inputs[3]), tensor_const(bn.inputs[4])
    if not isinstance(eps, float) or mean is None or var is None or mean.ndim != 1 or var.shape != mean.shape:
        return None
    opt = []
    for v in (bn.inputs[1], bn.inputs[2]):  # gamma, beta
        if is_const(v) and const_or(v) is None:
            opt.append(None)
        elif tensor_const(v) is not None and tensor_const(v).shape == mean.shape:
            opt.append(tensor_const(v))
        else:
            return None
    gamma, beta = opt
    s = (gamma if gamma is not None else 1.0) / np.sqrt(var.astype(np.float64) + eps)
    return s, (beta if beta is not None else 0.0) - mean * s


def _fold(bn: Node) -> bool:
    src = _source(bn)
    affine = inference_affine(bn) if src is not None else None
    W = tensor_const(src.inputs[1]) if src is not None else None
    if affine is None or W is None:
        return False
    b_value = src.inputs[2]
    if is_const(b_value) and const_or(b_value) is None:
        b = None
    elif tensor_const(b_value) is not None:
        b = tensor_const(b_value)
    else:
        return False
    s, shift = affine
    c = W.shape[0]
    if s.shape != (c,):
        return False
    dtype = W.dtype
    W2 = (W.astype(np.float64) * s.reshape((c,) + (1,) * (W.ndim - 1))).astype(dtype)
    b2 = ((b.astype(np.float64) * s if b is not None else 0.0) + shift).astype(dtype)
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
