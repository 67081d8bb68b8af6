"""Matrix products: matmul/mm/bmm/addmm/baddbmm/linear/einsum, and the fused linear ops."""
from __future__ import annotations

from . import symbolic as sym
from .base import A, Ctx, UNKNOWN, rule, tt
from .dtypes import result_type
from .elementwise import broadcast_dim, broadcast_shapes


def _check_inner(ctx: Ctx, a, b, what="inner dimensions"):
    if sym.equal(a, b) is False or (isinstance(a, int) and isinstance(b, int) and a != b):
        raise ctx.fail(f"matmul {what} do not match: {a} vs {b}")


def _dtype(ctx: Ctx, *ts):
    ds = [t.dtype for t in ts]
    if any(d is None for d in ds):
        return next((d for d in ds if d is not None), None) if len(set(ds) - {None}) <= 1 else None
    if len(set(ds)) > 1:
        raise ctx.fail(f"expected operands of the same dtype, got {', '.join(ds)}")
    return ds[0]


def matmul_shape(ctx: Ctx, a, b):
    """torch.matmul's result shape (1-d operands are promoted, batch dims broadcast)."""
    if a is None or b is None:
        return None
    if len(a) == 0 or len(b) == 0:
        raise ctx.fail("both arguments to matmul need to be at least 1D")
    if len(a) == 1 and len(b) == 1:
        _check_inner(ctx, a[0], b[0])
        return ()
    if len(b) == 1:
        _check_inner(ctx, a[-1], b[0])
        return tuple(a[:-1])
    if len(a) == 1:
        _check_inner(ctx, a[0], b[-2])
        return tuple(b[:-2]) + (b[-1],)
    _check_inner(ctx, a[-1], b[-2])
    batch = broadcast_shapes([a[:-2], b[:-2]], ctx.fail)
    return batch + (a[-2], b[-1])


@rule("aten::matmul")
def matmul(ctx: Ctx):
    a, b = ctx.tensor(0), ctx.tensor(1)
    return [tt(_dtype(ctx, a, b), matmul_shape(ctx, a.shape, b.shape))]


def _ranked(ctx: Ctx, t, n, name):
    if t.shape is not None and len(t.shape) != n:
        raise ctx.fail(f"{name} must be a {n}-D tensor, got shape {t.shape}")
    return t.shape


@rule("aten::mm")
def mm(ctx: Ctx):
    a, b = ctx.tensor(0), ctx.tensor(1)
    sa, sb = _ranked(ctx, a, 2, "self"), _ranked(ctx, b, 2, "mat2")
    return [tt(_dtype(ctx, a, b), None if sa is None or sb is None else matmul_shape(ctx, sa, sb))]


@rule("aten::bmm")
def bmm(ctx: Ctx):
    a, b = ctx.tensor(0), ctx.tensor(1)
    sa, sb = _ranked(ctx, a, 3, "self"), _ranked(ctx, b, 3, "mat2")
    if sa is None or sb is None:
        return [tt(_dtype(ctx, a, b), None)]
    if sym.equal(sa[0], sb[0]) is False:
        raise ctx.fail(f"bmm batch sizes do not match: {sa[0]} vs {sb[0]}")
    _check_inner(ctx, sa[2], sb[1])
    return [tt(_dtype(ctx, a, b), (broadcast_dim(sa[0], sb[0], ctx.fail), sa[1], sb[2]))]


@rule("aten::addmm", "aten::baddbmm", "aten::_addmm_activation")
def addmm(ctx: Ctx):
    """``beta * self + alpha * (mat1 @ mat2)``; self broadcasts to the product."""
    base = "bmm" if ctx.op.startswith("aten::baddbmm") else "mm"
    inner = Ctx(ctx.node, ctx.args[1:3], None, "aten::" + base)
    prod = (bmm if base == "bmm" else mm)(inner)[0]
    if ctx.op.startswith("aten::addbmm") and prod.shape is not None:
        prod = tt(prod.dtype, prod.shape[1:])
    s = ctx.tensor(0)
    if s.shape is not None and prod.shape is not None:
        out = broadcast_shapes([s.shape, prod.shape], ctx.fail)
        if len(out) != len(prod.shape) or any(sym.equal(x, y) is False for x, y in zip(out, prod.shape)):
            raise ctx.fail(f"self of shape {s.shape} does not broadcast to the product {prod.shape}")
    return [tt(result_type([s.dtype, prod.dtype]) if s.dtype and prod.dtype else prod.dtype, prod.shape)]


@rule("aten::mv", "aten::dot", "aten::vdot")
def mv(ctx: Ctx):
    a, b = ctx.tensor(0), ctx.tensor(1)
    return [tt(_dtype(ctx, a, b), matmul_shape(ctx, a.shape, b.shape))]


@rule("aten::outer", "aten::ger")
def outer(ctx: Ctx):
    a, b = ctx.tensor(0), ctx.tensor(1)
    s = None if a.shape is None or b.shape is None else (a.shape[0], b.shape[0])
    return [tt(result_type([a.dtype, b.dtype]), s)]


@rule("aten::linear", "srcore::linear_relu", "srcore::linear_gelu", "srcore::linear_silu")
def linear(ctx: Ctx):
    """``input @ weight.T + bias``: (*, in) x (out, in) -> (*, out)."""
    x, w = ctx.tensor(0), ctx.tensor(1)
    b = ctx.arg(2)
    dtype = _dtype(ctx, x, w)
    if x.shape is None or w.shape is None:
        out_f = w.shape[0] if w.shape is not None and len(w.shape) == 2 else None
        return [tt(dtype, None if x.shape is None else x.shape[:-1] + (out_f,))]
    if len(w.shape) == 1:
        _check_inner(ctx, x.shape[-1], w.shape[0], "linear input features and weight")
        shape = x.shape[:-1]
    else:
        _ranked(ctx, w, 2, "weight")
        if not x.shape:
            raise ctx.fail("linear input must be at least 1-D")
        _check_inner(ctx, x.shape[-1], w.shape[1], "linear input features and weight in_features")
        shape = x.shape[:-1] + (w.shape[0],)
    if b is not None and b.known is not None and b.type is not None and hasattr(b.type, "shape") \
            and b.type.shape is not None:
        broadcast_shapes([b.type.shape, shape], ctx.fail)
    return [tt(dtype, shape)]


def _einsum_parse(ctx: Ctx, eq: str, n_ops: int):
    eq = eq.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    ins = lhs.split(",")
    if len(ins) != n_ops:
        raise ctx.fail(f"einsum equation {eq!r} has {len(ins)} operands, got {n_ops} tensors")
    return ins, (rhs if arrow else None)


@rule("aten::einsum")
def einsum(ctx: Ctx):
    eq = ctx.known(0, "equation")
    ops = ctx.arg(1, "tensors")
    if not isinstance(eq, str) or ops is None or ops.elems is None:
        return [tt(None, None)]
    ts = [e.type for e in ops.elems]
    dtype = _dtype(ctx, *ts)
    ins, out = _einsum_parse(ctx, eq, len(ts))
    sizes: dict[str, object] = {}
    ell = None
    for spec, t in zip(ins, ts):
        if t.shape is None:
            return [tt(dtype, None)]
        s = list(t.shape)
        if "..." in spec:
            pre, post = spec.split("...")
            n_ell = len(s) - len(pre) - len(post)
            ell_shape = s[len(pre):len(pre) + n_ell]
            ell = ell_shape if ell is None else list(broadcast_shapes([ell, ell_shape], ctx.fail))
            s = s[:len(pre)] + s[len(pre) + n_ell:]
            spec = pre + post
        if len(spec) != len(s):
            raise ctx.fail(f"einsum operand {spec!r} does not match a tensor of rank {len(t.shape)}")
        for c, d in zip(spec, s):
            if c in sizes:
                if sym.equal(sizes[c], d) is False and 1 not in (sizes[c], d):
                    raise ctx.fail(f"einsum subscript {c!r} has sizes {sizes[c]} and {d}")
                if sizes[c] == 1:
                    sizes[c] = d
            else:
                sizes[c] = d
    if out is None:
        counts = {}
        for spec in ins:
            for c in spec.replace("...", ""):
                counts[c] = counts.get(c, 0) + 1
        out = ("..." if ell is not None else "") + "".join(sorted(c for c, k in counts.items() if k == 1))
    shape = []
    if "..." in out:
        pre, post = out.split("...")
        shape = [sizes[c] for c in pre] + list(ell or []) + [sizes[c] for c in post]
    else:
        shape = [sizes[c] for c in out]
    return [tt(dtype, shape)]


@rule("aten::cdist", "aten::_cdist_forward")
def cdist(ctx: Ctx):
    """(*, P, M) x (*, R, M) -> (*broadcast, P, R)."""
    a, b = ctx.tensor(0), ctx.tensor(1)
    dtype = a.dtype or b.dtype
    if a.shape is None or b.shape is None:
        return [tt(dtype, None)]
    if len(a.shape) < 2 or len(b.shape) < 2:
        raise ctx.fail(f"cdist only supports at least 2D tensors, got: {len(a.shape)}D and {len(b.shape)}D")
    _check_inner(ctx, a.shape[-1], b.shape[-1], "cdist feature sizes")
    batch = broadcast_shapes([a.shape[:-2], b.shape[:-2]], ctx.fail)
    return [tt(dtype, tuple(batch) + (a.shape[-2], b.shape[-2]))]


@rule("aten::pairwise_distance")
def pairwise_distance(ctx: Ctx):
    """``norm(x1 - x2 + eps, p, dim=-1)``: the broadcast shape without its last dim (kept with keepdim)."""
    a, b = ctx.tensor(0), ctx.tensor(1)
    dtype = a.dtype or b.dtype
    if a.shape is None or b.shape is None:
        return [tt(dtype, None)]
    shape = tuple(broadcast_shapes([a.shape, b.shape], ctx.fail))
    keep = ctx.known(4, "keepdim", False)
    if not shape:
        return [tt(dtype, ())]
    if keep is UNKNOWN:
        return [tt(dtype, None)]
    return [tt(dtype, shape[:-1] + ((1,) if keep else ()))]
