"""Reductions: ReduceSum/Mean/Max/Min/Prod/L1/L2/LogSum/LogSumExp/SumSquare, ArgMax/ArgMin, CumSum, TopK."""
from __future__ import annotations

import numpy as np

from ..context import NodeContext, Unsupported
from ..dtypes import FLOATS, INTS, scalar_type
from ._util import dim_item, norm_axis, table

NUMERIC = FLOATS | INTS

#: the op version from which ``axes`` is an input instead of an attribute
_AXES_INPUT = {"ReduceSum": 13}


def _reduce_axes(cx: NodeContext) -> list | None:
    """The axes to reduce (normalized ints when known, else int items: torch takes negative dims);
    None means 'no reduction' (noop_with_empty_axes)."""
    r = cx.rank(0)
    from_input = cx.version >= _AXES_INPUT.get(cx.op_type, 18)
    noop = cx.attr("noop_with_empty_axes", 0) if from_input else 0
    if from_input:
        axes = cx.int_items(1, "axes") if cx.has(1) else []
    else:
        axes = cx.attr("axes", None) or []
    if not axes:
        return None if noop else list(range(r))
    if all(isinstance(a, int) for a in axes):
        return sorted({norm_axis(a, r) for a in axes})
    return axes


def _dims(cx: NodeContext, axes: list):
    return cx.list_value(axes)


def _sum(cx: NodeContext, x, axes, keep, dt):
    # torch sums small ints into int64; ONNX keeps the input's type
    return cx.op("aten::sum", x, axes, keep, scalar_type(dt) if dt in INTS else None)


def _dtype(cx: NodeContext, allowed) -> str:
    return cx.require_dtype(0, allowed)


def reduce(kind: str):
    def convert(cx: NodeContext):
        keep = bool(cx.attr("keepdims", 1))
        allowed = FLOATS if kind in ("mean", "l2", "log_sum", "log_sum_exp") else NUMERIC
        dt = _dtype(cx, allowed | {"bool"} if kind in ("max", "min") else allowed)
        axes = _reduce_axes(cx)
        x = cx.x(0)
        if axes is None:
            return cx.op("aten::clone", x, None)
        if not axes:  # rank 0: every reduction of a scalar is the scalar (or its square, abs...)
            axes_all = []
        else:
            axes_all = axes
        if kind == "prod" and not all(isinstance(a, int) for a in axes_all):
            # axes known at run time: one keepdim product per axis (any order), then drop those dims
            y = x
            for a in axes_all:
                y = cx.op("aten::prod", y, a, True, scalar_type(dt) if dt in INTS else None)
            return y if keep else cx.op("aten::squeeze", y, _dims(cx, axes_all))
        axes_all = axes_all if all(isinstance(a, int) for a in axes_all) else _dims(cx, axes_all)
        if kind == "sum":
            if not keep and axes_all == list(range(cx.rank(0))) and axes_all:  # everything: `x.sum()`
                return cx.op("aten::sum", x, scalar_type(dt) if dt in INTS else None)
            return _sum(cx, x, axes_all, keep, dt) if axes_all else cx.op("aten::clone", x, None)
        if kind == "mean":
            return cx.op("aten::mean", x, axes_all, keep, None) if axes_all else cx.op("aten::clone", x, None)
        if kind in ("max", "min"):
            if not axes_all:
                return cx.op("aten::clone", x, None)
            empty = _empty_reduction(cx, dt, kind)
            if empty is not None:
                return empty
            return cx.op("aten::amax" if kind == "max" else "aten::amin", _pad_maybe_empty(cx, x, dt, kind, axes_all),
                         axes_all, keep)
        if kind == "prod":
            y = x
            for a in sorted(axes_all, reverse=True):
                y = cx.op("aten::prod", y, a, keep, scalar_type(dt) if dt in INTS else None)
            return y
        if kind == "l1":
            ax = cx.op("aten::abs", x)
            return _sum(cx, ax, axes_all, keep, dt) if axes_all else ax
        if kind in ("l2", "sum_square"):
            sq = cx.op("aten::mul", x, x)
            s = _sum(cx, sq, axes_all, keep, dt) if axes_all else sq
            return cx.op("aten::sqrt", s) if kind == "l2" else s
        if kind == "log_sum":
            s = _sum(cx, x, axes_all, keep, dt) if axes_all else x
            return cx.op("aten::log", s)
        if kind == "log_sum_exp":
            if not axes_all:
                return cx.op("aten::clone", x, None)
            return cx.op("aten::logsumexp", x, axes_all, keep)
        raise AssertionError(kind)
    return convert


def _empty_reduction(cx: NodeContext, dt: str, kind: str):
    """ONNX's max/min of an empty set: the identity (the lowest / highest value of the dtype) at the
    output's shape. It applies when the input is known empty and the output known not to be (every
    output element then reduces nothing, whichever the axes); else None."""
    shape = cx.shape(0)
    out = cx.out_types[0] if cx.out_types else None
    oshape = out.shape if out is not None and getattr(out, "shape", None) is not None else None
    if shape is None or 0 not in shape or oshape is None or not all(isinstance(d, int) and d > 0 for d in oshape):
        return None
    if dt == "bool":
        fill = kind == "min"
    elif dt in FLOATS:
        fill = float("-inf") if kind == "max" else float("inf")
    else:
        info = np.iinfo(dt)
        fill = int(info.min if kind == "max" else info.max)
    return cx.op("aten::full", list(oshape), fill, scalar_type(dt), None, None, None)


def _identity(dt: str, kind: str):
    """The identity of max / min in ``dt``: ONNX's result of reducing nothing."""
    if dt == "bool":
        return kind == "min"
    if dt in FLOATS:
        return float("-inf") if kind == "max" else float("inf")
    info = np.iinfo(dt)
    return int(info.min if kind == "max" else info.max)


def _pad_maybe_empty(cx: NodeContext, x, dt: str, kind: str, axes: list):
    """``x`` padded by one identity element at the end of each reduced axis whose size is not known
    positive (a size known at run time only, e.g. a Loop body's gathered rows): ONNX's max / min of an
    empty set is the identity (onnxruntime gives it), torch's amax / amin refuse an empty reduction and
    srcore's kernels failed at run time. The padding changes no non-empty result."""
    shape = cx.shape(0)
    if shape is None or not isinstance(axes, (list, tuple)) or not all(isinstance(a, int) for a in axes):
        return x   # axes known at run time only (a Value): no padding, as before
    r = len(shape)
    unsure = sorted({a % r for a in axes if not (isinstance(shape[a % r], int) and shape[a % r] > 0)})
    if not unsure:
        return x
    pad = [0] * (2 * (r - unsure[0]))
    for a in unsure:   # constant_pad_nd lists (before, after) from the last dim backwards
        pad[2 * (r - 1 - a) + 1] = 1
    return cx.op("aten::constant_pad_nd", x, pad, _identity(dt, kind))


def arg_reduce(kind: str):
    def convert(cx: NodeContext):
        cx.require_dtype(0, NUMERIC)
        r = cx.rank(0)
        axis = norm_axis(cx.attr("axis", 0), r)
        keep = bool(cx.attr("keepdims", 1))
        last = cx.attr("select_last_index", 0)
        x = cx.x(0)
        if not last:
            return cx.op(kind, x, axis, keep)
        idx = cx.op(kind, cx.op("aten::flip", x, [axis]), axis, keep)  # first in the flipped = last
        n = dim_item(cx, 0, x, axis)
        return cx.op("aten::rsub", idx, n - 1 if isinstance(n, int) else cx.int_op("aten::sub", n, 1), 1)
    return convert


def cumulative(kind: str, identity: int):
    """CumSum / CumProd: ``aten::cumsum``/``cumprod``; ``exclusive`` shifts in ``identity``."""
    def convert(cx: NodeContext):
        return _cumulative(cx, kind, identity)
    convert.__name__ = kind.split("::")[1]
    return convert


def _cumulative(cx: NodeContext, kind: str, identity: int):
    dt = cx.require_dtype(0, NUMERIC)
    r = cx.rank(0)
    exclusive, reverse = cx.attr("exclusive", 0), cx.attr("reverse", 0)
    (axis,) = cx.int_items(1, "axis")
    if isinstance(axis, int):
        axis = norm_axis(axis, r)
    x = cx.x(0)
    if reverse:
        x = cx.op("aten::flip", x, [axis])
    y = cx.op(kind, x, axis, scalar_type(dt) if dt in INTS else None)
    if exclusive and isinstance(axis, int):  # shift by one along the axis: [0, y0, y1, ...]
        n = dim_item(cx, 0, x, axis)
        y = cx.op("aten::narrow", y, axis, 0, n - 1 if isinstance(n, int) else cx.int_op("aten::sub", n, 1))
        pad = [0, 0] * (r - 1 - axis) + [1, 0]
        y = cx.op("aten::constant_pad_nd", y, pad, identity)
    elif exclusive:  # the axis known at run time: an identity slice, then all but the last
        n = cx.int_op("aten::sub", cx.int_op("aten::size", x, axis), 1)
        zero = cx.op("aten::full_like", cx.op("aten::narrow", y, axis, 0, 1), identity, None, None, None, None, None)
        y = cx.op("aten::cat", [zero, cx.op("aten::narrow", y, axis, 0, n)], axis)
    if reverse:
        y = cx.op("aten::flip", y, [axis])
    return y


def topk(cx: NodeContext):
    cx.require_dtype(0, NUMERIC)
    r = cx.rank(0)
    axis = norm_axis(cx.attr("axis", -1), r)
    largest, sorted_ = bool(cx.attr("largest", 1)), bool(cx.attr("sorted", 1))
    k = cx.int_items(1, "K")
    if len(k) != 1:
        raise Unsupported("K must hold one value")
    return cx.op("aten::topk", cx.x(0), k[0], axis, largest, True if not sorted_ else sorted_, n_out=2)


CONVERTERS = table(
    ReduceSum=(reduce("sum"), 13), ReduceMean=(reduce("mean"), 13, 18),
    ReduceMax=(reduce("max"), 13, 18, 20), ReduceMin=(reduce("min"), 13, 18, 20),
    ReduceProd=(reduce("prod"), 13, 18), ReduceL1=(reduce("l1"), 13, 18), ReduceL2=(reduce("l2"), 13, 18),
    ReduceLogSum=(reduce("log_sum"), 13, 18, 28), ReduceLogSumExp=(reduce("log_sum_exp"), 13, 18, 28),
    ReduceSumSquare=(reduce("sum_square"), 13, 18),
    ArgMax=(arg_reduce("aten::argmax"), 13), ArgMin=(arg_reduce("aten::argmin"), 13),
    CumSum=(cumulative("aten::cumsum", 0), 11, 14), CumProd=(cumulative("aten::cumprod", 1), 26), TopK=(topk, 11, 24),
)
