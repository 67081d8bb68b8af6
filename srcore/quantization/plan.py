"""What post-training quantization does to each node of a float graph, before any data is seen.

Nodes of the graph's top block are classified in program order:

* **anchors**: ``aten::conv1d`` / ``conv2d`` and ``aten::linear`` with constant float weights (and
  constant strides, paddings, ...) become ``quantized::qconv1d/2d`` / ``qlinear``; a ``relu`` that
  is their only user is fused (``..._relu``);
* ``aten::add(a, b)`` of two quantized values becomes ``quantized::add`` (``add_relu`` likewise);
* **pass-through** ops (relu, pools, views, flatten, dropout, ...) of a quantized value run on the
  quantized value and keep its parameters (their output range lies inside their input's);
* every other node stays float, with the reason, and its quantized inputs are dequantized.

An anchor's float activation input is quantized where it is needed; quantized values that float
nodes (or the graph's outputs) use are dequantized once.
"""
from __future__ import annotations

from typing import Iterable

import attrs
import numpy as np

from ..ir.graph import Graph, Node, Value
from ..ir.types import TensorType
from ..ir.constants import const_or, is_const
from ..ir.names import base_op

CONV = {"aten::conv1d": ("quantized::qconv1d", 1), "aten::conv2d": ("quantized::qconv2d", 2)}
LINEAR = "aten::linear"
RELU = ("aten::relu", "aten::relu_")
#: ops quantized_cpu runs on a quantized input, keeping its parameters
PASS_THROUGH = frozenset({
    "aten::relu", "aten::relu_", "aten::relu6", "aten::hardtanh", "aten::max_pool2d", "aten::avg_pool2d",
    "aten::adaptive_avg_pool2d", "aten::mean", "aten::flatten", "aten::reshape", "aten::view", "aten::dropout",
    "aten::contiguous", "aten::clone", "aten::detach", "aten::squeeze", "aten::unsqueeze", "aten::permute",
    "aten::transpose", "aten::upsample_nearest2d",
})


@attrs.define(eq=False)
class NodePlan:
    """The decision for one node: ``status`` is ``quantized`` (an anchor or an add: ``op`` is the
    quantized op, ``relu`` the fused relu node), ``fused`` (a relu folded into ``into``),
    ``pass_through`` or ``float`` (with ``reason``)."""

    node: Node
    status: str
    op: str | None = None
    relu: Node | None = None
    into: Node | None = None
    reason: str = ""

    @property
    def out(self) -> Value:
        """The float value this node's quantized result stands for (the fused relu's, if any)."""
        return (self.relu or self.node).output


def _tensor_const(v: Value) -> np.ndarray | None:
    x = const_or(v, None) if is_const(v) else None
    return x if isinstance(x, np.ndarray) else None


def _const_ints(vs: Iterable[Value]) -> bool:
    for v in vs:
        if not is_const(v):
            return False
        x = const_or(v, None)
        vals = x if isinstance(x, (list, tuple)) else [x]
        if not all(isinstance(i, int) and not isinstance(i, bool) for i in vals):
            return False
    return True


def _float_array(a: np.ndarray | None) -> bool:
    return a is not None and a.dtype in (np.float32, np.float64) and bool(np.isfinite(a).all())


def anchor_problem(node: Node) -> tuple[str | None, str]:
    """(quantized op, "") when ``node`` is a conv/linear srcore can quantize, else (None, why not)."""
    kind = base_op(node.kind)
    if kind in CONV:
        op, dims = CONV[kind]
        w = _tensor_const(node.inputs[1])
        if not _float_array(w) or w.ndim != dims + 2:
            return None, "the weight is not a finite float constant"
        if len(node.inputs) > 2 and not (_float_array(_tensor_const(node.inputs[2])) or const_or(node.inputs[2], 0) is None):
            return None, "the bias is not a float constant"
        if not _const_ints(node.inputs[3:7]):
            return None, "stride, padding, dilation or groups is not a constant int (padding='same'?)"
        return op, ""
    if kind == LINEAR:
        w = _tensor_const(node.inputs[1])
        if not _float_array(w) or w.ndim != 2:
            return None, "the weight is not a finite 2-D float constant"
        if len(node.inputs) > 2 and not (_float_array(_tensor_const(node.inputs[2])) or const_or(node.inputs[2], 0) is None):
            return None, "the bias is not a float constant"
        return "quantized::qlinear", ""
    return None, ""


def _single_relu(v: Value) -> Node | None:
    if len(v.uses) != 1:
        return None
    user = v.uses[0].user
    return user if user.kind in RELU and user.owning_block is v.node.owning_block else None


def _is_add(node: Node) -> bool:
    if base_op(node.kind) != "aten::add" or len(node.inputs) < 2:
        return False
    if not all(isinstance(v.type, TensorType) for v in node.inputs[:2]):
        return False
    return len(node.inputs) < 3 or const_or(node.inputs[2], None) == 1


def keep_float_match(node: Node, keep: frozenset[str]) -> bool:
    """Whether ``--keep-float`` names this node: by op (``aten::linear``, ``linear``) or output name."""
    kind = base_op(node.kind)
    names = {node.kind, kind, kind.split("::")[-1]} | {v.name for v in node.outputs if v.name}
    return bool(names & keep)


def plan(graph: Graph, keep_float: Iterable[str] = (), float_dtype: dict[int, str] | None = None) -> list[NodePlan]:
    """A :class:`NodePlan` per non-constant node of the top block, in program order.

    ``float_dtype`` maps ``id(value)`` to the dtype seen at calibration (values that are not
    float32 are not quantized)."""
    keep = frozenset(keep_float)
    float_dtype = float_dtype or {}
    quantized: set[int] = set()     # ids of float values that will have a quantized version
    plans: list[NodePlan] = []
    fused: dict[int, NodePlan] = {}

    def float32(v: Value) -> bool:
        return float_dtype.get(id(v), "float32") == "float32"

    for node in graph.nodes:
        if node.kind == "prim::Constant":
            continue
        if id(node) in fused:
            plans.append(fused[id(node)])
            continue
        if keep_float_match(node, keep):
            plans.append(NodePlan(node, "float", reason="kept float (keep_float)"))
            continue
        op, why = anchor_problem(node)
        if op is not None:
            if not (float32(node.inputs[0]) and float32(node.output)):
                plans.append(NodePlan(node, "float", reason="its input or output is not float32"))
                continue
            relu = _single_relu(node.output)
            if relu is not None and keep_float_match(relu, keep):
                relu = None
            p = NodePlan(node, "quantized", op + ("_relu" if relu is not None else ""), relu)
            if relu is not None:
                fused[id(relu)] = NodePlan(relu, "fused", into=node)
            quantized.add(id(p.out))
            plans.append(p)
            continue
        if why:
            plans.append(NodePlan(node, "float", reason=why))
            continue
        if _is_add(node):
            a, b = node.inputs[:2]
            if id(a) in quantized and id(b) in quantized and float32(node.output):
                relu = _single_relu(node.output)
                if relu is not None and keep_float_match(relu, keep):
                    relu = None
                p = NodePlan(node, "quantized", "quantized::add_relu" if relu is not None else "quantized::add", relu)
                if relu is not None:
                    fused[id(relu)] = NodePlan(relu, "fused", into=node)
                quantized.add(id(p.out))
                plans.append(p)
            else:
                plans.append(NodePlan(node, "float", reason="an input is not quantized"))
            continue
        if base_op(node.kind) in PASS_THROUGH:
            tensors = [v for v in node.inputs if isinstance(v.type, TensorType) and not is_const(v)]
            if id(node.inputs[0]) in quantized and tensors == [node.inputs[0]] and len(node.outputs) == 1:
                quantized.add(id(node.output))
                plans.append(NodePlan(node, "pass_through"))
            else:
                plans.append(NodePlan(node, "float", reason="its input is not quantized"))
            continue
        if not any(isinstance(v.type, TensorType) for v in node.outputs):
            plans.append(NodePlan(node, "float", reason="not a tensor op (scalars, lists, control flow)"))
        else:
            plans.append(NodePlan(node, "float", reason="no quantized kernel for this op"))
    return plans
