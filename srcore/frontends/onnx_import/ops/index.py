"""Indexing and rearranging ONNX ops: Gather*, Scatter*, OneHot, NonZero, Trilu, Pad, DepthToSpace,
SpaceToDepth."""
from __future__ import annotations

import numpy as np

from ....ir.types import ListType, TensorType
from ..context import NodeContext, Unsupported
from ..dtypes import FLOATS, INTS, scalar_type
from ._util import cast, dim_item, ints_val, norm_axis, scalar_arg, table

#: slice end meaning "to the end of the dim" (as torch writes it)
INT64_MAX = 2 ** 63 - 1

INDEX = {"int32", "int64"}


def _wrap_indices(cx: NodeContext, i: int, x, axis: int):
    """Indices input ``i`` with negatives wrapped (ONNX counts them from the end; torch kernels may not)."""
    cx.require_dtype(i, INDEX, "indices")
    c = cx.const(i)
    n = dim_item(cx, 0, x, axis)
    if c is not None and isinstance(n, int):
        if c.size and (c.min() < -n or c.max() >= n):
            raise Unsupported(f"indices out of range [-{n}, {n - 1}]")
        wrapped = np.where(c < 0, c + n, c).astype(np.int64)
        from ..values import Val
        from ....ir.types import TensorType

        return cx.conv.tensor_of(Val(f"{cx.val(i).name}.wrapped", TensorType("int64", wrapped.shape),
                                     const=wrapped))
    idx = cx.x(i)
    return cx.op("aten::remainder", idx, n)  # -1 -> n-1; valid indices unchanged


def gather(cx: NodeContext):
    v = cx.val(0)
    r = cx.rank(0)
    axis = norm_axis(cx.attr("axis", 0), r)
    c = cx.const(1)
    if v.ints is not None and c is not None and r == 1:  # picking entries of a shape value
        items = list(v.known_ints() or v.ints)
        if c.size and (c.min() < -len(items) or c.max() >= len(items)):
            raise Unsupported(f"indices out of range for a shape of {len(items)} entries")
        picked = [items[int(j)] for j in c.reshape(-1)]
        return ints_val(cx, picked, scalar=c.ndim == 0, dtype=v.dtype or "int64")
    x = cx.x(0)
    if c is not None and c.ndim == 0:
        j = int(c)
        n = dim_item(cx, 0, x, axis)
        if isinstance(n, int) and not -n <= j < n:
            raise Unsupported(f"index {j} out of range for a dim of {n}")
        return cx.op("aten::select", x, axis, j)
    idx = _wrap_indices(cx, 1, x, axis)
    ishape = cx.shape(1)
    if ishape is not None and len(ishape) == 1:
        return cx.op("aten::index_select", x, axis, idx)
    if axis == 0 and r == 2 and cx.dtype(1) == "int64":
        return cx.op("aten::embedding", x, idx, -1, False, False)
    if ishape is None:
        raise Unsupported("the rank of the indices is unknown")
    flat = cx.op("aten::reshape", idx, [-1])
    y = cx.op("aten::index_select", x, axis, flat)
    dims = [dim_item(cx, 0, x, d) for d in range(axis)] + \
        [dim_item(cx, 1, idx, d) for d in range(len(ishape))] + [dim_item(cx, 0, x, d) for d in range(axis + 1, r)]
    return cx.op("aten::reshape", y, cx.list_value(dims))


def gather_elements(cx: NodeContext):
    axis = norm_axis(cx.attr("axis", 0), cx.rank(0))
    x = cx.x(0)
    return cx.op("aten::gather", x, axis, _wrap_indices(cx, 1, x, axis), False)


def gather_nd(cx: NodeContext):
    """``x[b..., idx[b..., m..., 0], ..., idx[b..., m..., k-1]]``: one advanced index per indexed dim
    (negative indices wrapped), the ``batch_dims`` leading dims indexed by aranges that broadcast
    along the indices' own leading dims."""
    b = int(cx.attr("batch_dims", 0))
    cx.require_dtype(1, {"int64", "int32"}, "indices")
    ishape = cx.shape(1)
    if ishape is None or not isinstance(ishape[-1], int):
        raise Unsupported("the last dim of the indices must be known at conversion")
    if b < 0 or b >= len(ishape):
        raise Unsupported(f"batch_dims={b} for indices of rank {len(ishape)}")
    x, idx = cx.x(0), cx.x(1)
    if cx.dtype(1) != "int64":
        idx = cast(cx, idx, "int64")
    k = ishape[-1]
    rank = len(ishape) - 1            # the rank of each index tensor
    parts = []
    for d in range(b):
        shape = [1] * rank
        shape[d] = -1
        ar = cx.op("aten::arange", dim_item(cx, 0, x, d), scalar_type("int64"), None, None, None)
        parts.append(cx.op("aten::reshape", ar, shape))
    for j in range(k):
        ij = cx.op("aten::select", idx, -1, j)
        parts.append(cx.op("aten::remainder", ij, dim_item(cx, 0, x, b + j)))
    return cx.op("aten::index", x, parts)


_REDUCE = {"none": None, "add": "sum", "mul": "prod", "max": "amax", "min": "amin"}


def scatter_elements(cx: NodeContext):
    axis = norm_axis(cx.attr("axis", 0), cx.rank(0))
    reduction = cx.attr("reduction", "none")
    if reduction not in _REDUCE:
        raise Unsupported(f"reduction={reduction!r}")
    x = cx.x(0)
    idx = _wrap_indices(cx, 1, x, axis)
    if reduction == "none":
        return cx.op("aten::scatter", x, axis, idx, cx.x(2))
    return cx.op("aten::scatter_reduce", x, axis, idx, cx.x(2), _REDUCE[reduction], True)


def scatter_nd(cx: NodeContext):
    reduction = cx.attr("reduction", "none")
    if reduction not in ("none", "add", "mul", "max", "min"):
        raise Unsupported(f"reduction={reduction!r}")
    cx.require_dtype(1, {"int64"}, "indices")
    ishape = cx.shape(1)
    if ishape is None or not isinstance(ishape[-1], int):
        raise Unsupported("the last dim of the indices must be known at conversion")
    x, idx = cx.x(0), cx.x(1)
    parts = [cx.op("aten::remainder", cx.op("aten::select", idx, -1, j), dim_item(cx, 0, x, j))
             for j in range(ishape[-1])]
    if reduction in ("none", "add"):
        return cx.op("aten::index_put", x, parts, cx.x(2), reduction == "add")
    return _scatter_nd_reduce(cx, x, parts, ishape, {"mul": "prod", "max": "amax", "min": "amin"}[reduction])


def _scatter_nd_reduce(cx: NodeContext, x, parts, ishape, reduce: str):
    """ScatterND multiplying / keeping the max / min: ``scatter_reduce`` along the flattened indexed
    dims (duplicate indices combine, as ONNX's reference applies them one after another)."""
    shape = cx.shape(0)
    k = ishape[-1]
    if shape is None or not all(isinstance(d, int) for d in shape) or not all(isinstance(d, int) for d in ishape):
        raise Unsupported("reduction with shapes not known at conversion")
    lead, rest = shape[:k], list(shape[k:])
    lin = None
    for j, p in enumerate(parts):   # the row-major flat index of the first k dims
        stride = int(np.prod(lead[j + 1:], dtype=np.int64))
        term = p if stride == 1 else cx.op("aten::mul", p, stride)
        lin = term if lin is None else cx.op("aten::add", lin, term)
    m = int(np.prod(ishape[:-1], dtype=np.int64))
    lin = cx.op("aten::expand", cx.op("aten::reshape", lin, [m] + [1] * len(rest)), [m, *rest], False)
    flat = cx.op("aten::reshape", x, [int(np.prod(lead, dtype=np.int64)), *rest])
    upd = cx.op("aten::reshape", cx.x(2), [m, *rest])
    y = cx.op("aten::scatter_reduce", flat, 0, lin, upd, reduce, True)
    return cx.op("aten::reshape", y, list(shape))


def one_hot(cx: NodeContext):
    r = cx.rank(0)
    axis = norm_axis(cx.attr("axis", -1), r + 1)
    idx = cx.x(0)
    cx.require_dtype(0, FLOATS | INTS)
    if cx.dtype(0) != "int64":
        idx = cx.op("aten::to", idx, scalar_type("int64"), False, False, None)
    depth = scalar_arg(cx, 1, "depth")
    depth = int(depth) if isinstance(depth, (int, float)) else cx.int_op("aten::Int", depth)
    vals = cx.x(2)
    idx = cx.op("aten::where", cx.op("aten::lt", idx, 0), cx.op("aten::add", idx, depth, 1), idx)
    ar = cx.op("aten::arange", depth, scalar_type("int64"), None, None, None)
    shape = [1] * (r + 1)
    shape[axis] = -1
    ar = cx.op("aten::reshape", ar, shape)
    mask = cx.op("aten::eq", cx.op("aten::unsqueeze", idx, axis), ar)
    on, off = cx.op("aten::select", vals, 0, 1), cx.op("aten::select", vals, 0, 0)
    return cx.op("aten::where", mask, on, off)


def nonzero(cx: NodeContext):
    return cx.op("aten::t", cx.op("aten::nonzero", cx.x(0))) if cx.rank(0) > 0 else \
        cx.op("aten::reshape", cx.op("aten::nonzero", cx.op("aten::reshape", cx.x(0), [1])), [0, -1])


def trilu(cx: NodeContext):
    upper = cx.attr("upper", 1)
    k = cx.int_items(1, "k")[0] if cx.has(1) else 0
    if cx.rank(0) < 2:
        raise Unsupported("rank < 2")
    return cx.op("aten::triu" if upper else "aten::tril", cx.x(0), k)


_PAD_MODES = {"constant": "constant", "reflect": "reflect", "edge": "replicate", "wrap": "circular"}


def pad(cx: NodeContext):
    mode = cx.attr("mode", "constant")
    if mode not in _PAD_MODES:
        raise Unsupported(f"mode={mode!r}")
    r = cx.rank(0)
    pads = cx.int_items(1, "pads")
    axes = cx.ints(3, "axes") if cx.has(3) else list(range(r))
    axes = [norm_axis(a, r) for a in axes]
    if len(pads) != 2 * len(axes):
        raise Unsupported(f"{len(pads)} pads for {len(axes)} axes")
    begin, end = [0] * r, [0] * r
    for j, a in enumerate(axes):
        begin[a], end[a] = pads[j], pads[len(axes) + j]
    x = cx.x(0)
    shape = cx.shape(0)
    if mode != "constant":
        if not all(isinstance(p, int) for p in begin + end):
            raise cx.not_constant([1], f"mode={mode!r} with pads not known at conversion")
        if any(p < 0 for p in begin + end):   # crops: onnxruntime slices them off, then pads the rest
            x, shape = _crop(cx, x, shape, begin, end)
            begin, end = [max(p, 0) for p in begin], [max(p, 0) for p in end]
    first = next((d for d in range(r) if not (isinstance(begin[d], int) and isinstance(end[d], int)
                                              and begin[d] == end[d] == 0)), r)
    torch_pads = []
    for d in range(r - 1, first - 1, -1):
        torch_pads += [begin[d], end[d]]
    if not torch_pads:
        return cx.op("aten::clone", x, None)
    if mode == "constant":
        value = scalar_arg(cx, 2, "constant_value") if cx.has(2) else 0
        return cx.op("aten::constant_pad_nd", x, cx.list_value(torch_pads), value)
    if len(torch_pads) // 2 > 3 or r - first > r - 1:
        return _pad_by_cat(cx, x, shape, begin, end, mode)
    return cx.op("aten::pad", x, torch_pads, _PAD_MODES[mode], None)


def _crop(cx: NodeContext, x, shape, begin: list, end: list):
    """``x`` without what the negative pads remove (a slice per cropped dim), and its shape."""
    shape = list(shape) if shape is not None else None
    for d, (b, e) in enumerate(zip(begin, end)):
        if b >= 0 and e >= 0:
            continue
        start, stop = max(-b, 0), (e if e < 0 else INT64_MAX)
        x = cx.op("aten::slice", x, d, start, stop, 1)
        if shape is not None and isinstance(shape[d], int):
            shape[d] = max(shape[d] - start + min(e, 0), 0)
        elif shape is not None:
            shape[d] = None
    return x, shape


def _pad_by_cat(cx: NodeContext, x, shape, begin: list, end: list, mode: str):
    """What ``aten::pad`` cannot take (the batch or channel dim, more than 3 dims): each padded dim
    by a ``cat`` of slices of ``x`` (repeated edges, mirrored or wrapped pieces)."""
    for d, (b, e) in enumerate(zip(begin, end)):
        if not b and not e:
            continue
        n = shape[d] if shape is not None else None
        if not isinstance(n, int) or (mode == "reflect" and max(b, e) >= n) or (mode == "wrap" and max(b, e) > n):
            raise Unsupported(f"mode={mode!r} on dim {d} of size {n} by ({b}, {e})")
        if mode == "edge":
            parts = [cx.op("aten::slice", x, d, 0, 1, 1)] * b + [x] + [cx.op("aten::slice", x, d, n - 1, n, 1)] * e
        elif mode == "reflect":
            parts = [cx.op("aten::flip", cx.op("aten::slice", x, d, 1, b + 1, 1), [d])] if b else []
            parts += [x] + ([cx.op("aten::flip", cx.op("aten::slice", x, d, n - 1 - e, n - 1, 1), [d])] if e else [])
        else:
            parts = ([cx.op("aten::slice", x, d, n - b, n, 1)] if b else []) + [x] + \
                ([cx.op("aten::slice", x, d, 0, e, 1)] if e else [])
        x = cx.op("aten::cat", cx.op("prim::ListConstruct", *parts, types=[ListType(TensorType())]), d)
        if shape is not None:
            shape = [*shape[:d], n + b + e, *shape[d + 1:]]
    return x



def depth_to_space(cx: NodeContext):
    bs = cx.attr("blocksize")
    mode = cx.attr("mode", "DCR")
    if cx.rank(0) != 4:
        raise Unsupported("input must be 4-D")
    x = cx.x(0)
    if mode == "CRD":
        return cx.op("aten::pixel_shuffle", x, bs)
    if mode != "DCR":
        raise Unsupported(f"mode={mode!r}")
    n, c, h, w = (dim_item(cx, 0, x, d) for d in range(4))
    y = cx.op("aten::reshape", x, cx.list_value([n, bs, bs, -1, h, w]))
    y = cx.op("aten::permute", y, [0, 3, 4, 1, 5, 2])
    return cx.op("aten::reshape", y, cx.list_value([n, -1, _mul(cx, h, bs), _mul(cx, w, bs)]))


def space_to_depth(cx: NodeContext):
    bs = cx.attr("blocksize")
    mode = cx.attr("mode", "DCR") if cx.version >= 28 else "DCR"
    if mode not in ("DCR", "CRD"):
        raise Unsupported(f"mode={mode!r}")
    if cx.rank(0) != 4:
        raise Unsupported("input must be 4-D")
    x = cx.x(0)
    n, c, h, w = (dim_item(cx, 0, x, d) for d in range(4))
    hb = h // bs if isinstance(h, int) else cx.int_op("aten::floordiv", h, bs)
    wb = w // bs if isinstance(w, int) else cx.int_op("aten::floordiv", w, bs)
    y = cx.op("aten::reshape", x, cx.list_value([n, c, hb, bs, wb, bs]))
    y = cx.op("aten::permute", y, [0, 3, 5, 1, 2, 4] if mode == "DCR" else [0, 1, 3, 5, 2, 4])
    return cx.op("aten::reshape", y, cx.list_value([n, -1, hb, wb]))


def _mul(cx: NodeContext, a, b: int):
    return a * b if isinstance(a, int) else cx.int_op("aten::mul", a, b)


CONVERTERS = table(
    Gather=(gather, 13), GatherElements=(gather_elements, 13), GatherND=(gather_nd, 13),
    ScatterElements=(scatter_elements, 13, 16, 18), Scatter=(scatter_elements, 11),
    ScatterND=(scatter_nd, 13, 16, 18), OneHot=(one_hot, 11, 28), NonZero=(nonzero, 13),
    Trilu=(trilu, 14), Pad=(pad, 13, 18, 19, 21, 23, 24, 25), DepthToSpace=(depth_to_space, 13, 28),
    SpaceToDepth=(space_to_depth, 13, 28),
)
