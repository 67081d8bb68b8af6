"""PT2E quantized graphs: torch's decomposed quantize/dequantize ops to quantized values, then
quantize -> op -> dequantize patterns folded into quantized ops (as ONNX Runtime fuses QDQ).

``prepare_pt2e`` / ``convert_pt2e`` (e.g. with the X86 inductor quantizer) leave a float graph with
``quantized_decomposed::quantize_per_tensor`` / ``dequantize_per_tensor`` pairs around the ops to
quantize, on plain uint8/int8 tensors, and weights as int8 constants dequantized per channel.
:func:`fold_qdq` first gives the pairs srcore's quantized types (``aten::quantize_per_tensor`` to a
``quint8`` value, ``aten::dequantize``; weights become quantized parameters with their scales),
then folds

* ``dequantize(x) -> linear / conv1d / conv2d(dequantize(W), b) [-> relu] -> quantize(y)`` into
  ``quantized::qlinear / qconv[12]d (+_relu)``, and
* ``dequantize(a) + dequantize(b) [-> relu] -> quantize(y)`` into ``quantized::add(_relu)``.

The folded ops accumulate in integers and requantize once: within one quantization step of the
reference model's float op followed by quantize. Ops whose output stays float keep running in
float on the dequantized values (the reference's own arithmetic).
"""
from __future__ import annotations

import numpy as np

from ..errors import ConversionError
from ..ir.graph import Graph, Node, Value
from ..ir.quant import QDTYPES, QParams
from ..ir.types import INT, ListType, TensorType

QD = "quantized_decomposed::"
_CODES = {"uint8": ("quint8", 13), "int8": ("qint8", 12), "int32": ("qint32", 14)}
_SCALAR_TYPE_NAMES = {0: "uint8", 1: "int8", 3: "int32"}


def _const(v: Value):
    return v.node.attrs.get("value") if v.node.kind == "prim::Constant" else None


def _storage_name(code) -> str | None:
    return _SCALAR_TYPE_NAMES.get(code) if isinstance(code, int) else None


def _fail(node: Node, message: str) -> ConversionError:
    where = f" at {node.source}" if node.source is not None else ""
    return ConversionError(f"cannot fold {node.kind}{where}: {message}")


def _replace(g: Graph, node: Node, kind: str, inputs: list, out_type, schema=None) -> Node:
    new = g.create(kind, inputs, (out_type,), output_names=[node.output.name], source=node.source)
    new.insert_before(node)
    node.output.replace_all_uses_with(new.output)
    node.destroy()
    return new


def _constant(g: Graph, value, t, before: Node, name: str | None = None, param: str | None = None) -> Value:
    attrs = {"value": value} if value is not None else {}
    if param is not None:
        attrs["param"] = param
    c = g.create("prim::Constant", (), (t,), attrs, output_names=[name] if name else None)
    c.insert_before(before)
    return c.output


def _quantized_param(g: Graph, node: Node, q: QParams, qdtype: str) -> Value:
    """The integer constant feeding a dequantize, as a quantized parameter (a new constant)."""
    from ..qarray import QuantizedArray

    src = node.inputs[0]
    arr = _const(src)
    if not isinstance(arr, np.ndarray):
        raise _fail(node, "the quantized weight is not a constant")
    qa = QuantizedArray(np.asarray(arr), qdtype, q)
    name = src.node.attrs.get("param") or src.name
    return _constant(g, qa, TensorType(qdtype, qa.shape, q), src.node, (src.name or "w") + "_q", name)


def _lower_decomposed(g: Graph) -> None:
    for node in list(g.all_nodes()):
        if not node.kind.startswith(QD):
            continue
        op = node.kind[len(QD):].split(".")[0]
        if op == "quantize_per_tensor":
            x, s, z, qmin, qmax, dt = node.inputs[:6]
            storage = _storage_name(_const(dt))
            if storage is None:
                raise _fail(node, f"dtype {_const(dt)!r} is not uint8, int8 or int32")
            qdtype, code = _CODES[storage]
            info = QDTYPES[qdtype]
            if (_const(qmin), _const(qmax)) != (info.qmin, info.qmax):
                raise _fail(node, f"quantization range [{_const(qmin)}, {_const(qmax)}] is narrower than "
                                  f"{qdtype}'s: srcore quantizes activations to the full range")
            if any(u.user.kind != QD + "dequantize_per_tensor" for u in node.output.uses):
                raise _fail(node, "its integers are used other than by a dequantize")
            code_v = _constant(g, code, INT, node)
            _replace(g, node, "aten::quantize_per_tensor", [x, s, z, code_v], TensorType(qdtype, None))
        elif op == "dequantize_per_tensor":
            q, s, z = node.inputs[:3]
            if q.node.kind == "aten::quantize_per_tensor":
                _replace(g, node, "aten::dequantize", [q], TensorType("float32", None))
            else:  # a constant weight quantized per tensor
                storage = _storage_name(_const(node.inputs[5]))
                qv = _quantized_param(g, node, QParams(float(_const(s)), int(_const(z))), _CODES[storage][0])
                _replace(g, node, "aten::dequantize", [qv], TensorType("float32", None))
        elif op == "dequantize_per_channel":
            w, s, z, axis = node.inputs[:4]
            scales, zps = _const(s), _const(z)
            storage = _storage_name(_const(node.inputs[6])) if len(node.inputs) > 6 else None
            if scales is None or zps is None or storage is None:
                raise _fail(node, "per-channel scales, zero points and dtype (uint8/int8/int32) must be constants")
            q = QParams(tuple(float(v) for v in np.asarray(scales).reshape(-1)),
                        tuple(int(v) for v in np.asarray(zps).reshape(-1)), int(_const(axis)))
            qv = _quantized_param(g, node, q, _CODES[storage][0])
            _replace(g, node, "aten::dequantize", [qv], TensorType("float32", None))
        else:
            raise _fail(node, f"{node.kind} is not supported (quantize/dequantize per tensor, dequantize per "
                              "channel are)")


def _dq_input(v: Value) -> Value | None:
    """The quantized value ``v`` dequantizes, if ``v`` is ``aten::dequantize(q)``."""
    return v.node.inputs[0] if v.node.kind == "aten::dequantize" else None


def _only_use(v: Value) -> Node | None:
    return v.uses[0].user if len(v.uses) == 1 else None


def _quantize_after(v: Value):
    """(relu?, quantize node) when ``v`` flows only into [relu ->] quantize_per_tensor with constant params."""
    user = _only_use(v)
    relu = False
    if user is not None and user.kind in ("aten::relu", "aten::relu_"):
        relu, user = True, _only_use(user.output)
    if user is None or user.kind != "aten::quantize_per_tensor":
        return None
    s, z = _const(user.inputs[1]), _const(user.inputs[2])
    if not isinstance(s, float) or not isinstance(z, int):
        return None
    return relu, user


_LINEAR_CONV = {"aten::linear": ("quantized::qlinear", 0), "aten::conv1d": ("quantized::qconv1d", 1),
                "aten::conv2d": ("quantized::qconv2d", 2)}


def _fold(g: Graph) -> int:
    folded = 0
    for node in list(g.all_nodes()):
        if node.owning_block is None:
            continue
        base = node.kind.split(".")[0]
        if base in _LINEAR_CONV:
            qx, qw = _dq_input(node.inputs[0]), _dq_input(node.inputs[1])
            after = _quantize_after(node.output)
            if qx is None or qw is None or after is None or qw.node.kind != "prim::Constant":
                continue
            if getattr(_const(qw), "qdtype", None) != "qint8":
                continue  # torch's quantized conv / linear take qint8 weights only: a uint8 one stays float
            relu, qnode = after
            op, dims = _LINEAR_CONV[base]
            bias = node.inputs[2] if len(node.inputs) > 2 else _constant(g, None, TensorType(), node)
            s, z = qnode.inputs[1], qnode.inputs[2]
            if dims == 0:
                ins = [qx, qw, bias, s, z]
            else:
                def arg(i, default):
                    if i < len(node.inputs):
                        return node.inputs[i]
                    return _constant(g, default, ListType(INT) if isinstance(default, list) else INT, node)
                ins = [qx, qw, bias, arg(3, [1] * dims), arg(4, [0] * dims), arg(5, [1] * dims), arg(6, 1), s, z]
                if isinstance(_const(ins[4]), str):
                    continue  # padding="same"/"valid": stays float
            new = g.create(op + ("_relu" if relu else ""), ins, (TensorType(),), output_names=[qnode.output.name],
                           source=node.source)
            new.insert_before(qnode)
            qnode.output.replace_all_uses_with(new.output)
            folded += 1
        elif base == "aten::add" and len(node.inputs) >= 2:
            qa, qb = _dq_input(node.inputs[0]), _dq_input(node.inputs[1])
            alpha = _const(node.inputs[2]) if len(node.inputs) > 2 else 1
            after = _quantize_after(node.output)
            if qa is None or qb is None or after is None or alpha != 1:
                continue
            relu, qnode = after
            new = g.create("quantized::add_relu" if relu else "quantized::add", [qa, qb, qnode.inputs[1], qnode.inputs[2]],
                           (TensorType(),), output_names=[qnode.output.name], source=node.source)
            new.insert_before(qnode)
            qnode.output.replace_all_uses_with(new.output)
            folded += 1
    return folded


def fold_qdq(graph: Graph) -> int:
    """Lower torch's decomposed quantize/dequantize ops and fold QDQ patterns; returns how many ops
    were folded. Raises ConversionError naming a node it cannot represent."""
    if not any(n.kind.startswith(QD) for n in graph.all_nodes()):
        return 0
    _lower_decomposed(graph)
    folded = _fold(graph)
    from .dce import eliminate_dead_code

    eliminate_dead_code(graph)
    return folded


def fold_quantized(graph: Graph) -> int:
    """Fold the QDQ patterns of a graph that already has srcore's quantize/dequantize ops (as
    ``from_onnx`` makes them of ``QuantizeLinear``/``DequantizeLinear``); returns how many ops were folded."""
    if not any(n.kind == "aten::quantize_per_tensor" for n in graph.all_nodes()):
        return 0
    folded = _fold(graph)
    if folded:
        from .dce import eliminate_dead_code

        eliminate_dead_code(graph)
    return folded
