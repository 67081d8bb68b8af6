"""Indexing: gather, index_select, index.Tensor (advanced indexing), scatter/index_put, select/slice_scatter,
nonzero, one_hot."""
from __future__ import annotations

from ...ir.types import TensorType
from . import symbolic as sym
from .base import A, Ctx, UNKNOWN, rule, tt
from .elementwise import broadcast_shapes


@rule("aten::gather", "aten::take_along_dim")
def gather(ctx: Ctx):
    x, idx = ctx.tensor(0), ctx.tensor(2 if ctx.op.startswith("aten::gather") else 1)
    if ctx.op.startswith("aten::gather"):
        d = ctx.known(1, "dim")
        if x.rank is not None and idx.rank is not None and x.rank != idx.rank and x.rank > 0:
            raise ctx.fail(f"index tensor must have the same number of dimensions as input "
                           f"({idx.rank} vs {x.rank})")
        ctx.norm_dim(d, x.rank)
        return [tt(x.dtype, idx.shape)]
    return [tt(x.dtype, _take_along_dim_shape(ctx, x, idx))]


def _take_along_dim_shape(ctx: Ctx, x, idx):
    """``take_along_dim``: dim None takes from the flattened input (the result is 1-D, the index's
    size); else the sizes off ``dim`` broadcast and ``dim`` has the index's size."""
    d = ctx.known(2, "dim") if len(ctx.args) > 2 else None
    if d is None:
        return None if idx.shape is None else (sym.prod(idx.shape) if idx.shape else 1,)
    if d is UNKNOWN or x.shape is None or idx.shape is None:
        return None if x.rank is None else (None,) * x.rank
    if len(x.shape) != len(idx.shape):
        raise ctx.fail(f"input and indices should have the same number of dimensions "
                       f"({len(x.shape)} vs {len(idx.shape)})")
    d = ctx.norm_dim(d, len(x.shape))
    off = broadcast_shapes([x.shape[:d] + (1,) + x.shape[d + 1:], idx.shape[:d] + (1,) + idx.shape[d + 1:]], ctx.fail)
    return off[:d] + (idx.shape[d],) + off[d + 1:]


@rule("aten::index_select")
def index_select(ctx: Ctx):
    x, idx = ctx.tensor(0), ctx.tensor(2)
    d = ctx.known(1, "dim")
    if x.shape is None:
        return [tt(x.dtype, None)]
    if d is UNKNOWN:
        return [tt(x.dtype, (None,) * len(x.shape))]
    if idx.rank is not None and idx.rank > 1:
        raise ctx.fail(f"index_select index must be 0-D or 1-D, got shape {idx.shape}")
    n = None if idx.shape is None else (idx.shape[0] if idx.shape else 1)
    if not x.shape:
        return [tt(x.dtype, ())]
    d = ctx.norm_dim(d, len(x.shape))
    return [tt(x.dtype, x.shape[:d] + (n,) + x.shape[d + 1:])]


@rule("aten::index")
def index(ctx: Ctx):
    """Advanced indexing ``x[i0, None, i2]``: index tensors broadcast; the result dims go where the
    (adjacent) indexed dims were, else to the front; bool masks take a data-dependent size."""
    if ctx.args and not ctx.is_tensor(0):  # list.index(el) / str.index(sub)
        from ...ir.types import INT
        seq, el = ctx.args[0].known, ctx.args[1].known
        try:
            return [A(INT, seq.index(el))] if el is not UNKNOWN and isinstance(seq, (list, str)) else [A(INT)]
        except (ValueError, TypeError):
            return [A(INT)]
    x = ctx.tensor(0)
    lst = ctx.args[1]
    if x.shape is None or lst.elems is None:
        return [tt(x.dtype, None)]
    entries = []
    for e in lst.elems:
        if e.known is None or not isinstance(e.type, TensorType):
            entries.append(None)
        else:
            entries.append(e.type)
    if len(entries) > len(x.shape):
        raise ctx.fail(f"too many indices for tensor of dimension {len(x.shape)}")
    shapes, positions, dim = [], [], 0
    for t in entries:
        if t is None:
            dim += 1
            continue
        if t.dtype in ("bool", "uint8"):
            if t.shape is None:
                return [tt(x.dtype, None)]
            k = len(t.shape)
            for j, m in enumerate(t.shape):
                xd = x.shape[dim + j] if dim + j < len(x.shape) else None
                if isinstance(m, int) and isinstance(xd, int) and m != xd:
                    raise ctx.fail(f"mask shape {t.shape} does not match the indexed shape {x.shape}")
            shapes.append((None,))
            positions.append(tuple(range(dim, dim + k)))
            dim += k
        else:
            if t.shape is None:
                return [tt(x.dtype, None)]
            shapes.append(t.shape)
            positions.append((dim,))
            dim += 1
    if not shapes:
        return [x]
    bshape = broadcast_shapes(shapes, ctx.fail)
    flat = [p for ps in positions for p in ps]
    adjacent = flat == list(range(flat[0], flat[-1] + 1))
    rest = [d for i, d in enumerate(x.shape) if i not in flat]
    if adjacent:
        first = flat[0]
        before = [d for i, d in enumerate(x.shape) if i < first and i not in flat]
        after = [d for i, d in enumerate(x.shape) if i > flat[-1]]
        return [tt(x.dtype, tuple(before) + bshape + tuple(after))]
    return [tt(x.dtype, bshape + tuple(rest))]


@rule("aten::scatter", "aten::scatter_add", "aten::scatter_reduce", "aten::index_put", "aten::index_add",
      "aten::index_copy", "aten::index_fill", "aten::masked_scatter", "aten::scatter_", "aten::index_put_",
      "aten::scatter_add_", "aten::index_add_", "aten::index_copy_", "aten::index_fill_",
      "aten::masked_scatter_", "aten::diagonal_scatter")
def scatter(ctx: Ctx):
    return [ctx.tensor(0)]


def _check_src(ctx: Ctx, view, src):
    """``src`` must have the view's shape (dims that are unknown or symbolic on either side pass)."""
    if view is None or src.shape is None:
        return
    if len(view) != len(src.shape) or any(isinstance(a, int) and isinstance(b, int) and a != b
                                           for a, b in zip(view, src.shape)):
        raise ctx.fail(f"expected src to have a size equal to the slice of self: src size = {list(src.shape)}, "
                       f"slice size = {list(view)}")


@rule("aten::select_scatter")
def select_scatter(ctx: Ctx):
    """``self`` with ``self.select(dim, index)`` replaced by ``src`` (the shape of that view)."""
    x, src = ctx.tensor(0), ctx.tensor(1)
    d, i = ctx.known(2, "dim"), ctx.known(3, "index")
    if x.shape is not None and isinstance(d, int):
        if not x.shape:
            raise ctx.fail("select() cannot be applied to a 0-dim tensor")
        d = ctx.norm_dim(d, len(x.shape))
        n = x.shape[d]
        if isinstance(n, int) and isinstance(i, int) and not -n <= i < n:
            raise ctx.fail(f"index {i} out of range for dimension {d} of size {n}")
        _check_src(ctx, x.shape[:d] + x.shape[d + 1:], src)
    return [tt(x.dtype, x.shape)]


@rule("aten::slice_scatter")
def slice_scatter(ctx: Ctx):
    """``self`` with ``self[start:end:step]`` along ``dim`` replaced by ``src``."""
    from .view import slice_len
    x, src = ctx.tensor(0), ctx.tensor(1)
    d = ctx.known(2, "dim", 0)
    start, end, step = ctx.known(3, "start", None), ctx.known(4, "end", None), ctx.known(5, "step", 1)
    if isinstance(step, int) and not isinstance(step, bool) and step <= 0:
        raise ctx.fail("slice step must be positive")
    if x.shape is not None and isinstance(d, int):
        if not x.shape:
            raise ctx.fail("slice() cannot be applied to a 0-dim tensor")
        d = ctx.norm_dim(d, len(x.shape))
        n = None if UNKNOWN in (start, end, step) else slice_len(x.shape[d], start, end, step)
        _check_src(ctx, x.shape[:d] + (n,) + x.shape[d + 1:], src)
    return [tt(x.dtype, x.shape)]


@rule("aten::nonzero")
def nonzero(ctx: Ctx):
    x = ctx.tensor(0)
    return [tt("int64", (None, x.rank))]


@rule("aten::masked_select")
def masked_select(ctx: Ctx):
    broadcast_shapes([ctx.tensor(0).shape, ctx.tensor(1).shape], ctx.fail)
    return [tt(ctx.tensor(0).dtype, (None,))]


@rule("aten::embedding", "aten::embedding_renorm")
def embedding(ctx: Ctx):
    """``embedding(weight, indices)`` -> indices.shape + weight.shape[1:]."""
    w, idx = ctx.tensor(0), ctx.tensor(1)
    if w.shape is not None and len(w.shape) != 2:
        raise ctx.fail(f"embedding weight must be 2-D, got shape {w.shape}")
    if idx.dtype is not None and idx.dtype not in ("int64", "int32"):
        raise ctx.fail(f"embedding indices must be int64 or int32, got {idx.dtype}")
    if w.shape is None or idx.shape is None:
        return [tt(w.dtype, None)]
    return [tt(w.dtype, idx.shape + (w.shape[1],))]


@rule("aten::one_hot")
def one_hot(ctx: Ctx):
    """int64 ``self.shape + (num_classes,)``; ``num_classes=-1`` (infer from the values): an unknown dim."""
    x = ctx.tensor(0)
    if x.dtype is not None and x.dtype != "int64":
        raise ctx.fail(f"one_hot is only applicable to index tensors of type int64, got {x.dtype}")
    n = ctx.known(1, "num_classes", -1)
    if isinstance(n, int) and not isinstance(n, bool) and n < -1:
        raise ctx.fail(f"num_classes must be -1 (infer) or non-negative, got {n}")
    return [tt("int64", None if x.shape is None else x.shape + ((n if isinstance(n, int) and n >= 0 else None),))]


@rule("aten::tril", "aten::triu", "aten::diag_embed_same")
def tri(ctx: Ctx):
    return [ctx.tensor(0)]


def _bucket_indices(ctx: Ctx, values: int):
    """The shape of argument ``values`` (a Scalar: 0-d), int64 or with ``out_int32`` int32."""
    x = ctx.args[values]
    shape = x.type.shape if isinstance(x.type, TensorType) else ()
    i32 = ctx.known(2, "out_int32", False)
    return [tt(None if i32 is UNKNOWN else ("int32" if i32 else "int64"), shape)]


@rule("aten::bucketize")
def bucketize(ctx: Ctx):
    """The input's shape (a Scalar input: 0-d), int64 or with ``out_int32`` int32."""
    return _bucket_indices(ctx, 0)


@rule("aten::searchsorted")
def searchsorted(ctx: Ctx):
    """The values' shape (the second argument; a Scalar: 0-d), int64 or with ``out_int32`` int32."""
    return _bucket_indices(ctx, 1)


@rule("aten::diag")
def diag(ctx: Ctx):
    """1-D -> the (n + |k|)-square matrix with it on diagonal k; 2-D -> diagonal k as 1-D."""
    x = ctx.tensor(0)
    k = ctx.known(1, "diagonal", 0)
    if x.shape is None:
        return [tt(x.dtype, None)]
    if len(x.shape) not in (1, 2):
        raise ctx.fail(f"diag(): Supports 1D or 2D tensors. Got {len(x.shape)}D")
    if k is UNKNOWN:
        return [tt(x.dtype, (None,) * (3 - len(x.shape)))]
    if len(x.shape) == 1:
        n = x.shape[0]
        m = sym.add(n, abs(k)) if n is not None else None
        return [tt(x.dtype, (m, m))]
    r, c = x.shape
    if isinstance(r, int) and isinstance(c, int):
        return [tt(x.dtype, (max(0, min(r, c - k) if k >= 0 else min(r + k, c)),))]
    return [tt(x.dtype, (None,))]


@rule("aten::embedding_bag", "aten::_embedding_bag")
def embedding_bag(ctx: Ctx):
    """(output (bags, D), offset2bag, bag_size, max_indices) with torch's CPU shapes per mode:
    ``sum`` -> (0,) ((N,) with a padding_idx), (O,), (O,); ``mean`` -> (N,), (bags,), (bags,);
    ``max`` -> (N,), (bags,), (bags, D);
    O = len(offsets), bags = O - include_last_offset, N = len(indices)."""
    w, idx, off = ctx.tensor(0), ctx.tensor(1), ctx.tensor(2)
    mode, last = ctx.known(4, "mode", 0), ctx.known(7, "include_last_offset", False)
    d = w.shape[1] if w.shape is not None and len(w.shape) == 2 else None
    o = off.shape[0] if off.shape is not None and len(off.shape) == 1 else None
    n = idx.shape[0] if idx.shape is not None and len(idx.shape) == 1 else None
    bags = None if o is None or last is UNKNOWN else (sym.sub(o, 1) if last else o)
    i64 = "int64"
    out = tt(w.dtype, (bags, d))
    if mode == 0:
        pad = ctx.known(8, "padding_idx", None) if len(ctx.args) > 8 else None
        o2b = (0,) if pad is None else ((n,) if pad is not UNKNOWN else (None,))
        return [out, tt(i64, o2b), tt(i64, (o,)), tt(i64, (o,))]
    if mode == 1:
        return [out, tt(i64, (n,)), tt(i64, (bags,)), tt(i64, (bags,))]
    if mode == 2:
        return [out, tt(i64, (n,)), tt(i64, (bags,)), tt(i64, (bags, d))]
    return [out, tt(i64, None), tt(i64, None), tt(i64, None)]
