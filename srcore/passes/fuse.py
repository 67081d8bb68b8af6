"""Operator fusion: linear/conv followed by an activation (and a residual add) into one op.

The fused ops are declared in ``srcore/ops/srcore.yaml`` (implemented by the cpu plugin)::

    srcore::linear_relu(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor
    srcore::linear_gelu(Tensor input, Tensor weight, Tensor? bias=None, str approximate="none") -> Tensor
    srcore::linear_silu(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor
    srcore::conv2d_relu(Tensor input, Tensor weight, Tensor? bias=None, SymInt[2] stride=1,
                        SymInt[2] padding=0, SymInt[2] dilation=1, SymInt groups=1) -> Tensor
    srcore::conv2d_add_relu(Tensor input, Tensor weight, Tensor? bias, Tensor other, SymInt[2] stride=1,
                            SymInt[2] padding=0, SymInt[2] dilation=1, SymInt groups=1) -> Tensor
    srcore::add_relu(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor
    srcore::linear_tanh / srcore::linear_sigmoid (like linear_relu)
    srcore::sum_gt(Tensor self, Scalar other) -> bool          (fuse_scalar.py)

A chain is fused only when every intermediate value has exactly one use (so
nothing else needs it); ``aten::_convolution`` only when it is a plain 2-D
convolution (not transposed, 4-D weight); ``conv2d + add + relu`` only when
the add's ``alpha`` is the constant 1 (either operand order) and ``other``
cannot change the result's shape (its shape broadcasts into the conv output's,
or the types are equal); ``add + relu`` (tensor + tensor) when no conv feeds
it. ``relu_`` counts as ``relu``. The srcore:: fused ops only for a float32 or float64 result (or one
of unknown dtype): half and integer chains stay unfused. Quantized graphs: ``quantized::qconv2d(_relu)`` (fbgemm) whose
only use is a ``quantized::add(_relu)`` variant (plain, ``_channels_last``, ``_mixed_layout``) with
an operand of the conv result's shape and dtype becomes ``quantized::qconv2d_then_add``
(``srcore/ops/quantized.yaml``: both of torch's roundings, the add's loop order kept). The rules are
the table :data:`FUSIONS`.
"""
from __future__ import annotations

from typing import Callable

import attrs

from .._repr import shared_repr
from ..ir.graph import Graph, Node, Value
from ..ir.scope import joined
from ..ir.types import TensorType
from ..ir.alias import is_mutated
from ._util import base_kind, const_or, replace_with_values, walk_blocks
from .fuse_scalar import sum_gt

RELU = ("aten::relu", "aten::relu_")


def _single_use_producer(v: Value, kinds) -> Node | None:
    n = v.node
    if base_kind(n) not in kinds or len(n.outputs) != 1 or len(v.uses) != 1:
        return None
    return n


def _conv2d_args(conv: Node) -> list[Value] | None:
    """(input, weight, bias, stride, padding, dilation, groups) of a plain 2-D convolution."""
    kind = base_kind(conv)
    if kind == "aten::conv2d" and len(conv.inputs) == 7:
        return list(conv.inputs)
    if kind == "aten::_convolution" and len(conv.inputs) >= 9:
        w = conv.inputs[1].type
        if const_or(conv.inputs[6], None) is not False:
            return None
        if not isinstance(w, TensorType) or w.rank != 4:
            return None
        i = conv.inputs
        return [i[0], i[1], i[2], i[3], i[4], i[5], i[8]]
    return None


CONV = ("aten::conv2d", "aten::_convolution")


def linear_act(fused: str) -> Callable[[Node], tuple | None]:
    def match(act: Node):
        lin = _single_use_producer(act.inputs[0], ("aten::linear",))
        if lin is None or len(lin.inputs) != 3:
            return None
        extra = list(act.inputs[1:2]) if fused == "srcore::linear_gelu" else []
        return fused, list(lin.inputs) + extra, [lin]
    return match


def conv_relu(act: Node):
    conv = _single_use_producer(act.inputs[0], CONV)
    args = _conv2d_args(conv) if conv is not None else None
    return None if args is None else ("srcore::conv2d_relu", args, [conv])


def _no_broadcast(other: Value, out: Value) -> bool:
    ot, ct = other.type, out.type
    if not isinstance(ot, TensorType) or not isinstance(ct, TensorType):
        return False
    if ot == ct and ot.shape is not None:
        return True
    if ot.shape is None or ct.shape is None or len(ot.shape) > len(ct.shape):
        return False
    return all(o == 1 or o == c for o, c in zip(reversed(ot.shape), reversed(ct.shape))) \
        and all(isinstance(d, int) or d == c for d, c in zip(reversed(ot.shape), reversed(ct.shape)))


def conv_add_relu(act: Node):
    add = _single_use_producer(act.inputs[0], ("aten::add", "aten::add_"))
    if add is None or len(add.inputs) != 3:
        return None
    alpha = const_or(add.inputs[2], None)
    if alpha != 1 or isinstance(alpha, bool):
        return None
    for conv_pos in (0, 1):  # conv + other or other + conv
        conv = _single_use_producer(add.inputs[conv_pos], CONV)
        args = _conv2d_args(conv) if conv is not None else None
        if args is None:
            continue
        other = add.inputs[1 - conv_pos]
        if other is conv.output or not _no_broadcast(other, conv.output):
            continue
        return "srcore::conv2d_add_relu", args[:3] + [other] + args[3:], [add, conv]
    return None


def add_relu(act: Node):
    add = _single_use_producer(act.inputs[0], ("aten::add",))
    if add is None or len(add.inputs) != 3:
        return None
    if not all(isinstance(v.type, TensorType) for v in add.inputs[:2]):
        return None  # tensor + scalar is another overload
    return "srcore::add_relu", list(add.inputs), [add]


#: quantized::add variants (torch's loop order, as the importer routes them) -> (relu, layout)
QADDS = {"quantized::add": (False, "nchw"), "quantized::add_relu": (True, "nchw"),
         "quantized::add_channels_last": (False, "channels_last"),
         "quantized::add_relu_channels_last": (True, "channels_last"),
         "quantized::add_mixed_layout": (False, "mixed_layout"),
         "quantized::add_relu_mixed_layout": (True, "mixed_layout")}
QCONV2D = ("quantized::qconv2d", "quantized::qconv2d_relu")


def qconv_then_add(add: Node):
    """``quantized::qconv2d(_relu)`` (fbgemm arithmetic) whose only use is a ``quantized::add``
    variant with an operand of its own shape and dtype -> ``quantized::qconv2d_then_add``: the
    kernel requantizes the conv's sums to the conv's parameters and adds in its epilogue, with
    both of torch's roundings (the conv's, then the add's in the add's loop order)."""
    relu, layout = QADDS[base_kind(add)]
    if len(add.inputs) != 4:
        return None
    for conv_pos in (0, 1):
        conv = _single_use_producer(add.inputs[conv_pos], QCONV2D)
        if conv is None or len(conv.inputs) not in (9, 10):
            continue
        if len(conv.inputs) == 10 and const_or(conv.inputs[9], None) != "fbgemm":
            continue
        other, out = add.inputs[1 - conv_pos], conv.output
        ot, ct = other.type, out.type
        if other is out or not isinstance(ot, TensorType) or not isinstance(ct, TensorType):
            continue
        if ot.dtype != ct.dtype or ot.shape is None or ot.shape != ct.shape or len(ct.shape) != 4:
            continue
        g = add.graph
        consts = [g.insert_constant(base_kind(conv) == "quantized::qconv2d_relu", before=add)]
        tail = [g.insert_constant(relu, before=add), g.insert_constant(layout, before=add)]
        i = conv.inputs
        return ("quantized::qconv2d_then_add", [i[0], other, i[1], i[2], i[3], i[4], i[5], i[6], i[7], i[8]]
                + consts + [add.inputs[2], add.inputs[3]] + tail, [conv])
    return None


@attrs.frozen
@shared_repr
class Fusion:
    name: str
    op: str  # the last op of the chain, where matching starts
    match: Callable[[Node], tuple | None]  # -> (fused kind, inputs, nodes absorbed) or None


FUSIONS = [  # longer chains first
    Fusion("conv2d + add + relu", "aten::relu", conv_add_relu),
    Fusion("conv2d + add + relu_", "aten::relu_", conv_add_relu),
    Fusion("linear + relu", "aten::relu", linear_act("srcore::linear_relu")),
    Fusion("linear + relu_", "aten::relu_", linear_act("srcore::linear_relu")),
    Fusion("linear + gelu", "aten::gelu", linear_act("srcore::linear_gelu")),
    Fusion("linear + silu", "aten::silu", linear_act("srcore::linear_silu")),
    Fusion("linear + tanh", "aten::tanh", linear_act("srcore::linear_tanh")),
    Fusion("linear + sigmoid", "aten::sigmoid", linear_act("srcore::linear_sigmoid")),
    Fusion("Bool(sum > c)", "aten::Bool", sum_gt),
    Fusion("conv2d + relu", "aten::relu", conv_relu),
    Fusion("conv2d + relu_", "aten::relu_", conv_relu),
    Fusion("add + relu", "aten::relu", add_relu),
    *(Fusion(f"quantized conv2d + {op.split('::')[1]}", op, qconv_then_add) for op in QADDS),
]


#: the dtypes the srcore:: fused ops are for (their kernels'): another dtype (float16, bfloat16, ints)
#: keeps the unfused ops, which run where a fused op could not (a torch fallback, a plugin's kernel)
FUSED_DTYPES = ("float32", "float64")


def _float_out(node: Node) -> bool:
    t = node.output.type
    return not isinstance(t, TensorType) or t.dtype is None or t.dtype in FUSED_DTYPES


def fuse_ops(graph: Graph, *, fusions=None, applied: list[str] | None = None) -> bool:
    """Apply the fusion table; ``applied`` collects the names of the fusions made."""
    table: dict[str, list[Fusion]] = {}
    for f in FUSIONS if fusions is None else fusions:
        table.setdefault(f.op, []).append(f)
    changed = False
    for block in list(walk_blocks(graph.block)):
        for node in list(block.nodes):
            for f in table.get(base_kind(node), ()):
                m = f.match(node)
                if m is None:
                    continue
                kind, inputs, absorbed = m
                if kind.startswith("srcore::") and not _float_out(node):
                    continue
                if any(is_mutated(v) for n in absorbed for v in n.inputs):
                    # the fused node runs where the activation was: an input written in between
                    # (x.add_(...) after y = x + x) would be read after the write
                    continue
                fused = graph.create(kind, inputs, [node.output.type], source=node.source)
                scope = joined([*reversed(absorbed), node])
                if scope:
                    fused.meta["scope"] = scope
                fused.insert_before(node)
                name = node.output.name
                replace_with_values(node, [fused.output])
                for n in absorbed:  # in chain order from the activation back: uses are gone now
                    n.destroy()
                if name is not None:
                    graph.rename(fused.output, name)
                if applied is not None:
                    applied.append(f.name)
                changed = True
                break
    return changed
