"""Rewriting a float graph into a quantized one, following a plan (:mod:`.plan`) and the
activation parameters chosen at calibration.

Weights become ``qint8`` parameters quantized per output channel, symmetric (``[-127, 127]``, zero
point 0); biases stay float32 (fbgemm adds them in float before requantization); activations are
``quint8``, per tensor, affine. The new nodes keep the float nodes' sources.
"""
from __future__ import annotations

from typing import Mapping

import numpy as np

from ..ir.graph import Graph, Node, Value
from ..ir.quant import QParams
from ..ir.types import FLOAT, INT, TensorType
from ..ir.constants import const_or, unique_param_name
from ..ir.names import base_op
from ..qarray import QuantizedArray
from .observers import quantize_weight, weight_qparams
from .plan import NodePlan

QUINT8_CODE = 13  # torch's ScalarType code of quint8


def _constant(g: Graph, value, t, before: Node, *, param: str | None = None, name: str | None = None) -> Value:
    attrs = {} if value is None else {"value": value}
    if param is not None:
        attrs["param"] = param
    n = g.create("prim::Constant", (), (t,), attrs, output_names=[name] if name else None)
    n.insert_before(before)
    return n.output


def _weight(g: Graph, node: Node, before: Node) -> tuple[Value, QParams]:
    wv = node.inputs[1]
    w = np.asarray(const_or(wv), np.float32)
    q = weight_qparams(w, 0)
    qa = QuantizedArray(quantize_weight(w, q), "qint8", q)
    base = wv.node.attrs.get("param") or wv.name or "weight"
    name = unique_param_name(g, base + ".q")
    return _constant(g, qa, TensorType("qint8", qa.shape, q), before, param=name, name=(wv.name or "w") + "_q"), q


def _bias(g: Graph, node: Node, before: Node) -> Value:
    if len(node.inputs) > 2:
        b = const_or(node.inputs[2], None)
        if b is not None:
            b32 = np.asarray(b, np.float32)
            if b32 is b:
                return node.inputs[2]
            base = node.inputs[2].node.attrs.get("param") or "bias"
            return _constant(g, b32, TensorType("float32", b32.shape), before, param=unique_param_name(g, base + ".f32"))
    return _constant(g, None, TensorType(), before)


def apply(graph: Graph, plans: list[NodePlan], act: Mapping[int, QParams]) -> dict[int, Value]:
    """Rewrite ``graph`` in place; ``act`` maps ``id(float value)`` to the parameters of its quantized
    version (every quantized op's output and every float input an anchor quantizes). Returns
    ``{id(float value): quantized value}``."""
    by_node = {id(p.node): p for p in plans}
    qval: dict[int, Value] = {}

    def quantized_input(v: Value, before: Node) -> Value:
        if id(v) in qval:
            return qval[id(v)]
        q = act[id(v)]
        s = _constant(graph, float(q.scale), FLOAT, before)
        z = _constant(graph, int(q.zero_point), INT, before)
        code = _constant(graph, QUINT8_CODE, INT, before)
        n = graph.create("aten::quantize_per_tensor", [v, s, z, code], (TensorType("quint8", None, q),),
                         output_names=[(v.name or "x") + "_q"], source=v.node.source)
        n.insert_before(before)
        qval[id(v)] = n.output
        return n.output

    def consumers_float(p: NodePlan, fv: Value, qv: Value, after: Node) -> None:
        """Dequantize ``qv`` once for the users of ``fv`` that stay float (and the graph's outputs)."""
        float_uses = []
        for u in list(fv.uses):
            up = by_node.get(id(u.user))
            if up is not None and up.status in ("quantized", "pass_through") and u.offset < (
                    2 if up.op and up.op.startswith("quantized::add") else 1):
                continue
            if up is not None and up.status == "fused":
                continue
            float_uses.append(u)
        if not float_uses:
            return
        d = graph.create("aten::dequantize", [qv], (TensorType("float32", None),),
                         output_names=[(fv.name or "y") + "_dq"], source=p.node.source)
        d.insert_after(after)
        for u in float_uses:
            u.user.replace_input(u.offset, d.output)

    for p in plans:
        node = p.node
        if p.status == "quantized":
            kind = base_op(node.kind)
            q = act[id(p.out)]
            s = _constant(graph, float(q.scale), FLOAT, node)
            z = _constant(graph, int(q.zero_point), INT, node)
            if kind == "aten::add":
                ins = [quantized_input(node.inputs[0], node), quantized_input(node.inputs[1], node), s, z]
            else:
                x = quantized_input(node.inputs[0], node)
                w, _ = _weight(graph, node, node)
                b = _bias(graph, node, node)
                ins = [x, w, b] + (list(node.inputs[3:7]) if kind != "aten::linear" else []) + [s, z]
            new = graph.create(p.op, ins, (TensorType("quint8", None, q),),
                               output_names=[(p.out.name or "y") + "_q"], source=node.source)
            new.insert_before(node)
            qval[id(p.out)] = new.output
            consumers_float(p, p.out, new.output, new)
        elif p.status == "pass_through":
            kind = "aten::relu" if node.kind == "aten::relu_" else node.kind
            ins = [qval[id(node.inputs[0])]] + list(node.inputs[1:])
            new = graph.create(kind, ins, (TensorType("quint8", None, act.get(id(node.output))),),
                               output_names=[(node.output.name or "y") + "_q"], source=node.source)
            new.insert_before(node)
            qval[id(node.output)] = new.output
            consumers_float(p, node.output, new.output, new)
    from ..passes.dce import eliminate_dead_code

    eliminate_dead_code(graph)
    return qval
