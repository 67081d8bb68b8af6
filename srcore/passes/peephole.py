"""Peephole rewrites, as a table of rules grouped by op kind.

A rule is ``rewrite(node) -> None | Value | list[Value] | Const``: ``None``
declines, values replace the node's outputs, ``Const(v)`` replaces its single
output by a constant. Every rule keeps each output's dtype and shape: the
arithmetic identities (``x + 0``, ``x - 0``, ``x * 1``, ``x / 1``) fire only
when the constant neither broadcasts ``x`` to a larger shape nor promotes its
dtype, and only when neither ``x`` nor the result is mutated later (the
rewrite makes the result alias ``x``). See ``docs/passes.md`` for the list.
"""
from __future__ import annotations

from typing import Any, Callable

import attrs

from .._repr import shared_repr
from ..ir.graph import Graph, Node, Value
from ..ir.types import (SCALAR_TYPE_CODES, AnyType, NoneType, OptionalType, TensorType)
from ..ir.alias import is_mutated
from ..ir.quant import is_quantized
from ._util import base_kind, const_or, dtype_of, is_floating, replace_with_constant, replace_with_values, walk_blocks
# one-tensor elementwise ops (any other arguments constants) that commute with a permutation: the table
# lives beside the pass's triggers, which read it
from .triggers import PERMUTE_COMMUTING


@attrs.frozen
@shared_repr
class Const:
    """A rewrite result: replace the node's output by this constant."""

    value: Any


@attrs.frozen
@shared_repr
class Rule:
    name: str
    op: str
    rewrite: Callable[[Node], Any]


def _producer(v: Value, kind: str) -> Node | None:
    return v.node if base_kind(v.node) == kind else None


def _can_alias(x: Value, out: Value) -> bool:
    return not is_mutated(x) and not is_mutated(out)


# -- involutions ----------------------------------------------------------------------------
def t_t(node: Node):
    inner = _producer(node.inputs[0], "aten::t")
    return inner.inputs[0] if inner is not None else None


def _norm_dim(d, rank):
    if not isinstance(d, int):
        return None
    if d >= 0:
        return d
    return None if rank is None else d + rank


def transpose_transpose(node: Node):
    inner = _producer(node.inputs[0], "aten::transpose")
    if inner is None or len(node.inputs) != 3 or len(inner.inputs) != 3:
        return None
    y = inner.inputs[0]
    rank = y.type.rank if isinstance(y.type, TensorType) else None
    a = {_norm_dim(const_or(v, None), rank) for v in inner.inputs[1:]}
    b = {_norm_dim(const_or(v, None), rank) for v in node.inputs[1:]}
    if None in a or a != b:
        return None
    return y


# -- elementwise before layout --------------------------------------------------------------


def unary_of_permute(node: Node):
    """``f(permute(x, dims)) -> permute(f(x), dims)``: ``f`` then runs over ``x``'s contiguous memory
    instead of a strided view (a detection head's ``view(...).permute(...).sigmoid()``), and the
    permute stays a view; what follows sees the same values, shape and dtype."""
    perm = _producer(node.inputs[0], "aten::permute")
    if (perm is None or len(node.outputs) != 1 or len(perm.inputs) != 2
            or any(v.node.kind != "prim::Constant" for v in node.inputs[1:])):
        return None
    x, out = perm.inputs[0], node.output
    if not (isinstance(x.type, TensorType) and isinstance(out.type, TensorType)):
        return None
    if is_mutated(x) or is_mutated(perm.output) or is_mutated(out):
        return None
    g = node.graph
    f = g.create(node.kind, [x, *node.inputs[1:]], [TensorType(out.type.dtype, x.type.shape)], source=node.source)
    f.schema = node.schema
    f.insert_before(node)
    p = g.create(perm.kind, [f.output, perm.inputs[1]], [out.type], source=perm.source)
    p.schema = perm.schema
    p.insert_before(node)
    return p.output


# -- arithmetic identities ------------------------------------------------------------------
def _identity_ok(node: Node, identity: int, true_div: bool = False) -> Value | None:
    x, other = node.inputs[0], node.inputs[1]
    out = node.outputs[0]
    c = const_or(other, None)
    if c is None or isinstance(c, bool):
        return None
    if not isinstance(x.type, TensorType):  # int/float arithmetic: only when the type is unchanged
        if isinstance(c, (int, float)) and c == identity and x.type == out.type and not true_div:
            return x if type(c) is int or str(x.type) == "float" else None
        return None
    dtype = dtype_of(x)
    if dtype is None or dtype == "bool":
        return None
    out_dtype = dtype_of(out)
    if out_dtype is not None and out_dtype != dtype:
        return None
    if isinstance(c, int):
        if c != identity or (true_div and not is_floating(dtype)):
            return None
    elif isinstance(c, float):
        if c != identity or not is_floating(dtype):
            return None
    elif hasattr(c, "shape"):
        if str(c.dtype) != dtype or not (c == identity).all() or not _broadcasts_into(c.shape, x.type.shape):
            return None
        if true_div and not is_floating(dtype):
            return None
    else:
        return None
    return x if _can_alias(x, out) else None


def _broadcasts_into(cshape, xshape) -> bool:
    """True if a tensor of ``cshape`` broadcast against ``xshape`` leaves ``xshape`` unchanged."""
    if len(cshape) == 0:
        return True
    if xshape is None or len(cshape) > len(xshape):
        return False
    for cd, xd in zip(reversed(cshape), reversed(xshape)):
        if cd != 1 and cd != xd:
            return False
    return True


def add_zero(node: Node):
    if len(node.inputs) == 3 and const_or(node.inputs[2], None) is None:
        return None  # alpha unknown
    return _identity_ok(node, 0) if len(node.inputs) in (2, 3) else None


def mul_one(node: Node):
    return _identity_ok(node, 1) if len(node.inputs) == 2 else None


def div_one(node: Node):
    if len(node.inputs) == 3 and const_or(node.inputs[2], 0) is not None:
        return None  # rounding_mode="floor"/"trunc" changes the values
    return _identity_ok(node, 1, true_div=True)


# -- no-ops for inference ---------------------------------------------------------------------
def contiguous_contiguous(node: Node):
    inner = _producer(node.inputs[0], "aten::contiguous")
    if inner is None:
        return None
    fmt = [const_or(v, None) for v in node.inputs[1:]]
    inner_fmt = [const_or(v, None) for v in inner.inputs[1:]]
    return node.inputs[0] if fmt == inner_fmt else None


def to_same_dtype(node: Node):
    x = node.inputs[0]
    dtype = dtype_of(x)
    if dtype is None:
        return None
    args = [const_or(v, _Unknown) for v in node.inputs[1:]]
    if _Unknown in args:
        return None
    if len(args) == 4 and isinstance(args[0], int):  # to(self, dtype, non_blocking, copy, memory_format)
        code, copy, fmt = args[0], args[2], args[3]
    elif len(args) == 5 and (args[0] is None or str(args[0]).startswith("cpu")):  # to(self, device, dtype, ...)
        code, copy, fmt = args[1], args[3], args[4]
    else:
        return None
    if copy or fmt is not None or SCALAR_TYPE_CODES.get(code) != dtype:
        return None
    return x


def type_as_same_dtype(node: Node):
    """``x.type_as(y)`` is ``x`` when both dtypes are known and equal (T5 writes
    ``softmax(s.float()).type_as(s)``)."""
    x = node.inputs[0]
    dtype = dtype_of(x)
    return x if dtype is not None and dtype == dtype_of(node.inputs[1]) else None


class _Unknown:
    pass


def identity_op(node: Node):
    from .training_ops import identity_observed
    return None if identity_observed(node) else node.inputs[0]


def refined_already(node: Node):
    """``prim::unchecked_cast(x)`` (TorchScript's ``Optional[Tensor]`` refinement) is ``x`` once ``x``'s
    type is a tensor: the ``if mask is not None`` branch it refined for was taken at compile time."""
    x = node.inputs[0]
    return x if isinstance(x.type, TensorType) and isinstance(node.output.type, TensorType) else None


def clone_unobserved(node: Node):
    """``clone(x)`` (no memory format) is ``x`` when nothing writes either (torch.export makes an
    eval-mode dropout a clone) and the copy is no graph output (two outputs, or an output and an
    input, would share memory)."""
    from .training_ops import identity_observed
    x, out = node.inputs[0], node.output
    if (len(node.inputs) != 2 or const_or(node.inputs[1], _Unknown) is not None or identity_observed(node)
            or not _can_alias(x, out) or any(u.user.kind == "prim::Return" for u in out.uses)):
        return None
    return x


# -- static facts ------------------------------------------------------------------------------
def size_static(node: Node):
    t = node.inputs[0].type
    if not isinstance(t, TensorType) or t.shape is None:
        return None
    if len(node.inputs) == 1:
        return Const(list(t.shape)) if all(isinstance(d, int) for d in t.shape) else None
    dim = const_or(node.inputs[1], None)
    if not isinstance(dim, int) or not -len(t.shape) <= dim < len(t.shape):
        return None
    d = t.shape[dim]
    return Const(d) if isinstance(d, int) else None


def dim_static(node: Node):
    t = node.inputs[0].type
    return Const(t.rank) if isinstance(t, TensorType) and t.rank is not None else None


def is_floating_point_known(node: Node):
    # TorchScript'd library code (nn.MultiheadAttention's mask canonicalization) asks this of
    # tensors whose dtype the types already know; no kernel needed then
    dtype = dtype_of(node.inputs[0])
    return None if dtype is None else Const(is_floating(dtype) and not dtype.startswith("complex"))


def len_known(node: Node):
    x = node.inputs[0]
    if isinstance(x.type, TensorType):
        shape = x.type.shape
        return Const(shape[0]) if shape and isinstance(shape[0], int) else None
    lc = _producer(x, "prim::ListConstruct")
    if lc is not None and not is_mutated(x):
        return Const(len(lc.inputs))
    return None


def list_unpack(node: Node):
    lc = _producer(node.inputs[0], "prim::ListConstruct")
    if lc is None or len(lc.inputs) != len(node.outputs) or is_mutated(node.inputs[0]):
        return None
    return list(lc.inputs)


def broadcast_equal_shapes(node: Node):
    """``ListUnpack(broadcast_tensors([xs]))`` is ``xs`` when their static shapes are equal (TorchScript's
    ``F.mse_loss`` and ``F.l1_loss`` broadcast their operands first): nothing to broadcast, and torch's
    results are views of ``xs`` anyway; not when anything writes them."""
    bt = _producer(node.inputs[0], "aten::broadcast_tensors")
    lc = _producer(bt.inputs[0], "prim::ListConstruct") if bt is not None else None
    if lc is None or len(lc.inputs) != len(node.outputs) or is_mutated(node.inputs[0]) or is_mutated(bt.inputs[0]):
        return None
    shapes = [x.type.shape if isinstance(x.type, TensorType) else None for x in lc.inputs]
    if shapes[0] is None or not all(isinstance(d, int) for d in shapes[0]) or any(sh != shapes[0] for sh in shapes):
        return None
    if not all(_can_alias(x, out) for x, out in zip(lc.inputs, node.outputs)):
        return None
    return list(lc.inputs)


def tuple_unpack(node: Node):
    tc = _producer(node.inputs[0], "prim::TupleConstruct")
    if tc is None or len(tc.inputs) != len(node.outputs):
        return None
    return list(tc.inputs)


def _index(node: Node, kind: str, check_mutation: bool):
    src = _producer(node.inputs[0], kind)
    i = const_or(node.inputs[1], None) if len(node.inputs) == 2 else None
    if src is None or not isinstance(i, int) or isinstance(i, bool):
        return None
    if not -len(src.inputs) <= i < len(src.inputs) or (check_mutation and is_mutated(node.inputs[0])):
        return None
    return src.inputs[i]


def tuple_index(node: Node):
    return _index(node, "prim::TupleConstruct", False)


def list_getitem(node: Node):
    return _index(node, "prim::ListConstruct", True)


def _slice_range(v: Value, dim: int):
    """``(x, start, end)`` when ``v`` is ``x[start:end]`` along ``dim`` (step 1, bounds clamped as torch
    does) of a dim of static size; else None."""
    n = v.node
    if base_kind(n) != "aten::slice" or len(n.inputs) != 5:
        return None
    x = n.inputs[0]
    shape = x.type.shape if isinstance(x.type, TensorType) else None
    d, start, end, step = (const_or(i, _NOT_CONST) for i in n.inputs[1:])
    if shape is None or _norm_dim(d, len(shape)) != dim or step != 1 or not isinstance(shape[dim], int):
        return None
    size = shape[dim]
    bounds = []
    for b, default in ((start, 0), (end, size)):
        b = default if b is None else b
        if type(b) is not int:
            return None
        bounds.append(min(max(b + size if b < 0 else b, 0), size))
    return (x, *bounds) if bounds[0] < bounds[1] else None


_NOT_CONST = object()


def cat_adjacent_slices(node: Node):
    """``cat([.., x[a:b], x[b:c], ..], d)`` (slices along ``d``) reads ``x[a:c]``, and ``x`` itself when
    that is all of ``x`` (YOLOv8's C2f cats both halves of its ``chunk`` back): fewer pieces to copy,
    and a half only the cat read is no longer made."""
    if len(node.inputs) != 2 or not isinstance(node.output.type, TensorType) or node.output.type.rank is None:
        return None
    lst = node.inputs[0]
    lc = _producer(lst, "prim::ListConstruct")
    dim = _norm_dim(const_or(node.inputs[1], None), node.output.type.rank)
    if lc is None or dim is None or is_mutated(lst):
        return None
    merged: list = []   # (value, (x, start, end) or None)
    for v in lc.inputs:
        r = _slice_range(v, dim)
        last = merged[-1][1] if merged else None
        if r is not None and last is not None and last[0] is r[0] and last[2] == r[1]:
            merged[-1] = (None, (r[0], last[1], r[2]))
        else:
            merged.append((v, r))
    if len(merged) == len(lc.inputs):
        return None
    g = node.graph
    pieces = []
    for v, r in merged:
        if v is not None:
            pieces.append(v)
            continue
        x, start, end = r
        if end - start == x.type.shape[dim]:
            pieces.append(x)
            continue
        shape = x.type.shape[:dim] + (end - start,) + x.type.shape[dim + 1:]
        consts = [g.insert_constant(c, before=node) for c in (dim, start, end, 1)]
        sl = g.create("aten::slice", [x, *consts], [TensorType(x.type.dtype, shape)], source=node.source)
        sl.insert_before(node)
        pieces.append(sl.output)
    new_list = g.create("prim::ListConstruct", pieces, [lst.type], source=lc.source)
    new_list.insert_before(node)
    cat = g.create(node.kind, [new_list.output, node.inputs[1]], [node.output.type], source=node.source)
    cat.insert_before(node)
    if "scope" in node.meta:
        cat.meta["scope"] = node.meta["scope"]
    return cat.output


def _none_test(node: Node) -> bool | None:
    """The value of ``a is b`` when the types decide it (``None`` = unknown)."""
    a, b = node.inputs
    na, nb = isinstance(a.type, NoneType), isinstance(b.type, NoneType)
    if na and nb:
        return True
    for none_side, other in ((na, b), (nb, a)):
        if none_side and not isinstance(other.type, (OptionalType, AnyType, NoneType)):
            return False
    return None


def is_none(node: Node):
    r = _none_test(node)
    return None if r is None else Const(r)


def isnot_none(node: Node):
    r = _none_test(node)
    return None if r is None else Const(not r)


# -- work nobody reads ------------------------------------------------------------------------
def mha_weights_unread(node: Node):
    """``nn.MultiheadAttention``'s fast path asked for attention weights (its default) that nothing
    reads, as in ``y, _ = attn(x, x, x)``: the same op with ``need_weights=False`` gives the same
    output without computing (B, L, S) weights, and engines take it."""
    if len(node.outputs) != 2 or node.outputs[1].uses or len(node.inputs) < 9:
        return None
    ins = list(node.inputs)
    if len(ins) > 10 and const_or(ins[10], None) is not True:
        return None
    g = node.graph
    if len(ins) == 9:   # mask left out: its default
        ins.append(g.insert_constant(None, NoneType(), before=node))
    false = g.insert_constant(False, before=node)
    ins = ins[:10] + [false] + ins[11:]
    w = node.outputs[1].type
    empty = w.with_shape((0,)) if isinstance(w, TensorType) else w
    new = g.create(node.kind, ins, (node.outputs[0].type, empty), dict(node.attrs), node.source,
                   [o.name for o in node.outputs])
    new.insert_before(node)
    return list(new.outputs)


def _reduce_values_only(node: Node, kind: str):
    """``max.dim`` / ``min.dim`` whose indices nothing reads (``x.max(d)[0]``, ``values, _ = x.max(d)``):
    ``amax`` / ``amin`` over ``[d]`` give the same values (NaN propagating alike) without the arg
    reduction, a second pass over the tensor (a kNN edge feature's max over neighbours)."""
    if len(node.outputs) != 2 or node.outputs[1].uses or len(node.inputs) != 3:
        return None
    d, keep = const_or(node.inputs[1], None), const_or(node.inputs[2], None)
    if not isinstance(d, int) or isinstance(d, bool) or not isinstance(keep, bool):
        return None
    g = node.graph
    dims = g.insert_constant([d], before=node)
    new = g.create(kind, [node.inputs[0], dims, node.inputs[2]], (node.outputs[0].type,), {}, node.source,
                   [node.outputs[0].name])
    new.insert_before(node)
    return [new.outputs[0]]


def _quantized_self(node: Node) -> bool:
    return node.inputs and is_quantized(dtype_of(node.inputs[0]))


def _stable_sort(node: Node, x: Value, dim: Value, descending: Value) -> Node:
    """``aten::sort.stable(x, stable=True, dim, descending)`` inserted before ``node``."""
    g = node.graph
    t = x.type
    idx = t.with_dtype("int64").with_qparams(None) if isinstance(t, TensorType) else TensorType("int64")
    new = g.create("aten::sort", [x, g.insert_constant(True, before=node), dim, descending], (t, idx), {},
                   node.source, [None, None])
    new.insert_before(node)
    return new


def sort_values_only(node: Node):
    """An unstable ``sort`` of a quantized tensor whose indices nothing reads: a stable sort gives the
    same values (equal stored integers are equal values; torch's unstable order of ties only moves the
    indices), and srcore runs the stable one on quantized tensors. Float tensors are left alone
    (-0.0 and 0.0 tie, yet differ)."""
    if len(node.outputs) != 2 or node.outputs[1].uses or not _quantized_self(node):
        return None
    ins = node.inputs
    if len(ins) == 4 and const_or(ins[1], None) is True:   # sort.stable(stable=True): runs as it is
        return None
    if len(ins) == 3:                                      # sort(self, dim, descending)
        dim, desc = ins[1], ins[2]
    elif len(ins) == 4:                                    # sort.stable(self, stable, dim, descending)
        dim, desc = ins[2], ins[3]
    else:
        return None
    new = _stable_sort(node, ins[0], dim, desc)
    return list(new.outputs)


def topk_values_only(node: Node):
    """``topk(x, k, dim, largest, sorted=True)`` of a quantized tensor whose indices nothing reads: the
    first k values of a stable sort (descending when ``largest``) along ``dim``, the same values; torch's
    order of ties only moves the indices, which srcore does not reproduce."""
    if len(node.outputs) != 2 or node.outputs[1].uses or not _quantized_self(node) or len(node.inputs) != 5:
        return None
    x, k, dim, largest, sorted_ = node.inputs
    if const_or(sorted_, None) is not True or not isinstance(const_or(dim, None), int):
        return None
    s = _stable_sort(node, x, dim, largest)
    g = node.graph
    zero, one = g.insert_constant(0, before=node), g.insert_constant(1, before=node)
    cut = g.create("aten::slice", [s.outputs[0], dim, zero, k, one], (node.outputs[0].type,), {}, node.source,
                   [node.outputs[0].name])
    cut.insert_before(node)
    return [cut.outputs[0], s.outputs[1]]


def max_values_only(node: Node):
    return _reduce_values_only(node, "aten::amax")


def min_values_only(node: Node):
    return _reduce_values_only(node, "aten::amin")


RULES_LIST = [
    Rule("t(t(x)) -> x", "aten::t", t_t),
    Rule("transpose(transpose(x, a, b), a, b) -> x", "aten::transpose", transpose_transpose),
    *[Rule("f(permute(x)) -> permute(f(x))", op, unary_of_permute) for op in PERMUTE_COMMUTING],
    Rule("x + 0 -> x", "aten::add", add_zero),
    Rule("x - 0 -> x", "aten::sub", add_zero),
    Rule("x * 1 -> x", "aten::mul", mul_one),
    Rule("x / 1 -> x", "aten::div", div_one),
    Rule("contiguous(contiguous(x)) -> contiguous(x)", "aten::contiguous", contiguous_contiguous),
    Rule("x.to(x.dtype) -> x", "aten::to", to_same_dtype),
    Rule("x.type_as(y) -> x (same dtype)", "aten::type_as", type_as_same_dtype),
    Rule("detach(x) -> x", "aten::detach", identity_op),
    Rule("clone(x) -> x (never written)", "aten::clone", clone_unobserved),
    Rule("unchecked_cast(x: Tensor) -> x", "prim::unchecked_cast", refined_already),
    Rule("size(static) -> constant", "aten::size", size_static),
    Rule("dim(known rank) -> constant", "aten::dim", dim_static),
    Rule("len(known list) -> constant", "aten::len", len_known),
    Rule("is_floating_point(known dtype) -> constant", "aten::is_floating_point", is_floating_point_known),
    Rule("ListUnpack(ListConstruct(xs)) -> xs", "prim::ListUnpack", list_unpack),
    Rule("TupleUnpack(TupleConstruct(xs)) -> xs", "prim::TupleUnpack", tuple_unpack),
    Rule("ListUnpack(broadcast_tensors(xs of one static shape)) -> xs", "prim::ListUnpack", broadcast_equal_shapes),
    Rule("TupleIndex(TupleConstruct(xs), i) -> xs[i]", "prim::TupleIndex", tuple_index),
    Rule("ListConstruct(xs)[i] -> xs[i]", "aten::__getitem__", list_getitem),
    Rule("cat(x[a:b], x[b:c]) -> cat(x[a:c])", "aten::cat", cat_adjacent_slices),
    Rule("x is None (known type) -> constant", "aten::__is__", is_none),
    Rule("x is not None (known type) -> constant", "aten::__isnot__", isnot_none),
    Rule("multi-head attention weights never read -> need_weights=False", "aten::_native_multi_head_attention",
         mha_weights_unread),
    Rule("max(x, d) with indices never read -> amax(x, [d])", "aten::max", max_values_only),
    Rule("min(x, d) with indices never read -> amin(x, [d])", "aten::min", min_values_only),
    Rule("sort(q) with indices never read -> sort(q, stable=True) (quantized)", "aten::sort", sort_values_only),
    Rule("topk(q, k) with indices never read -> sort(q, stable=True)[:k] (quantized)", "aten::topk",
         topk_values_only),
]


def group_rules(rules) -> dict[str, tuple[Rule, ...]]:
    table: dict[str, list[Rule]] = {}
    for r in rules:
        table.setdefault(r.op, []).append(r)
    return {k: tuple(v) for k, v in table.items()}


RULES: dict[str, tuple[Rule, ...]] = group_rules(RULES_LIST)


def peephole(graph: Graph, *, rules: dict[str, tuple[Rule, ...]] | None = None,
             applied: list[str] | None = None) -> bool:
    """Apply the rules until none fires; ``applied`` collects the names of the rules that fired."""
    table = RULES if rules is None else rules
    changed = False
    progress = True
    while progress:
        progress = False
        for block in list(walk_blocks(graph.block)):
            for node in list(block.nodes):
                if node.owning_block is None:
                    continue
                for rule in table.get(base_kind(node), ()):
                    result = rule.rewrite(node)
                    if result is None:
                        continue
                    _apply(node, result)
                    if applied is not None:
                        applied.append(rule.name)
                    progress = changed = True
                    break
    return changed


def _apply(node: Node, result) -> None:
    if isinstance(result, Const):
        replace_with_constant(node, result.value)
    elif isinstance(result, Value):
        replace_with_values(node, [result])
    else:
        replace_with_values(node, list(result))
