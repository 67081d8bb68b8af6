"""Layout ops: reshapes, transposes, indexing, concatenation and splitting, padding, resizing.

Sizes and indices must be constants (a shape computed with ``aten::size`` runs outside the
engine); where torch's result depends on a size (``select``'s bounds, ``squeeze`` of a dim
that may not be 1, ``chunk``), that size must be static.
"""
from __future__ import annotations

import numpy as np

from .table import (INT_RULE_DTYPES, EngineBuildError, arg_shape, dims, i64, norm_dim, out, rank, rank_of, register,
                    shape_parts, static_dim)

INT64_MAX = np.iinfo(np.int64).max


def _dim_ok(n, name: str, i: int = 0, extra: int = 0) -> bool:
    """Argument ``name`` is a dim in range for the rank of argument ``i`` (+ ``extra``)."""
    r = rank_of(n, i)
    d = n.const(name, None)
    if r is None or not isinstance(d, int):
        return False
    r += extra
    return -max(r, 1) <= d < max(r, 1)


# -- reshapes ----------------------------------------------------------------------------------------
def _flatten_ok(n) -> bool:
    r = rank_of(n, 0)
    if r is None:
        return False
    s, e = n.const("start_dim", 0), n.const("end_dim", -1)
    try:
        s, e = norm_dim(s, r), norm_dim(e, r)
    except EngineBuildError:
        return False
    return s <= e


@register("aten::flatten.using_ints", consts=("start_dim", "end_dim"), check=_flatten_ok)
def _flatten(c):
    o, x = c.o, c.x("self")
    r = rank(x)
    if r == 0:
        return out(o.reshape(x, i64(o, [1]), False))
    s, e = norm_dim(c.const("start_dim", 0), r), norm_dim(c.const("end_dim", -1), r)
    parts = [("dim", i) for i in range(s)] + [("prod", s, e + 1)] + [("dim", i) for i in range(e + 1, r)]
    return out(o.reshape(x, shape_parts(o, x, parts), False))


def _sizes_ok(n, name: str) -> bool:
    size = n.const(name, None)
    return isinstance(size, (list, tuple)) and all(isinstance(s, int) and s >= -1 for s in size) \
        and sum(1 for s in size if s == -1) <= 1


@register("aten::view", consts=("size",), check=lambda n: _sizes_ok(n, "size"))
def _view(c):
    return out(c.o.reshape(c.x("self"), i64(c.o, list(c.const("size"))), False))


@register("aten::reshape", consts=("shape",), check=lambda n: _sizes_ok(n, "shape"))
def _reshape(c):
    return out(c.o.reshape(c.x("self"), i64(c.o, list(c.const("shape"))), False))


@register("aten::unsqueeze", consts=("dim",), check=lambda n: _dim_ok(n, "dim", extra=1), tensor_dtypes=INT_RULE_DTYPES)
def _unsqueeze(c):
    x = c.x("self")
    return out(c.o.unsqueeze(x, i64(c.o, norm_dim(c.const("dim"), rank(x) + 1))))


@register("aten::squeeze.dim", consts=("dim",),
          check=lambda n: _dim_ok(n, "dim") and (rank_of(n, 0) == 0 or static_dim(n, 0, n.const("dim")) is not None))
def _squeeze_dim(c):
    x = c.x("self")
    r = rank(x)
    if r == 0:
        return x
    d = norm_dim(c.const("dim"), r)
    return out(c.o.squeeze(x, i64(c.o, [d]))) if dims(x)[d] == 1 else x


@register("aten::squeeze", check=lambda n: arg_shape(n, 0) is not None and all(isinstance(d, int)
                                                                               for d in arg_shape(n, 0)))
def _squeeze(c):
    x = c.x("self")
    ones = [i for i, d in enumerate(dims(x)) if d == 1]
    return out(c.o.squeeze(x, i64(c.o, ones))) if ones else x


# -- transposes --------------------------------------------------------------------------------------
def _transpose_ok(n) -> bool:
    r = rank_of(n, 0)
    if r is None:
        return False
    return all(isinstance(n.const(k, None), int) and -max(r, 1) <= n.const(k) < max(r, 1) for k in ("dim0", "dim1"))


@register("aten::transpose.int", consts=("dim0", "dim1"), check=_transpose_ok)
def _transpose(c):
    x = c.x("self")
    r = rank(x)
    if r == 0:
        return x
    a, b = norm_dim(c.const("dim0"), r), norm_dim(c.const("dim1"), r)
    perm = list(range(r))
    perm[a], perm[b] = perm[b], perm[a]
    return out(c.o.transpose(x, i64(c.o, perm)))


def _permute_ok(n) -> bool:
    r = rank_of(n, 0)
    p = n.const("dims", None)
    if r is None or not isinstance(p, (list, tuple)) or len(p) != r:
        return False
    try:
        return sorted(norm_dim(d, r) for d in p) == list(range(r))
    except EngineBuildError:
        return False


@register("aten::permute", consts=("dims",), check=_permute_ok)
def _permute(c):
    x = c.x("self")
    r = rank(x)
    if r == 0:
        return x
    return out(c.o.transpose(x, i64(c.o, [norm_dim(d, r) for d in c.const("dims")])))


@register("aten::t", check=lambda n: (rank_of(n, 0) or 0) <= 2 and rank_of(n, 0) is not None)
def _t(c):
    x = c.x("self")
    return out(c.o.transpose(x, i64(c.o, [1, 0]))) if rank(x) == 2 else x


@register("aten::numpy_T", check=lambda n: rank_of(n, 0) is not None)
def _numpy_t(c):
    x = c.x("self")
    r = rank(x)
    return out(c.o.transpose(x, i64(c.o, list(range(r))[::-1]))) if r > 1 else x


# -- indexing ----------------------------------------------------------------------------------------
def _select_ok(n) -> bool:
    if not _dim_ok(n, "dim") or rank_of(n, 0) == 0:
        return False
    size = static_dim(n, 0, n.const("dim"))
    idx = n.const("index", None)
    return size is not None and isinstance(idx, int) and -size <= idx < size


@register("aten::select.int", consts=("dim", "index"), check=_select_ok)
def _select(c):
    o, x = c.o, c.x("self")
    d = norm_dim(c.const("dim"), rank(x))
    idx = c.const("index") % dims(x)[d]
    return out(o.gather(x, i64(o, idx), i64(o, d)))


def _slice_ok(n) -> bool:
    if not _dim_ok(n, "dim") or rank_of(n, 0) == 0:
        return False
    step = n.const("step", 1)
    return isinstance(step, int) and step > 0 and all(n.const(k, None) is None or isinstance(n.const(k), int)
                                                      for k in ("start", "end"))


@register("aten::slice.Tensor", consts=("dim", "start", "end", "step"), check=_slice_ok, tensor_dtypes=INT_RULE_DTYPES)
def _slice(c):
    o, x = c.o, c.x("self")
    d = norm_dim(c.const("dim", 0), rank(x))
    start, end, step = c.const("start", None), c.const("end", None), c.const("step", 1)
    start = 0 if start is None else start
    end = INT64_MAX if end is None else min(end, INT64_MAX)
    if start == 0 and end == INT64_MAX and step == 1:
        return x
    return out(o.slice(x, i64(o, [start]), i64(o, [end]), i64(o, [step]), i64(o, [d])))


# -- tensor lists: cat, stack, chunk, split, unbind ------------------------------------------------------
def _tensor_list_ok(n) -> bool:
    return len(n.args) > 0 and all(getattr(a.type, "shape", None) is not None and not a.is_constant
                                   for a in n.args)


@register("prim::ListConstruct", check=_tensor_list_ok)
def _list_construct(c):
    return [c.tensor(v) for v in c.node.inputs]


@register("prim::ListUnpack")
def _list_unpack(c):
    got = c.env.get(id(c.node.inputs[0]))
    if not isinstance(got, list) or len(got) != len(c.node.outputs):
        c.fail("unpacks a list not made inside the engine, or of another length")
    return tuple(got)


def _cat_ok(n) -> bool:
    return isinstance(n.const("dim", 0), int)


@register("aten::cat", consts=("dim",), check=_cat_ok)
def _cat(c):
    xs = c.tensors("tensors")
    r = rank(xs[0])
    if any(rank(x) != r for x in xs) or r == 0:
        c.fail("tensors of different ranks (or 0-d) run outside the engine")
    return out(c.o.concat(xs, norm_dim(c.const("dim", 0), r)))


@register("aten::stack", consts=("dim",), check=_cat_ok)
def _stack(c):
    xs = c.tensors("tensors")
    r = rank(xs[0])
    d = norm_dim(c.const("dim", 0), r + 1)
    return out(c.o.concat([out(c.o.unsqueeze(x, i64(c.o, d))) for x in xs], d))


def _split_sizes(total: int, size: int) -> list[int]:
    n = max(1, -(-total // size)) if total else 1
    return [min(size, total - i * size) for i in range(n)]


def _chunk_ok(n) -> bool:
    return _dim_ok(n, "dim") and isinstance(n.const("chunks", None), int) and n.const("chunks") > 0 \
        and static_dim(n, 0, n.const("dim")) is not None


@register("aten::chunk", "aten::unsafe_chunk", consts=("chunks", "dim"), check=_chunk_ok)
def _chunk(c):
    x = c.x("self")
    d = norm_dim(c.const("dim", 0), rank(x))
    total = dims(x)[d]
    chunks = c.const("chunks")
    size = -(-total // chunks) if total else 0
    return _split(c, x, d, _split_sizes(total, size) if size else [0])


def _split(c, x, d, sizes):
    o = c.o
    if len(sizes) == 1:
        return [x]
    node = o.variadic_split(x, i64(o, d), i64(o, sizes))
    return [node.output(i) for i in range(len(sizes))]


def _split_ok(n) -> bool:
    if not _dim_ok(n, "dim") or static_dim(n, 0, n.const("dim")) is None:
        return False
    s = n.const("split_size", None)
    total = static_dim(n, 0, n.const("dim"))
    if isinstance(s, int):
        return s > 0
    return isinstance(s, (list, tuple)) and all(isinstance(v, int) and v >= 0 for v in s) and sum(s) == total


@register("aten::split.Tensor", "aten::unsafe_split.Tensor", consts=("split_size", "dim"), check=_split_ok)
def _split_tensor(c):
    x = c.x("self")
    d = norm_dim(c.const("dim", 0), rank(x))
    return _split(c, x, d, _split_sizes(dims(x)[d], c.const("split_size")))


@register("aten::split.sizes", consts=("split_size", "dim"), check=_split_ok)
def _split_sizes_op(c):
    x = c.x("self")
    return _split(c, x, norm_dim(c.const("dim", 0), rank(x)), list(c.const("split_size")))


def _split_with_sizes_ok(n) -> bool:
    if not _dim_ok(n, "dim") or static_dim(n, 0, n.const("dim")) is None:
        return False
    s = n.const("split_sizes", None)
    return isinstance(s, (list, tuple)) and all(isinstance(v, int) and v >= 0 for v in s) \
        and sum(s) == static_dim(n, 0, n.const("dim"))


@register("aten::split_with_sizes", "aten::unsafe_split_with_sizes", consts=("split_sizes", "dim"), check=_split_with_sizes_ok)
def _split_with_sizes(c):
    x = c.x("self")
    return _split(c, x, norm_dim(c.const("dim", 0), rank(x)), list(c.const("split_sizes")))


@register("aten::unbind.int", consts=("dim",),
          check=lambda n: _dim_ok(n, "dim") and static_dim(n, 0, n.const("dim")) is not None)
def _unbind(c):
    o, x = c.o, c.x("self")
    d = norm_dim(c.const("dim", 0), rank(x))
    parts = _split(c, x, d, [1] * dims(x)[d]) if dims(x)[d] > 1 else [x]
    return [out(o.squeeze(p, i64(o, [d]))) for p in parts]


def _meshgrid_ok(n) -> bool:
    """Float32 1-D inputs (the list's element type says so) and a known ``indexing``."""
    outs = n.output_types
    elem = getattr(outs[0], "elem", None) if len(outs) == 1 else None
    return getattr(elem, "dtype", None) == "float32" and n.const("indexing", "ij") in ("ij", "xy")


@register("aten::meshgrid", "aten::meshgrid.indexing", consts=("indexing",), check=_meshgrid_ok)
def _meshgrid(c):
    """One tensor per 0-d or 1-d input, input ``i``'s values along dim ``i`` of the grid (``"xy"``
    swaps the first two dims), broadcast to the grid. The inputs are a list made in the engine or
    a constant list (a grid of ``arange``s, folded at load: detection heads' anchor grids)."""
    o = c.o
    v = c.value("tensors")
    xs = c.env.get(id(v))
    if not isinstance(xs, list):
        from .table import constant_of

        ok, values = constant_of(v)
        if not ok or not isinstance(values, (list, tuple)) or not values:
            c.fail("argument 'tensors' is neither a list made in the engine nor a constant list")
        xs = [c.o.constant(np.ascontiguousarray(a, dtype=np.float32)).output(0) for a in values]
    if any(rank(x) > 1 for x in xs):
        c.fail("meshgrid of a tensor of rank > 1")
    lens = [1 if rank(x) == 0 else dims(x)[0] for x in xs]
    if any(n is None for n in lens):
        c.fail("meshgrid of inputs of dynamic length")
    pos = list(range(len(xs)))
    if c.const("indexing", "ij") == "xy" and len(xs) >= 2:
        pos[0], pos[1] = 1, 0
    grid = [0] * len(xs)
    for i, p in enumerate(pos):
        grid[p] = lens[i]
    res = []
    for i, x in enumerate(xs):
        shape = [1] * len(xs)
        shape[pos[i]] = lens[i]
        col = out(o.reshape(x, i64(o, shape), False))
        res.append(out(o.broadcast(col, i64(o, grid))))
    return res


# -- broadcasting copies ------------------------------------------------------------------------------
def _expand_ok(n) -> bool:
    size = n.const("size", None)
    r = rank_of(n, 0)
    if r is None or not isinstance(size, (list, tuple)) or len(size) < r:
        return False
    lead = len(size) - r
    return all(isinstance(s, int) and (s >= 0 or (s == -1 and i >= lead)) for i, s in enumerate(size))


def _lead_ones(c, x, n: int):
    """``x`` with ``n`` leading dims of size 1 (torch's expand and repeat add them)."""
    return out(c.o.unsqueeze(x, i64(c.o, list(range(n))))) if n else x


@register("aten::expand", consts=("size", "implicit"), check=_expand_ok)
def _expand(c):
    o, x = c.o, c.x("self")
    size = list(c.const("size"))
    x = _lead_ones(c, x, len(size) - rank(x))
    parts = [("dim", i) if s == -1 else s for i, s in enumerate(size)]
    return out(o.broadcast(x, shape_parts(o, x, parts), "numpy"))


@register("aten::expand_as")
def _expand_as(c):
    o = c.o
    return out(o.broadcast(c.x("self"), out(o.shape_of(c.x("other"), "i64")), "numpy"))


@register("aten::repeat", consts=("repeats",),
          check=lambda n: isinstance(n.const("repeats", None), (list, tuple)) and rank_of(n, 0) is not None
          and len(n.const("repeats")) >= rank_of(n, 0) and all(isinstance(r, int) and r >= 0
                                                                for r in n.const("repeats")))
def _repeat(c):
    o, x = c.o, c.x("self")
    reps = list(c.const("repeats"))
    x = _lead_ones(c, x, len(reps) - rank(x))
    return out(o.tile(x, i64(o, reps)))


@register("aten::flip", consts=("dims",),
          check=lambda n: isinstance(n.const("dims", None), (list, tuple)) and rank_of(n, 0) is not None)
def _flip(c):
    o, x = c.o, c.x("self")
    r = rank(x)
    axes = sorted({norm_dim(d, r) for d in c.const("dims")})
    if not axes:
        return x
    return out(o.slice(x, i64(o, [-1] * len(axes)), i64(o, [np.iinfo(np.int64).min] * len(axes)),
                       i64(o, [-1] * len(axes)), i64(o, axes)))


@register("aten::roll", consts=("shifts", "dims"),
          check=lambda n: isinstance(n.const("dims", None), (list, tuple)) and len(n.const("dims")) > 0
          and isinstance(n.const("shifts", None), (list, tuple)) and len(n.const("shifts")) == len(n.const("dims"))
          and rank_of(n, 0) not in (None, 0))
def _roll(c):
    o, x = c.o, c.x("self")
    r = rank(x)
    axes = [norm_dim(d, r) for d in c.const("dims")]
    return out(o.roll(x, i64(o, list(c.const("shifts"))), i64(o, axes)))


# -- padding --------------------------------------------------------------------------------------------
_PAD_MODES = {"constant": "constant", "reflect": "reflect", "replicate": "edge"}


def _pad_ok(n) -> bool:
    pad = n.const("pad", None)
    r = rank_of(n, 0)
    if r is None or not isinstance(pad, (list, tuple)) or len(pad) % 2 or len(pad) // 2 > r:
        return False
    mode = n.const("mode", "constant") if n.op == "aten::pad" else "constant"
    if mode not in _PAD_MODES:
        return False
    if mode == "constant":
        return True
    # reflect / replicate: torch's limits on the padded dims (their sizes must be static)
    shape = arg_shape(n, 0)
    for k in range(len(pad) // 2):
        size = shape[r - 1 - k]
        lo, hi = pad[2 * k], pad[2 * k + 1]
        if not isinstance(size, int) or lo < 0 or hi < 0:
            return False
        if mode == "reflect" and (lo >= size or hi >= size):
            return False
        if mode == "replicate" and size == 0:
            return False
    return True


@register("aten::pad", consts=("pad", "mode", "value"), check=lambda n: _pad_ok(n) and
          (n.const("mode", "constant") == "constant" or n.const("value", None) in (None, 0, 0.0)))
def _pad(c):
    return _pad_nd(c, c.const("mode", "constant"))


@register("aten::constant_pad_nd", consts=("pad", "value"), check=_pad_ok)
def _constant_pad(c):
    return _pad_nd(c, "constant")


def _pad_nd(c, mode):
    o, x = c.o, c.x("self")
    r = rank(x)
    pad = list(c.const("pad"))
    begin, end = [0] * r, [0] * r
    for k in range(len(pad) // 2):
        begin[r - 1 - k], end[r - 1 - k] = pad[2 * k], pad[2 * k + 1]
    value = c.const("value", None)
    value = 0.0 if value is None else float(value)
    if mode == "constant":
        return out(o.pad(x, i64(o, begin), i64(o, end), "constant", np.float32(value)))
    return out(o.pad(x, i64(o, begin), i64(o, end), _PAD_MODES[mode]))
