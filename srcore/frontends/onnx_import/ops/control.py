"""Control flow: ONNX ``If`` -> ``prim::If``, ``Loop`` -> ``prim::Loop`` (scan outputs stacked),
``Scan`` -> ``prim::Loop`` over the scanned axis (its slices selected in the body)."""
from __future__ import annotations

import numpy as np

from ....ir.types import INT, ListType, TensorType, Type
from ..context import NodeContext, Unsupported
from ..values import Val
from ....ir.builder import BlockScope
from ._util import dim_item, norm_axis, table

#: the trip count of a Loop without ``M`` (what TorchScript uses for ``while`` loops)
UNBOUNDED = (1 << 63) - 1


def _value_of(cx: NodeContext, v: Val):
    return v.tensor if v.seq else cx.conv.tensor_of(v)


def _out_type(t: Type) -> Type:
    return t if isinstance(t, (TensorType, ListType)) else TensorType()


def _ranks_differ(a: Type, b: Type) -> bool:
    return (isinstance(a, TensorType) and isinstance(b, TensorType) and a.shape is not None and b.shape is not None
            and len(a.shape) != len(b.shape))


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


def _loop_node(cx: NodeContext, trip, cond, init_values, carried_types, n_lists: int):
    """A ``prim::Loop`` carrying ``init_values`` and ``n_lists`` empty tensor lists (the scan outputs
    its body appends to), appended to the current block: ``(node, body block, iteration input,
    the block's carried inputs, the block's list inputs)``."""
    conv = cx.conv
    lists = [cx.op("prim::ListConstruct", types=[ListType(TensorType())]) for _ in range(n_lists)]
    node = conv.graph.create("prim::Loop", [conv.builder.value(trip), conv.builder.value(cond), *init_values, *lists],
                             [*carried_types, *[ListType(TensorType())] * n_lists], source=cx.source)
    conv.builder.block.append(node)
    blk = node.add_block()
    i = blk.add_input(INT)
    block_carried = [blk.add_input(t) for t in carried_types]
    block_lists = [blk.add_input(ListType(TensorType())) for _ in range(n_lists)]
    return node, blk, i, block_carried, block_lists


def _append_scan_outputs(cx: NodeContext, block_lists, outs, seeds: list | None = None) -> list:
    """The body's scan outputs ``outs`` appended to the loop's lists (the new lists). With ``seeds``
    (a Loop's), a value of a static shape is appended unsqueezed and ``seeds`` gets an empty
    ``[0, *shape]`` array for it (a loop of no iteration still has its scan outputs, empty, as
    onnxruntime gives them; ``stack`` of no tensors fails), else None (stacked after the loop)."""
    res = []
    for lst, v in zip(block_lists, outs):
        if v.seq:
            raise Unsupported("a sequence scan output")
        t = cx.conv.tensor_of(v)
        if seeds is None:   # Scan: stacked along its output axis after the loop
            res.append(cx.op("aten::append", lst, t, types=[ListType(TensorType())]))
            continue
        shape, dtype = getattr(t.type, "shape", None), getattr(t.type, "dtype", None)
        if shape is None or not all(isinstance(d, int) for d in shape):   # what ONNX inferred (an If's output)
            shape, dtype = v.shape, dtype or v.dtype
        if dtype is not None and shape is not None and all(isinstance(d, int) for d in shape):
            seeds.append(np.empty((0, *shape), dtype))
            t = cx.op("aten::unsqueeze", t, 0)
        else:
            seeds.append(None)
        res.append(cx.op("aten::append", lst, t, types=[ListType(TensorType())]))
    return res


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
    carried_types = [_out_type(t) for t in cx.out_types[:n_carried]]
    carried_types = [t if t != TensorType() else v.type for t, v in zip(carried_types, init_values)]
    # a loop output's type comes from ONNX's view of the graph (a declared graph output's shape): when
    # its rank is not the initial value's it is wrong (onnxruntime only warns), so the carried value
    # goes unshaped and the mismatch is reported at that output, not as a type error deep in the body
    carried_types = [TensorType(t.dtype or v.type.dtype) if _ranks_differ(t, v.type) else t
                     for t, v in zip(carried_types, init_values)]
    node, blk, i, block_carried, block_lists = _loop_node(cx, trip, cond, init_values, carried_types, n_scan)
    body_inputs = [Val("iter", TensorType("int64", ()), ints=[i], scalar=True, block=blk),
                   Val("cond", TensorType("bool", ()), const=np.array(True))]
    body_inputs += [Val(v.name, v.type, tensor=b, seq=v.seq, block=blk) for v, b in zip(init, block_carried)]

    def finish(outs):
        keep_going = _to_bool(cx, outs[0])
        res = [conv.builder.value(keep_going)]
        res += [_value_of(cx, v) for v in outs[1:1 + n_carried]]
        return res + _append_scan_outputs(cx, block_lists, outs[1 + n_carried:], seeds)

    seeds: list = []
    conv.convert_subgraph(body, blk, body_inputs, cx.scope, "body", finish)
    outs = [Val("", t, tensor=o, seq=isinstance(t, ListType), block=conv.builder.block)
            for o, t in zip(node.outputs[:n_carried], carried_types)]
    for lst, seed in zip(node.outputs[n_carried:], seeds):
        if seed is None:
            outs.append(cx.op("aten::stack", lst, 0))
            continue
        empty = conv.param("loop_scan_empty", seed)
        first = cx.op("prim::ListConstruct", empty, types=[ListType(TensorType())])
        outs.append(cx.op("aten::cat", cx.op("aten::add", first, lst, types=[ListType(TensorType())]), 0))
    return tuple(outs)


def scan(cx: NodeContext):
    """A ``prim::Loop`` over the scan inputs' axis: the body gets each input's slice
    (``aten::select``, from the end for a reverse direction); each scan output is appended to a
    list, stacked along its output axis after the loop and flipped for a reverse direction."""
    conv = cx.conv
    body = cx.attr("body")
    m = cx.attr("num_scan_inputs")
    n_state = len(cx.node.input) - m
    k = len(body.output) - n_state
    if n_state < 0 or k < 0 or len(cx.node.output) != n_state + k or len(body.input) != n_state + m:
        raise Unsupported("the body's inputs and outputs do not match the scan's states, inputs and outputs")
    in_axes = list(cx.attr("scan_input_axes", None) or [0] * m)
    in_dirs = list(cx.attr("scan_input_directions", None) or [0] * m)
    out_axes = list(cx.attr("scan_output_axes", None) or [0] * k)
    out_dirs = list(cx.attr("scan_output_directions", None) or [0] * k)
    xs = [cx.x(n_state + j) for j in range(m)]
    axes = [norm_axis(a, cx.rank(n_state + j), "scan_input_axes") for j, a in enumerate(in_axes)]
    trip = dim_item(cx, n_state, xs[0], axes[0])
    init = [cx.val(j) for j in range(n_state)]
    init_values = [_value_of(cx, v) for v in init]
    carried_types = [v.type for v in init_values]
    node, blk, i, block_carried, block_lists = _loop_node(cx, trip, True, init_values, carried_types, k)
    body_inputs = [Val(v.name, v.type, tensor=b, seq=v.seq, block=blk) for v, b in zip(init, block_carried)]
    mark = blk.return_node.prev
    with BlockScope(conv.builder, blk):
        last = trip - 1 if isinstance(trip, int) else cx.int_op("aten::sub", trip, 1)
        for j, (x, a, d) in enumerate(zip(xs, axes, in_dirs)):
            t = cx.type(n_state + j)
            shape = None if t.shape is None else (*t.shape[:a], *t.shape[a + 1:])
            piece = cx.op("aten::select", x, a, cx.int_op("aten::sub", last, i) if d else i)
            body_inputs.append(Val(f"scan_in{j}", TensorType(t.dtype, shape), tensor=piece, block=blk))
    # the slices' srcore types (their shapes), which the body's ops' rules build on: a body whose ONNX
    # types are unknown (a function body's undeclared inputs) then still converts
    conv.propagate_new(blk, mark)

    elem_shapes: list = []

    def finish(outs):
        res = [conv.builder.value(True)]
        res += [_value_of(cx, v) for v in outs[:n_state]]
        elem_shapes.extend(getattr(v.type, "shape", None) for v in outs[n_state:])
        return res + _append_scan_outputs(cx, block_lists, outs[n_state:])

    conv.convert_subgraph(body, blk, body_inputs, cx.scope, "body", finish)
    outs = [Val("", t, tensor=o, seq=isinstance(t, ListType), block=conv.builder.block)
            for o, t in zip(node.outputs[:n_state], carried_types)]
    for lst, a, d, shape in zip(node.outputs[n_state:], out_axes, out_dirs, elem_shapes):
        y = cx.op("aten::stack", lst, a)
        if shape is not None:
            # srcore's rules cannot see into the loop's list: its elements' shape, from the body, given
            # by a reshape (a view; a dim not known at conversion read from the result) so that what
            # reads the stacked output knows its rank
            a = norm_axis(a, len(shape) + 1, "scan_output_axes")
            dims = [*shape[:a], trip, *shape[a:]]
            y = cx.op("aten::reshape", y, [s if isinstance(s, int) else cx.int_op("aten::size", y, k)
                                           for k, s in enumerate(dims)])
        outs.append(cx.op("aten::flip", y, [a]) if d else y)
    return tuple(outs)


CONVERTERS = table(If=(if_, 13, 16, 19, 21, 23, 24, 25), Loop=(loop, 13, 16, 19, 21, 23, 24, 25),
                   Scan=(scan, 9, 11, 16, 19, 21, 23, 24, 25))
