"""Sequence ops onto srcore's tensor lists (``Tensor[]``, as TorchScript holds them); Optional.

An ONNX sequence is a value: ``SequenceInsert``/``SequenceErase`` return a new sequence and leave
their input as it was, so they copy the list (``aten::list``) before ``aten::insert``/``aten::pop``.
Positions may be negative (from the back), as ONNX and Python both count them.

An ``Optional`` built in the graph around a tensor or sequence is that value (``Optional``,
``OptionalGetElement`` pass it on; ``OptionalHasElement`` is the constant true); an empty one (no
input) has ``OptionalHasElement`` false. Whether an optional *graph input* holds a value is known
only at run time: refused by name.
"""
from __future__ import annotations

import numpy as np

from ....ir.types import INT, ListType, OptionalType, TensorType
from ..context import NodeContext, Unsupported
from ..values import Val
from ._util import ints_val, norm_axis, table

_SEQ = ListType(TensorType())


def _position(cx: NodeContext, i: int):
    """Input ``i`` (a 0-d int tensor) as an int item."""
    (p,) = cx.int_items(i, "position")
    return p


def sequence_construct(cx: NodeContext):
    return cx.op("prim::ListConstruct", *(cx.x(i) for i in range(cx.n_inputs)), types=[_SEQ])


def sequence_empty(cx: NodeContext):
    cx.attr("dtype", None)   # the element type of an empty list matters to nothing srcore computes
    return cx.op("prim::ListConstruct", types=[_SEQ])


def sequence_at(cx: NodeContext):
    return cx.op("aten::__getitem__", cx.seq(0), _position(cx, 1), types=[TensorType()])


def sequence_length(cx: NodeContext):
    return ints_val(cx, [cx.op("aten::len", cx.seq(0), types=[INT])], scalar=True)


def _copy(cx: NodeContext):
    return cx.op("aten::list", cx.seq(0), types=[_SEQ])


def sequence_insert(cx: NodeContext):
    s = _copy(cx)
    if cx.has(2):
        cx.op("aten::insert", s, _position(cx, 2), cx.x(1), types=[])
    else:
        cx.op("aten::append", s, cx.x(1), types=[_SEQ])
    return s


def sequence_erase(cx: NodeContext):
    s = _copy(cx)
    cx.op("aten::pop", s, _position(cx, 1) if cx.has(1) else -1, types=[TensorType()])
    return s


def concat_from_sequence(cx: NodeContext):
    axis = cx.attr("axis")
    new_axis = cx.attr("new_axis", 0)
    if new_axis:
        return cx.op("aten::stack", cx.seq(0), axis)
    return cx.op("aten::cat", cx.seq(0), axis)


def split_to_sequence(cx: NodeContext):
    r = cx.rank(0)
    axis = norm_axis(cx.attr("axis", 0), r)
    keep = cx.attr("keepdims", 1)
    x = cx.x(0)
    if not cx.has(1):
        return cx.op("aten::split", x, 1, axis, types=[_SEQ]) if keep else \
            cx.op("aten::unbind", x, axis, types=[_SEQ])
    if cx.type(1).rank == 0:   # one size: equal parts, the last one shorter
        (size,) = cx.int_items(1, "split")
        return cx.op("aten::split", x, size, axis, types=[_SEQ])
    return cx.op("aten::split_with_sizes", x, cx.int_list(1, "split"), axis, types=[_SEQ])


def _empty(v: Val) -> bool:
    """An Optional node without input (:func:`optional`): no srcore value at all."""
    return isinstance(v.type, OptionalType) and v.tensor is None and v.const is None and v.ints is None


def _held(cx: NodeContext) -> Val:
    v = cx.val(0)
    if _empty(v):
        raise Unsupported(f"input {v.name!r} is an empty Optional")
    if isinstance(v.type, OptionalType):
        raise Unsupported(f"input {v.name!r} is an optional graph input: whether it holds a value is known "
                          "only at run time (srcore converts Optionals built in the graph)")
    return v


def optional(cx: NodeContext):
    cx.attr("type", None)   # the element type: srcore's value carries its own
    if not cx.has(0):
        return Val("", OptionalType(TensorType()))
    return _held(cx)


def optional_has_element(cx: NodeContext):
    has = cx.has(0) and not _empty(cx.val(0))
    if has:
        _held(cx)
    return Val("", TensorType("bool", ()), const=np.array(has))


def optional_get_element(cx: NodeContext):
    return _held(cx)


CONVERTERS = table(
    Optional=(optional, 15, 28), OptionalHasElement=(optional_has_element, 15, 18, 28),
    OptionalGetElement=(optional_get_element, 15, 18, 28),   # (28: more element types)
    SequenceConstruct=(sequence_construct, 11), SequenceEmpty=(sequence_empty, 11), SequenceAt=(sequence_at, 11),
    SequenceLength=(sequence_length, 11), SequenceInsert=(sequence_insert, 11), SequenceErase=(sequence_erase, 11),
    ConcatFromSequence=(concat_from_sequence, 11), SplitToSequence=(split_to_sequence, 11, 24),
)
