"""Views and shape ops: view/reshape (``-1`` solved, symbolic dims kept), flatten, permute,
transpose, select/slice/narrow, (un)squeeze, expand/repeat, cat/stack/chunk/split/unbind."""
from __future__ import annotations

from ...ir.types import ListType, TensorType
from . import symbolic as sym
from .base import A, Ctx, UNKNOWN, as_dims, rule, tt


def solve_view(ctx: Ctx, in_shape, sizes):
    """The shape of ``view(sizes)``: solve ``-1``, check the element count."""
    if sizes is None:
        return None
    if sum(1 for d in sizes if d == -1) > 1:
        raise ctx.fail(f"only one dimension can be inferred in view {sizes}")
    for d in sizes:
        if isinstance(d, int) and d < -1:
            raise ctx.fail(f"invalid shape dimension {d} in {sizes}")
    total = sym.prod(in_shape) if in_shape is not None else None
    if -1 in sizes:
        i = sizes.index(-1)
        rest = sym.prod(d for j, d in enumerate(sizes) if j != i)
        solved = None
        if total is not None and rest is not None:
            if isinstance(total, int) and isinstance(rest, int):
                if rest == 0 or total % rest:
                    raise ctx.fail(f"shape {list(sizes)} is invalid for input of size {total}")
                solved = total // rest
            else:
                solved = sym.exact_div(total, rest)
        return tuple(sizes[:i]) + (solved,) + tuple(sizes[i + 1:])
    new = sym.prod(sizes)
    if isinstance(total, int) and isinstance(new, int) and total != new:
        raise ctx.fail(f"shape {list(sizes)} is invalid for input of size {total}")
    return tuple(sizes)


@rule("aten::view", "aten::reshape", "aten::_reshape_alias", "aten::_unsafe_view")
def view(ctx: Ctx):
    t = ctx.tensor(0)
    if ctx.is_tensor(1):  # view.dtype overload takes a ScalarType, not a tensor; view_as is separate
        return [t]
    a = ctx.args[1]
    if not isinstance(a.type, ListType) and a.known is not UNKNOWN and isinstance(a.known, int) \
            and ctx.op.startswith("aten::view.dtype"):
        from .base import dtype_code
        return [tt(dtype_code(a.known), None)]
    return [tt(t.dtype, solve_view(ctx, t.shape, as_dims(a)))]


@rule("aten::view_as", "aten::reshape_as", "aten::expand_as")
def view_as(ctx: Ctx):
    t, other = ctx.tensor(0), ctx.tensor(1)
    if ctx.op.startswith("aten::expand_as"):
        return [tt(t.dtype, _expand(ctx, t.shape, other.shape and list(other.shape)))]
    solve_view(ctx, t.shape, other.shape and list(other.shape))
    return [tt(t.dtype, other.shape)]


@rule("aten::flatten")
def flatten(ctx: Ctx):
    t = ctx.tensor(0)
    s = t.shape
    if s is None:
        return [tt(t.dtype, None)]
    if len(s) == 0:
        return [tt(t.dtype, (1,))]
    start, end = ctx.known(1, "start_dim", 0), ctx.known(2, "end_dim", -1)
    if start is UNKNOWN or end is UNKNOWN:
        return [tt(t.dtype, None)]
    a, b = ctx.norm_dim(start, len(s)), ctx.norm_dim(end, len(s))
    if a > b:
        raise ctx.fail("flatten() has invalid args: start_dim cannot come after end_dim")
    return [tt(t.dtype, s[:a] + (sym.prod(s[a:b + 1]),) + s[b + 1:])]


@rule("aten::unflatten")
def unflatten(ctx: Ctx):
    t = ctx.tensor(0)
    d, sizes = ctx.known(1, "dim"), ctx.int_list(2, "sizes")
    if t.shape is None or d is UNKNOWN or sizes is None:
        return [tt(t.dtype, None)]
    d = ctx.norm_dim(d, t.rank)
    inner = solve_view(ctx, (t.shape[d],), sizes)
    return [tt(t.dtype, t.shape[:d] + inner + t.shape[d + 1:])]


@rule("aten::permute")
def permute(ctx: Ctx):
    t = ctx.tensor(0)
    dims = ctx.int_list(1, "dims")
    if t.shape is None or dims is None or any(d is None for d in dims):
        return [tt(t.dtype, None if t.shape is None or dims is None else (None,) * len(dims))]
    if len(dims) != len(t.shape):
        raise ctx.fail(f"permute dims {dims} do not match a tensor of rank {len(t.shape)}")
    nd = [ctx.norm_dim(d, len(t.shape)) for d in dims]
    if len(set(nd)) != len(nd):
        raise ctx.fail(f"repeated dim in permute {dims}")
    return [tt(t.dtype, tuple(t.shape[d] for d in nd))]


@rule("aten::transpose", "aten::swapaxes", "aten::swapdims")
def transpose(ctx: Ctx):
    t = ctx.tensor(0)
    a, b = ctx.known(1), ctx.known(2)
    if t.shape is None or a is UNKNOWN or b is UNKNOWN:
        return [tt(t.dtype, None if t.shape is None else (None,) * len(t.shape))]
    s = list(t.shape)
    a, b = ctx.norm_dim(a, len(s)), ctx.norm_dim(b, len(s))
    if s:   # a 0-d tensor accepts dims 0 / -1 and stays 0-d
        s[a], s[b] = s[b], s[a]
    return [tt(t.dtype, s)]


@rule("aten::t", "aten::numpy_T", "aten::adjoint")
def t_(ctx: Ctx):
    t = ctx.tensor(0)
    if t.shape is None:
        return [t]
    if len(t.shape) > 2 and ctx.op.startswith("aten::t"):
        raise ctx.fail(f"t() expects a tensor with <= 2 dimensions, got {len(t.shape)}")
    return [tt(t.dtype, t.shape[::-1] if len(t.shape) <= 2 or "numpy" in ctx.op else
               t.shape[:-2] + (t.shape[-1], t.shape[-2]))]


@rule("aten::movedim", "aten::moveaxis")
def movedim(ctx: Ctx):
    t = ctx.tensor(0)
    src, dst = ctx.int_list(1, None, 1), ctx.int_list(2, None, 1)
    if t.shape is None or src is None or dst is None or None in src or None in dst:
        return [tt(t.dtype, None if t.shape is None else (None,) * len(t.shape))]
    n = len(t.shape)
    src = [ctx.norm_dim(d, n) for d in src]
    dst = [ctx.norm_dim(d, n) for d in dst]
    order = [None] * n
    for s_, d_ in zip(src, dst):
        order[d_] = s_
    rest = iter(d for d in range(n) if d not in src)
    order = [o if o is not None else next(rest) for o in order]
    return [tt(t.dtype, tuple(t.shape[o] for o in order))]


@rule("aten::select")
def select(ctx: Ctx):
    t = ctx.tensor(0)
    if not ctx.is_tensor(0):
        from .scalar import getitem
        return getitem(ctx)
    d, i = ctx.known(1, "dim"), ctx.known(2, "index")
    if t.shape is None:
        return [tt(t.dtype, None)]
    if d is UNKNOWN:
        return [tt(t.dtype, (None,) * (len(t.shape) - 1))]
    d = ctx.norm_dim(d, len(t.shape))
    n = t.shape[d]
    if isinstance(n, int) and isinstance(i, int) and not -n <= i < n:
        raise ctx.fail(f"index {i} out of range for dimension {d} of size {n}")
    return [tt(t.dtype, t.shape[:d] + t.shape[d + 1:])]


def slice_len(n, start, end, step):
    """Python slice length; None when unknown."""
    if not isinstance(step, int) or step is None:
        return None
    start = 0 if start is None else start
    if end is None:
        end = n
    if isinstance(n, int) and isinstance(start, int) and isinstance(end, int):
        return len(range(*slice(start, end, step).indices(n)))
    # symbolic n: full slices and slices with nonnegative in-range bounds of known size
    if start == 0 and (end == n or (isinstance(end, int) and end >= 2 ** 62)) and step == 1:
        return n
    return None


@rule("aten::slice")
def slice_(ctx: Ctx):
    t = ctx.tensor(0)
    if not ctx.is_tensor(0):
        a = ctx.args[0]
        st, en, sp = (ctx.known(i, None, None) for i in (1, 2, 3))
        if isinstance(a.known, (list, tuple)) and UNKNOWN not in (st, en, sp):
            return [A(a.type, list(a.known[slice(st, en, sp or 1)]))]
        return [A(a.type)]
    if t.shape is None:
        return [t]
    d = ctx.known(1, "dim", 0)
    start, end, step = ctx.known(2, "start", None), ctx.known(3, "end", None), ctx.known(4, "step", 1)
    if d is UNKNOWN:
        return [tt(t.dtype, (None,) * len(t.shape))]
    d = ctx.norm_dim(d, len(t.shape))
    if isinstance(step, int) and step <= 0:
        raise ctx.fail("slice step must be positive")
    if UNKNOWN in (start, end, step):
        n = None
    else:
        n = slice_len(t.shape[d], start, end, step)
    return [tt(t.dtype, t.shape[:d] + (n,) + t.shape[d + 1:])]


@rule("aten::narrow", "aten::narrow_copy")
def narrow(ctx: Ctx):
    t = ctx.tensor(0)
    d, start, length = ctx.known(1), ctx.known(2), ctx.known(3)
    if t.shape is None or d is UNKNOWN:
        return [tt(t.dtype, None if t.shape is None else (None,) * len(t.shape))]
    d = ctx.norm_dim(d, len(t.shape))
    n = t.shape[d]
    if isinstance(n, int) and isinstance(start, int) and isinstance(length, int):
        s = start + n if start < 0 else start
        if s < 0 or s + length > n or length < 0:
            raise ctx.fail(f"narrow start {start} + length {length} exceeds dimension size {n}")
    return [tt(t.dtype, t.shape[:d] + ((length if length is not UNKNOWN else None),) + t.shape[d + 1:])]


@rule("aten::unsqueeze", "aten::unsqueeze_")
def unsqueeze(ctx: Ctx):
    t = ctx.tensor(0)
    d = ctx.known(1, "dim")
    if t.shape is None or d is UNKNOWN:
        return [tt(t.dtype, None)]
    d = ctx.norm_dim(d, len(t.shape), extra=1)
    return [tt(t.dtype, t.shape[:d] + (1,) + t.shape[d:])]


@rule("aten::squeeze", "aten::squeeze_")
def squeeze(ctx: Ctx):
    t = ctx.tensor(0)
    s = t.shape
    if s is None:
        return [t]
    if len(ctx.args) < 2:
        if any(d is None or isinstance(d, str) for d in s):
            return [tt(t.dtype, None)]
        return [tt(t.dtype, tuple(d for d in s if d != 1))]
    dims = ctx.int_list(1, None, 1)
    if dims is None or None in dims:
        return [tt(t.dtype, None)]
    nd = {ctx.norm_dim(d, len(s)) for d in dims}
    if any(s[d] is None for d in nd if s):
        return [tt(t.dtype, None)]
    return [tt(t.dtype, tuple(x for i, x in enumerate(s) if not (i in nd and x == 1)))]


def _expand(ctx: Ctx, shape, sizes):
    if shape is None or sizes is None:
        return None if sizes is None else tuple(None if d == -1 else d for d in sizes)
    if len(sizes) < len(shape):
        raise ctx.fail(f"expand to {sizes}: fewer dims than the tensor's {len(shape)}")
    off = len(sizes) - len(shape)
    out = list(sizes[:off])
    for d, s in zip(shape, sizes[off:]):
        if s == -1 or s is None and d is not None and d != 1:
            out.append(d)
        elif d == 1 or sym.equal(d, s) or d is None or s is None or not isinstance(d, int) \
                or not isinstance(s, int):
            out.append(d if s == -1 else s)
        else:
            raise ctx.fail(f"cannot expand dimension {d} to {s}")
    return tuple(out)


@rule("aten::expand", "aten::broadcast_to")
def expand(ctx: Ctx):
    t = ctx.tensor(0)
    return [tt(t.dtype, _expand(ctx, t.shape, ctx.int_list(1, "size")))]


@rule("aten::repeat", "aten::tile")
def repeat(ctx: Ctx):
    t = ctx.tensor(0)
    reps = ctx.int_list(1, None)
    if t.shape is None or reps is None:
        return [tt(t.dtype, None)]
    s = t.shape
    if len(reps) < len(s):
        if ctx.op.startswith("aten::tile"):
            reps = [1] * (len(s) - len(reps)) + reps
        else:
            raise ctx.fail("number of repeat dims can not be smaller than the number of tensor dims")
    s = (1,) * (len(reps) - len(s)) + tuple(s)
    return [tt(t.dtype, tuple(sym.mul(a, b) for a, b in zip(s, reps)))]


@rule("aten::flip", "aten::roll", "aten::fliplr", "aten::flipud", "aten::rot90_same")
def same_shape(ctx: Ctx):
    return [ctx.tensor(0)]


def _tensor_list(ctx: Ctx, pos: int):
    a = ctx.args[pos]
    if a.elems is None:
        return None
    return [e.type if isinstance(e.type, TensorType) else TensorType() for e in a.elems]


@rule("aten::cat", "aten::concat", "aten::concatenate")
def cat(ctx: Ctx):
    from .dtypes import result_type
    ts = _tensor_list(ctx, 0)
    d = ctx.known(1, "dim", 0)
    if ts is None:
        return [tt(None, None)]
    dtype = result_type([t.dtype for t in ts])
    # legacy: 1-d empty tensors are skipped
    ts = [t for t in ts if t.shape != (0,)] or ts
    ranks = {t.rank for t in ts}
    if len(ranks - {None}) > 1:
        raise ctx.fail(f"cat of tensors with different ranks {sorted(ranks - {None})}")
    if d is UNKNOWN or ranks <= {None}:   # (an empty list: the kernel raises torch's error)
        return [tt(dtype, None)]
    # an input of unknown rank has the others' rank (or is a skipped legacy empty): the rank is known,
    # its size along ``d`` is not
    unknown = None in ranks
    ts = [t for t in ts if t.rank is not None]
    rank = ts[0].rank
    d = ctx.norm_dim(d, rank)
    out = []
    for i in range(rank):
        if i == d:
            out.append(None if unknown else _sum([t.shape[i] for t in ts]))
            continue
        dim = ts[0].shape[i]
        for t in ts[1:]:
            e = sym.equal(dim, t.shape[i])
            if e is False:
                raise ctx.fail(f"sizes of tensors must match except in dimension {d}: "
                               f"{ts[0].shape} vs {t.shape}")
            if dim is None or (isinstance(t.shape[i], int) and not isinstance(dim, int)):
                dim = t.shape[i]
        out.append(dim)
    return [tt(dtype, out)]


def _sum(dims):
    out = 0
    for d in dims:
        out = sym.add(out, d)
    return out


@rule("aten::stack")
def stack(ctx: Ctx):
    from .dtypes import result_type
    from .elementwise import broadcast_shapes
    ts = _tensor_list(ctx, 0)
    d = ctx.known(1, "dim", 0)
    if ts is None:
        return [tt(None, None)]
    dtype = result_type([t.dtype for t in ts])
    shapes = {t.shape for t in ts}
    if None in shapes or d is UNKNOWN:
        return [tt(dtype, None)]
    ranks = {len(s) for s in shapes}
    if len(ranks) != 1:
        raise ctx.fail(f"stack expects each tensor to be equal size, got {sorted(shapes, key=str)}")
    ref = ts[0].shape
    for t in ts[1:]:
        for a, b in zip(ref, t.shape):
            if sym.equal(a, b) is False:
                raise ctx.fail(f"stack expects each tensor to be equal size, got {ref} and {t.shape}")
    d = ctx.norm_dim(d, len(ref), extra=1)
    return [tt(dtype, ref[:d] + (len(ts),) + ref[d:])]


@rule("aten::chunk", "aten::split", "aten::split_with_sizes", "aten::unsafe_split", "aten::unsafe_chunk",
      "aten::tensor_split", "aten::unbind", "aten::unsafe_split_with_sizes")
def split(ctx: Ctx):
    """Pieces along a dim: a Tensor[] with known element types when the sizes are known."""
    t = ctx.tensor(0)
    op = ctx.op.split("::")[1].split(".")[0]
    lt = ListType(TensorType(t.dtype))
    dpos = 1 if op == "unbind" else 2
    d = ctx.known(dpos, "dim", 0)
    if t.shape is None or d is UNKNOWN:
        return _unknown_pieces(ctx, t)
    d = ctx.norm_dim(d, len(t.shape))
    n = t.shape[d]
    if op == "unbind":
        if not isinstance(n, int):
            return _unknown_pieces(ctx, t)
        pieces = [tt(t.dtype, t.shape[:d] + t.shape[d + 1:])] * n
        return _as_outputs(ctx, pieces)
    arg = ctx.args[1]
    if op == "tensor_split" and (isinstance(arg.type, ListType) or isinstance(arg.known, (list, tuple))):
        # split *indices*, not sizes: the pieces are x[:i0], x[i0:i1], ..., x[ik:] (Python slicing)
        idx = as_dims(arg)
        if idx is None or not isinstance(n, int) or not all(isinstance(i, int) for i in idx):
            return _unknown_pieces(ctx, t) if idx is None else _as_outputs(
                ctx, [tt(t.dtype, t.shape[:d] + (None,) + t.shape[d + 1:])] * (len(idx) + 1))
        bounds = [0, *idx, n]
        sizes = [len(range(n)[a:b]) for a, b in zip(bounds, bounds[1:])]
    elif isinstance(arg.type, ListType) or isinstance(arg.known, (list, tuple)):
        sizes = as_dims(arg)
        if sizes is None:
            return _unknown_pieces(ctx, t)
        total = _sum(sizes)
        if isinstance(total, int) and isinstance(n, int) and total != n:
            raise ctx.fail(f"split sizes {sizes} do not sum to dimension size {n}")
    else:
        k = arg.known
        if not isinstance(k, int) or not isinstance(n, int):
            return _unknown_pieces(ctx, t)
        if op in ("chunk", "unsafe_chunk"):
            if k <= 0:
                raise ctx.fail("chunk expects `chunks` to be greater than 0")
            step = -(-n // k) if n else 0
            sizes = [min(step, n - i) for i in range(0, n, step)] if step else [0] * k
        elif op == "tensor_split":
            sizes = [n // k + (1 if i < n % k else 0) for i in range(k)]
        else:
            if k <= 0:
                raise ctx.fail(f"split_size must be positive, got {k}")
            sizes = [min(k, n - i) for i in range(0, n, k)] or [0]
    return _as_outputs(ctx, [tt(t.dtype, t.shape[:d] + (s,) + t.shape[d + 1:]) for s in sizes])


def _as_outputs(ctx: Ctx, pieces):
    outs = ctx.node.outputs
    if len(outs) == 1 and isinstance(outs[0].type, (ListType,)) or len(outs) == 1 and len(pieces) != 1:
        return [A(ListType(TensorType(pieces[0].dtype if pieces else None)), UNKNOWN,
                  [A(p) for p in pieces])]
    if len(outs) != len(pieces):
        raise ctx.fail(f"produces {len(pieces)} tensors, but the node has {len(outs)} outputs")
    return pieces


def _unknown_pieces(ctx: Ctx, t):
    outs = ctx.node.outputs
    piece = tt(t.dtype, None if t.shape is None else (None,) * len(t.shape))
    if len(outs) == 1 and (isinstance(outs[0].type, ListType) or outs[0].type is None):
        return [A(ListType(TensorType(t.dtype)))]
    return [piece] * len(outs)


@rule("prim::ConstantChunk")
def constant_chunk(ctx: Ctx):
    """``prim::ConstantChunk[chunks=n, dim=d](x)``: chunk with the count and dim as attributes."""
    from ...ir.types import INT
    n, d = ctx.node.attrs.get("chunks"), ctx.node.attrs.get("dim", 0)
    if not isinstance(n, int) or not ctx.args:
        return _unknown_pieces(ctx, ctx.tensor(0))
    inner = Ctx(ctx.node, [ctx.args[0], A(INT, n), A(INT, d)], None, "aten::chunk")
    return split(inner)


@rule("aten::unfold")
def unfold(ctx: Ctx):
    """``x.unfold(d, size, step)`` (sliding windows, a view): dim ``d`` becomes the window count
    ``(n - size) // step + 1`` and a last dim of ``size`` is appended."""
    x = ctx.tensor(0)
    d, size, step = ctx.known(1, "dimension"), ctx.known(2, "size"), ctx.known(3, "step")
    if x.shape is None:
        return [tt(x.dtype, None)]
    if d is UNKNOWN:
        return [tt(x.dtype, (None,) * (len(x.shape) + 1))]
    if not x.shape:
        return [tt(x.dtype, (size if isinstance(size, int) else None,))]
    d = ctx.norm_dim(d, len(x.shape))
    n = x.shape[d]
    if isinstance(size, int) and isinstance(step, int):
        if step <= 0:
            raise ctx.fail(f"unfold step must be > 0, got {step}")
        if isinstance(n, int) and size > n:
            raise ctx.fail(f"unfold size {size} exceeds the size {n} of dimension {d}")
        count = sym.add(sym.floordiv(sym.sub(n, size), step), 1) if n is not None else None
    else:
        count = None
    last = size if isinstance(size, int) else None
    return [tt(x.dtype, x.shape[:d] + (count,) + x.shape[d + 1:] + (last,))]


@rule("aten::meshgrid")
def meshgrid(ctx: Ctx):
    """``meshgrid(tensors, indexing="ij"|"xy")``: one tensor per 0-d/1-d input, each of the shape
    (n0, n1, ...) of the input lengths ("xy" swaps the first two)."""
    ts = _tensor_list(ctx, 0)
    if ts is None:
        return [A(ListType(TensorType(None)))]
    indexing = ctx.known(1, "indexing", "ij") if len(ctx.args) > 1 else "ij"
    sizes = []
    for t in ts:
        if t.shape is None:
            sizes.append(None)
        elif len(t.shape) > 1:
            raise ctx.fail(f"meshgrid expects 0-D or 1-D tensors, got a {len(t.shape)}-D one")
        else:
            sizes.append(t.shape[0] if t.shape else 1)
    if indexing == "xy" and len(sizes) >= 2:
        sizes[0], sizes[1] = sizes[1], sizes[0]
    elif indexing is UNKNOWN:
        sizes = [None] * len(sizes)
    return _as_outputs(ctx, [tt(t.dtype, tuple(sizes)) for t in ts])


@rule("aten::diagonal")
def diagonal(ctx: Ctx):
    """``x.diagonal(offset, dim1, dim2)`` (a view): both dims go, the diagonal's length is appended."""
    x = ctx.tensor(0)
    off, d1, d2 = ctx.known(1, "offset", 0), ctx.known(2, "dim1", 0), ctx.known(3, "dim2", 1)
    if x.shape is None:
        return [tt(x.dtype, None)]
    if len(x.shape) < 2:
        raise ctx.fail(f"diagonal(): expected a tensor of at least 2 dimensions, got {len(x.shape)}")
    if UNKNOWN in (off, d1, d2):
        return [tt(x.dtype, (None,) * (len(x.shape) - 1))]
    d1, d2 = ctx.norm_dim(d1, len(x.shape)), ctx.norm_dim(d2, len(x.shape))
    if d1 == d2:
        raise ctx.fail(f"diagonal dimensions cannot be identical {d1}, {d2}")
    a, b = x.shape[d1], x.shape[d2]
    n = max(0, min(a, b - off) if off >= 0 else min(a + off, b)) if isinstance(a, int) and isinstance(b, int) \
        else None
    rest = tuple(s for i, s in enumerate(x.shape) if i not in (d1, d2))
    return [tt(x.dtype, rest + (n,))]
