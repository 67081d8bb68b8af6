"""Shape and layout ONNX ops: Shape, Size, Reshape, Flatten, Transpose, (Un)Squeeze, Concat,
Split, Slice, Expand, Tile, Identity, Constant, ConstantOfShape, Range, EyeLike."""
from __future__ import annotations

import math

import attrs
import numpy as np

from ....ir.types import ListType, TensorType
from ..context import NodeContext, Unsupported
from ..dtypes import dtype_of, scalar_type
from ..values import Val
from ._util import dim_item, int_binop, ints_val, norm_axis, scalar_arg, table

#: constants up to this many elements computed at conversion (ConstantOfShape, EyeLike) stay arrays
FOLD_LIMIT = 1 << 16


def shape_(cx: NodeContext):
    start, end = cx.attr("start", 0), cx.attr("end", None)
    v = cx.val(0)
    if v.const is not None:
        dims = list(v.const.shape)
    else:
        r = cx.rank(0)
        x = cx.x(0)
        dims = [dim_item(cx, 0, x, d) for d in range(r)]
    r = len(dims)
    s = max(0, min(r, start + r if start < 0 else start))
    e = r if end is None else max(0, min(r, end + r if end < 0 else end))
    return ints_val(cx, dims[s:e])


def size_(cx: NodeContext):
    v = cx.val(0)
    shape = v.shape
    if shape is not None and all(isinstance(d, int) for d in shape):
        return ints_val(cx, [math.prod(shape)], scalar=True)
    return ints_val(cx, [cx.int_op("aten::numel", cx.x(0))], scalar=True)


def identity(cx: NodeContext):
    v = cx.val(0)
    return attrs.evolve(v, name="")


def constant(cx: NodeContext):
    for name, conv in (("value", None), ("value_float", "float32"), ("value_floats", "float32"),
                       ("value_int", "int64"), ("value_ints", "int64")):
        if cx.has_attr(name):
            v = cx.attr(name)
            arr = v if conv is None else np.array(v, dtype=conv)
            return Val("", TensorType(str(arr.dtype), arr.shape), const=arr)
    for name in ("sparse_value", "value_string", "value_strings"):
        if cx.has_attr(name):
            cx.attr(name, None)
            raise Unsupported(f"a {name} constant")
    raise Unsupported("Constant without a value")


def reshape(cx: NodeContext):
    allowzero = cx.attr("allowzero", 0) if cx.version >= 14 else 0
    items = cx.int_items(1, "shape")
    v = cx.val(0)
    if v.ints is not None and v.rank == 1 and len(items) == 1 and isinstance(items[0], int) \
            and items[0] in (-1, len(v.ints)):
        return attrs.evolve(v, name="", tensor=None)  # a shape vector reshaped to itself
    x = cx.x(0)
    out = []
    for i, s in enumerate(items):
        if isinstance(s, int):
            if s == 0 and not allowzero:
                s = dim_item(cx, 0, x, i)
            elif s < -1:
                raise Unsupported(f"shape entry {s}")
        elif not allowzero and i < cx.rank(0):  # a run-time 0 copies the input's dim: s + (s == 0) * size(x, i)
            is_zero = cx.int_op("aten::Int", cx.bool_op("aten::eq", s, 0))
            s = cx.int_op("aten::add", s, cx.int_op("aten::mul", is_zero, dim_item(cx, 0, x, i)))
        out.append(s)
    if allowzero and any(isinstance(s, int) and s == 0 for s in out) and -1 in out:
        raise Unsupported("shape with both 0 and -1 and allowzero=1")
    return cx.op("aten::reshape", x, cx.list_value(out))


def flatten(cx: NodeContext):
    r = cx.rank(0)
    axis = cx.attr("axis", 1)
    if not -r <= axis <= r:
        raise Unsupported(f"axis {axis} is out of range for rank {r}")
    axis = axis + r if axis < 0 else axis
    x = cx.x(0)
    if axis == 0:
        return cx.op("aten::reshape", x, [1, -1])
    if axis == r:
        return cx.op("aten::unsqueeze", cx.op("aten::flatten", x, 0, -1), 1) if r > 1 else \
            cx.op("aten::reshape", x, [-1, 1])
    y = cx.op("aten::flatten", x, axis, -1) if axis < r - 1 else x
    return cx.op("aten::flatten", y, 0, axis - 1) if axis > 1 else y


def transpose(cx: NodeContext):
    r = cx.rank(0)
    perm = cx.attr("perm", None)
    perm = list(range(r))[::-1] if perm is None else [norm_axis(p, r, "perm entry") for p in perm]
    if sorted(perm) != list(range(r)):
        raise Unsupported(f"perm {perm} is not a permutation of rank {r}")
    if perm == list(range(r)):
        return cx.op("aten::clone", cx.x(0), None)
    return cx.op("aten::permute", cx.x(0), perm)


def _axes(cx: NodeContext, index: int, rank: int, attr_before: int) -> list[int] | None:
    """Axes from the attribute (op versions before ``attr_before``) or from input ``index``."""
    if cx.version < attr_before:
        axes = cx.attr("axes", None)
    else:
        axes = cx.ints(index, "axes") if cx.has(index) else None
    if axes is None:
        return None
    axes = [norm_axis(a, rank) for a in axes]
    if len(set(axes)) != len(axes):
        raise Unsupported(f"repeated axes {axes}")
    return axes


def squeeze(cx: NodeContext):
    v = cx.val(0)
    r = cx.rank(0)
    if cx.version >= 13 and cx.has(1) and cx.const(1) is None:  # axes known at run time only
        return cx.op("aten::squeeze", cx.x(0), cx.int_list(1, "axes"))
    axes = _axes(cx, 1, r, 13)
    if v.ints is not None and v.rank == 1 and len(v.ints) == 1 and axes in (None, [0]):
        return attrs.evolve(v, name="", tensor=None, scalar=True)
    shape = cx.shape(0)
    if axes is None:
        if shape is None or any(not isinstance(d, int) for d in shape):
            raise Unsupported("Squeeze without axes needs every dim known at conversion")
        axes = [i for i, d in enumerate(shape) if d == 1]
    for a in axes:
        if shape is not None and isinstance(shape[a], int) and shape[a] != 1:
            raise Unsupported(f"axis {a} has size {shape[a]}, not 1")
    if not axes:
        return cx.op("aten::clone", cx.x(0), None)
    return cx.op("aten::squeeze", cx.x(0), axes)


def unsqueeze(cx: NodeContext):
    v = cx.val(0)
    r = cx.rank(0)
    n_axes = len(cx.ints(1, "axes")) if cx.version >= 13 else len(cx.attr("axes"))
    axes = sorted(_axes(cx, 1, r + n_axes, 13))
    if v.ints is not None and v.rank == 0 and axes == [0]:
        return attrs.evolve(v, name="", tensor=None, scalar=False)
    y = cx.x(0)
    for a in axes:
        y = cx.op("aten::unsqueeze", y, a)
    return y


def concat(cx: NodeContext):
    n = cx.n_inputs
    vals = [cx.val(i) for i in range(n)]
    rank = next((v.rank for v in vals if v.rank is not None), None)
    if rank is None:
        raise Unsupported("the rank of the inputs is unknown")
    axis = norm_axis(cx.attr("axis"), rank)
    if rank == 1 and all(v.ints is not None or v.known_ints() is not None for v in vals) \
            and vals[0].dtype in ("int64", "int32") and len({v.dtype for v in vals}) == 1:
        items = [i for v in vals for i in (v.known_ints() or v.ints)]
        return ints_val(cx, items, dtype=vals[0].dtype)
    if len({v.dtype for v in vals}) != 1:
        raise Unsupported("inputs of different dtypes")
    return cx.op("aten::cat", [cx.x(i) for i in range(n)], axis)


def split(cx: NodeContext):
    r = cx.rank(0)
    axis = norm_axis(cx.attr("axis", 0), r)
    n_out = len(cx.node.output)
    num = cx.attr("num_outputs", None) if cx.version >= 18 else None
    if cx.has(1):
        sizes = cx.int_items(1, "split")
    else:
        shape = cx.shape(0)
        dim = shape[axis] if shape is not None else None
        if not isinstance(dim, int):
            raise Unsupported("splitting a dim not known at conversion into equal parts")
        if num is not None:
            if num != n_out:
                raise Unsupported(f"num_outputs={num} but the node has {n_out} outputs")
            chunk = -(-dim // num)
            sizes = [min(chunk, max(dim - chunk * i, 0)) for i in range(num)]
        else:
            if dim % n_out:
                raise Unsupported(f"dim {dim} does not split into {n_out} equal parts")
            sizes = [dim // n_out] * n_out
    if len(sizes) != n_out:
        raise Unsupported(f"{len(sizes)} split sizes for {n_out} outputs")
    parts = cx.op("aten::split_with_sizes", cx.x(0), cx.list_value(sizes), axis, types=[ListType(TensorType())])
    if n_out == 1:
        return cx.op("prim::ListUnpack", parts)
    return cx.op("prim::ListUnpack", parts, n_out=n_out)


def slice_(cx: NodeContext):
    starts, ends = cx.int_items(1, "starts"), cx.int_items(2, "ends")
    v = cx.val(0)
    r = cx.rank(0)
    axes = cx.int_items(3, "axes") if cx.has(3) else list(range(len(starts)))
    steps = cx.ints(4, "steps") if cx.has(4) else [1] * len(starts)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise Unsupported("starts, ends, axes and steps of different lengths")
    if not all(isinstance(a, int) for a in axes):
        if any(s < 0 for s in steps):
            raise cx.not_constant([3], "negative steps with axes not known at conversion")
    else:
        axes = [norm_axis(a, r) for a in axes]
    if 0 in steps:
        raise Unsupported("a step of 0")
    if v.ints is not None and r == 1 and all(isinstance(s, int) for s in (*starts, *ends)):
        items = list(v.known_ints() or v.ints)
        return ints_val(cx, items[slice(starts[0], ends[0], steps[0])], dtype=v.dtype or "int64")
    y = cx.x(0)
    shape = cx.shape(0)
    for start, end, axis, step in zip(starts, ends, axes, steps):
        if step > 0:
            y = cx.op("aten::slice", y, axis, _clip_index(start), _clip_index(end), step)
            continue
        dim = shape[axis] if shape is not None else None
        if not isinstance(dim, int) or not isinstance(start, int) or not isinstance(end, int):
            y = _flipped_slice(cx, y, axis, start, end, step, dim_item(cx, 0, cx.x(0), axis))
            continue
        idx = range(*slice(start, end, step).indices(dim))
        if len(idx) == 0:
            y = cx.op("aten::slice", y, axis, 0, 0, 1)
            continue
        y = cx.op("aten::slice", y, axis, idx[-1], idx[0] + 1, -step)
        y = cx.op("aten::flip", y, [axis])
    return y


def _flipped_slice(cx: NodeContext, x, axis: int, start, end, step: int, dim):
    """A negative-step slice whose dim, start or end is known only at run time: ``flip`` the axis, then a
    positive-step slice. ONNX clamps a negative step's start to ``[0, dim - 1]`` and its end to
    ``[-1, dim - 1]`` (after adding ``dim`` to negatives); element ``i`` is at ``dim - 1 - i`` flipped."""
    def clamped(i, low):
        neg = i < 0 if isinstance(i, int) else cx.int_op("aten::Int", cx.bool_op("aten::lt", i, 0))
        i = int_binop(cx, "add", i, int_binop(cx, "mul", int(neg) if isinstance(neg, bool) else neg, dim))
        return _imin(cx, _imax(cx, i, low), int_binop(cx, "sub", dim, 1))
    first = int_binop(cx, "sub", int_binop(cx, "sub", dim, 1), clamped(_clip_index(start), 0))
    stop = int_binop(cx, "sub", int_binop(cx, "sub", dim, 1), clamped(_clip_index(end), -1))
    return cx.op("aten::slice", cx.op("aten::flip", x, [axis]), axis, first, stop, -step)


def _imin(cx: NodeContext, a, b):
    return min(a, b) if isinstance(a, int) and isinstance(b, int) else cx.int_op("prim::min", a, b)


def _imax(cx: NodeContext, a, b):
    return max(a, b) if isinstance(a, int) and isinstance(b, int) else cx.int_op("prim::max", a, b)


_BIG = 1 << 62


def _clip_index(i):
    """Huge ONNX ends (INT64_MAX, INT64_MIN) stay in range of what the slicing code handles."""
    if isinstance(i, int):
        return max(-_BIG, min(_BIG, i))
    return i


def expand(cx: NodeContext):
    items = cx.int_items(1, "shape")
    x = cx.x(0)
    r = cx.rank(0)
    n = max(r, len(items))
    shape = [None] * (n - r) + list(cx.shape(0))
    target = [1] * (n - len(items)) + list(items)
    out = []
    for i, (d, s) in enumerate(zip(shape, target)):
        xi = i - (n - r)
        if isinstance(s, int) and s == 1:   # broadcast keeps the input's dim
            out.append(-1 if xi >= 0 else 1)
        elif isinstance(d, int) and d == 1 or xi < 0:
            out.append(s)
        elif isinstance(d, int) and isinstance(s, int):
            if d != s:
                raise Unsupported(f"shape {target} does not broadcast with the input's {shape[n - r:]}")
            out.append(d)
        else:  # both unknown now: s if the input's dim is 1 else the input's dim
            di = dim_item(cx, 0, x, xi)
            is_one = cx.int_op("aten::Int", cx.bool_op("aten::eq", di, 1))
            out.append(cx.int_op("aten::add", di, cx.int_op("aten::mul", is_one, int_binop(cx, "sub", s, di))))
    return cx.op("aten::expand", x, cx.list_value(out), False)


def tile(cx: NodeContext):
    reps = cx.int_items(1, "repeats")
    if len(reps) != cx.rank(0):
        raise Unsupported(f"{len(reps)} repeats for rank {cx.rank(0)}")
    return cx.op("aten::repeat", cx.x(0), cx.list_value(reps))


def constant_of_shape(cx: NodeContext):
    value = cx.attr("value", None)
    arr = np.zeros((1,), np.float32) if value is None else value
    if arr.size != 1:
        raise Unsupported("value must hold one element")
    fill = arr.reshape(-1)[0]
    known = cx.val(0).known_ints()
    if known is not None and math.prod(known) <= FOLD_LIMIT:
        out = np.full(known, fill, dtype=arr.dtype)
        return Val("", TensorType(str(out.dtype), out.shape), const=out)
    items = cx.int_items(0, "shape")
    return cx.op("aten::full", cx.list_value(items), fill.item(), scalar_type(str(arr.dtype)), None, None, None)


def range_(cx: NodeContext):
    cx.attr("stash_type", 1)  # Range-27: accumulation precision of float16 ranges (fp32, as srcore computes)
    dts = {cx.dtype(i) for i in range(3)}
    if len(dts) != 1 or None in dts:
        raise Unsupported(f"start, limit, delta of dtypes {sorted(map(str, dts))}")
    dt = dts.pop()
    if dt not in ("float32", "float64", "int16", "int32", "int64"):
        raise Unsupported(f"dtype {dt}")
    start, limit, delta = (scalar_arg(cx, i, w) for i, w in enumerate(("start", "limit", "delta")))
    if all(isinstance(v, (int, float)) for v in (start, limit, delta)):
        if delta == 0:
            raise Unsupported("delta is 0")
        n = max(math.ceil((limit - start) / delta), 0)
        if n <= FOLD_LIMIT:
            out = np.arange(n, dtype=np.int64) * delta + start if dt.startswith("int") \
                else np.arange(start, limit, delta)[:n]
            out = np.array(out, dtype=dt, order="C")
            return Val("", TensorType(dt, out.shape), const=out)
    if dt.startswith("int"):
        start, limit, delta = (v if isinstance(v, int) else cx.int_op("aten::Int", v) for v in (start, limit, delta))
    return cx.op("aten::arange", start, limit, delta, scalar_type(dt), None, None, None)


def eye_like(cx: NodeContext):
    shape = cx.shape(0)
    k = cx.attr("k", 0)
    dt = dtype_of(cx.attr("dtype")) if cx.has_attr("dtype") else cx.dtype(0)
    if shape is None or len(shape) != 2 or not all(isinstance(d, int) for d in shape):
        raise Unsupported("EyeLike needs a 2-D input of known shape")
    out = np.eye(shape[0], shape[1], k, dtype=dt)
    return Val("", TensorType(dt, out.shape), const=out)


CONVERTERS = table(
    Shape=(shape_, 13, 15, 19, 21, 23, 24, 25), Size=(size_, 13, 19, 21, 23, 24, 25),
    Identity=(identity, 13, 14, 16, 19, 21, 23, 24, 25), Constant=(constant, 13, 19, 21, 23, 24, 25),
    Reshape=(reshape, 13, 14, 19, 21, 23, 24, 25), Flatten=(flatten, 13, 21, 23, 24, 25),
    Transpose=(transpose, 13, 21, 23, 24, 25), Squeeze=(squeeze, 13, 21, 23, 24, 25),
    Unsqueeze=(unsqueeze, 13, 21, 23, 24, 25), Concat=(concat, 13), Split=(split, 13, 18),
    Slice=(slice_, 13), Expand=(expand, 13), Tile=(tile, 13),
    ConstantOfShape=(constant_of_shape, 9, 20, 21, 23, 24, 25), Range=(range_, 11, 27),
    EyeLike=(eye_like, 9, 22),
)
