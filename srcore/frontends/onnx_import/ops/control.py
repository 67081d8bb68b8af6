"""Control flow: ONNX ``If`` -> ``prim::If``, ``Loop`` -> ``prim::Loop`` (scan outputs stacked)."""
from __future__ import annotations

import numpy as np

from ....ir.types import INT, ListType, TensorType, Type
from ..context import NodeContext, Unsupported
from ..values import Val
from ._util import table

#: the trip count of a Loop without ``M`` (what TorchScript uses for ``while`` loops)
UNBOUNDED = (1 << 63) - 1


def _value_of(cx: NodeContext, v: Val):
    return v.tensor if v.seq else cx.conv.tensor_of(v)


def _out_type(t: Type) -> Type:
    return t if isinstance(t, (TensorType, ListType)) else TensorType()


def _to_bool(cx: NodeContext, v: Val):
    known = v.known_ints()
    if v.const is not None and v.const.size == 1:
        return bool(v.const.reshape(-1)[0])
    if known is not None and len(known) == 1:
        return bool(known[0])
    return cx.bool_op("aten::Bool", cx.conv.tensor_of(v))


def if_(cx: NodeContext):
    cond = _to_bool(cx, cx.val(0))
    conv = cx.conv
    types = [_out_type(t) for t in cx.out_types]
    node = conv.graph.create("prim::If", [conv.builder.value(cond)], types, source=cx.source)
    conv.builder.block.append(node)
    for attr in ("then_branch", "else_branch"):
        gp = cx.attr(attr)
        if len(gp.output) != len(cx.node.output):
            raise Unsupported(f"{attr} has {len(gp.output)} outputs, the node {len(cx.node.output)}")
        conv.convert_subgraph(gp, node.add_block(), [], cx.scope, f"{attr}",
                              lambda outs: [_value_of(cx, v) for v in outs])
    for out, t in zip(node.outputs, types):
        out.type = t
    return tuple(Val("", t, tensor=o, seq=isinstance(t, ListType), block=conv.builder.block)
                 for o, t in zip(node.outputs, types))


def loop(cx: NodeContext):
    conv = cx.conv
    body = cx.attr("body")
    n_carried = len(cx.node.input) - 2
    n_scan = len(body.output) - 1 - n_carried
    if n_scan < 0 or len(cx.node.output) != n_carried + n_scan:
        raise Unsupported("the body's outputs do not match the loop's carried values and outputs")
    trip = UNBOUNDED
    if cx.has(0):
        c = cx.const(0)
        trip = int(c.reshape(-1)[0]) if c is not None else cx.int_op("aten::Int", cx.x(0))
    cond = _to_bool(cx, cx.val(1)) if cx.has(1) else True
    init = [cx.val(2 + k) for k in range(n_carried)]
    init_values = [_value_of(cx, v) for v in init]
    scan_lists = [cx.op("prim::ListConstruct", types=[ListType(TensorType())]) for _ in range(n_scan)]
    carried_types = [_out_type(t) for t in cx.out_types[:n_carried]]
    carried_types = [t if t != TensorType() else v.type for t, v in zip(carried_types, init_values)]
    node = conv.graph.create("prim::Loop", [conv.builder.value(trip), conv.builder.value(cond), *init_values,
                                            *scan_lists],
                             [*carried_types, *[ListType(TensorType())] * n_scan], source=cx.source)
    conv.builder.block.append(node)
    blk = node.add_block()
    i = blk.add_input(INT)
    block_carried = [blk.add_input(t) for t in carried_types]
    block_lists = [blk.add_input(ListType(TensorType())) for _ in range(n_scan)]
    body_inputs = [Val("iter", TensorType("int64", ()), ints=[i], scalar=True, block=blk),
                   Val("cond", TensorType("bool", ()), const=np.array(True))]
    body_inputs += [Val(v.name, v.type, tensor=b, seq=v.seq, block=blk) for v, b in zip(init, block_carried)]

    def finish(outs):
        keep_going = _to_bool(cx, outs[0])
        res = [conv.builder.value(keep_going)]
        res += [_value_of(cx, v) for v in outs[1:1 + n_carried]]
        for lst, v in zip(block_lists, outs[1 + n_carried:]):
            if v.seq:
                raise Unsupported("a sequence scan output")
            res.append(cx.op("aten::append", lst, conv.tensor_of(v), types=[ListType(TensorType())]))
        return res

    conv.convert_subgraph(body, blk, body_inputs, cx.scope, "body", finish)
    outs = [Val("", t, tensor=o, seq=isinstance(t, ListType), block=conv.builder.block)
            for o, t in zip(node.outputs[:n_carried], carried_types)]
    for lst in node.outputs[n_carried:]:
        outs.append(cx.op("aten::stack", lst, 0))
    return tuple(outs)


CONVERTERS = table(If=(if_, 13, 16, 19, 21, 23, 24, 25), Loop=(loop, 13, 16, 19, 21, 23, 24, 25))
