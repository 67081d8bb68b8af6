"""Rules of the linear-algebra ops on (batches of) matrices: inverse, det, solve, powers, products, transposes."""
from __future__ import annotations

from .base import Ctx, UNKNOWN, rule, tt
from .dtypes import is_integral, result_type
from .elementwise import broadcast_shapes


def _square(ctx: Ctx, t, what="A"):
    if t.shape is None:
        return None
    if len(t.shape) < 2:
        raise ctx.fail(f"{what} must have at least 2 dimensions, got shape {list(t.shape)}")
    a, b = t.shape[-2:]
    if isinstance(a, int) and isinstance(b, int) and a != b:
        raise ctx.fail(f"{what} must be batches of square matrices, but they are {a} by {b} matrices")
    return t.shape


def _float(ctx: Ctx, t):
    if t.dtype is not None and (is_integral(t.dtype) or t.dtype == "bool"):
        raise ctx.fail(f"expected a floating point input, got {t.dtype}")
    return t.dtype


@rule("aten::linalg_inv", "aten::inverse", "aten::linalg_matrix_power", "aten::matrix_power",
      "aten::linalg_matrix_exp", "aten::matrix_exp", "aten::cholesky_inverse")
def square_same(ctx: Ctx):
    t = ctx.tensor(0)
    if ctx.op.split(".")[0] in ("aten::linalg_matrix_power", "aten::matrix_power"):
        return [tt(t.dtype, _square(ctx, t))]  # integer matrices have integer powers
    return [tt(_float(ctx, t), _square(ctx, t))]


@rule("aten::linalg_det", "aten::det", "aten::linalg_cond")
def det(ctx: Ctx):
    t = ctx.tensor(0)
    s = _square(ctx, t) if not ctx.op.startswith("aten::linalg_cond") else t.shape
    return [tt(_float(ctx, t), None if s is None else s[:-2])]


@rule("aten::nuclear_norm")
def nuclear_norm(ctx: Ctx):
    t = ctx.tensor(0)
    keep = ctx.known(len(ctx.args) - 1, "keepdim", False)
    dims = ctx.int_list(1, "dim") if len(ctx.args) == 3 else [-2, -1]
    if t.shape is None or keep is UNKNOWN or dims is None:
        return [tt(_float(ctx, t), None)]
    n = len(t.shape)
    dd = {d % n for d in dims}
    shape = tuple(1 if i in dd else s for i, s in enumerate(t.shape)) if keep else \
        tuple(s for i, s in enumerate(t.shape) if i not in dd)
    return [tt(_float(ctx, t), shape)]


@rule("aten::linalg_solve", "aten::cholesky_solve", "aten::linalg_solve_triangular")
def solve(ctx: Ctx):
    """``linalg_solve(A, B, left)``; ``cholesky_solve(B, L)``; ``linalg_solve_triangular(A, B, ...)``: B's shape,
    batch dims broadcast (a 1-D B in linalg_solve is a vector)."""
    if ctx.op.startswith("aten::cholesky_solve"):
        b, a = ctx.tensor(0), ctx.tensor(1)
    else:
        a, b = ctx.tensor(0), ctx.tensor(1)
    dtype = result_type([a.dtype, b.dtype]) if a.dtype and b.dtype else None
    if a.shape is None or b.shape is None:
        return [tt(dtype, None)]
    _square(ctx, a)
    if ctx.op.startswith("aten::linalg_solve.") or ctx.op == "aten::linalg_solve":
        if len(b.shape) == 1 or (len(b.shape) == len(a.shape) - 1 and b.shape == a.shape[:-1]):
            return [tt(dtype, tuple(broadcast_shapes([a.shape[:-2], b.shape[:-1]], ctx.fail)) + (b.shape[-1],))]
    batch = broadcast_shapes([a.shape[:-2], b.shape[:-2]], ctx.fail)
    return [tt(dtype, tuple(batch) + tuple(b.shape[-2:]))]


@rule("aten::linalg_tensorinv")
def tensorinv(ctx: Ctx):
    t, ind = ctx.tensor(0), ctx.known(1, "ind", 2)
    if t.shape is None or not isinstance(ind, int):
        return [tt(_float(ctx, t), None)]
    return [tt(_float(ctx, t), tuple(t.shape[ind:]) + tuple(t.shape[:ind]))]


@rule("aten::mT", "aten::mH", "aten::matrix_H")
def matrix_transpose(ctx: Ctx):
    t = ctx.tensor(0)
    if t.shape is not None and len(t.shape) < 2:
        raise ctx.fail(f"tensor.mT is only supported on matrices or batches of matrices. Got {len(t.shape)}-D tensor.")
    return [tt(t.dtype, None if t.shape is None else tuple(t.shape[:-2]) + (t.shape[-1], t.shape[-2]))]


@rule("aten::addmv")
def addmv(ctx: Ctx):
    s, m, v = ctx.tensor(0), ctx.tensor(1), ctx.tensor(2)
    out = None if m.shape is None else (m.shape[0],)
    if out is not None and s.shape is not None:
        broadcast_shapes([s.shape, out], ctx.fail)
    return [tt(result_type([s.dtype, m.dtype, v.dtype]) if s.dtype and m.dtype and v.dtype else None, out)]


@rule("aten::addr")
def addr(ctx: Ctx):
    s, a, b = ctx.tensor(0), ctx.tensor(1), ctx.tensor(2)
    out = None if a.shape is None or b.shape is None else (a.shape[0], b.shape[0])
    if out is not None and s.shape is not None:
        broadcast_shapes([s.shape, out], ctx.fail)
    return [tt(result_type([s.dtype, a.dtype, b.dtype]) if s.dtype and a.dtype and b.dtype else None, out)]


@rule("aten::kron")
def kron(ctx: Ctx):
    a, b = ctx.tensor(0), ctx.tensor(1)
    dtype = result_type([a.dtype, b.dtype]) if a.dtype and b.dtype else None
    if a.shape is None or b.shape is None:
        return [tt(dtype, None)]
    n = max(len(a.shape), len(b.shape))
    sa = (1,) * (n - len(a.shape)) + tuple(a.shape)
    sb = (1,) * (n - len(b.shape)) + tuple(b.shape)
    return [tt(dtype, tuple(x * y if isinstance(x, int) and isinstance(y, int) else None for x, y in zip(sa, sb)))]


@rule("aten::cross", "aten::linalg_cross")
def cross(ctx: Ctx):
    a, b = ctx.tensor(0), ctx.tensor(1)
    dtype = result_type([a.dtype, b.dtype]) if a.dtype and b.dtype else None
    if a.shape is None or b.shape is None:
        return [tt(dtype, None)]
    return [tt(dtype, broadcast_shapes([a.shape, b.shape], ctx.fail))]


@rule("aten::vstack", "aten::row_stack")
def vstack(ctx: Ctx):
    a = ctx.args[0]
    elems = a.elems or []
    ts = [e.type for e in elems]
    if not ts or any(t.shape is None for t in ts):
        return [tt(None, None)]
    shapes = [((1,) + tuple(t.shape)) if len(t.shape) < 2 else tuple(t.shape) for t in ts]
    shapes = [(1, 1) if len(s) == 1 and s == (1,) else s for s in shapes]
    first = 0
    for s in shapes:
        first = first + s[0] if isinstance(first, int) and isinstance(s[0], int) else None
    dtype = result_type([t.dtype for t in ts]) if all(t.dtype for t in ts) else None
    return [tt(dtype, (first,) + shapes[0][1:])]



@rule("aten::linalg_diagonal")
def linalg_diagonal(ctx: Ctx):
    """``linalg_diagonal(A, *, offset=0, dim1=-2, dim2=-1)``: ``diagonal`` with matrix-last defaults."""
    t = ctx.tensor(0)
    off, d1, d2 = ctx.known(1, "offset", 0), ctx.known(2, "dim1", -2), ctx.known(3, "dim2", -1)
    if t.shape is None or UNKNOWN in (off, d1, d2):
        return [tt(t.dtype, None)]
    n = len(t.shape)
    d1, d2 = d1 % n, d2 % n
    a, b = t.shape[d1], t.shape[d2]
    if isinstance(a, int) and isinstance(b, int):
        size = max(0, min(a, b - off) if off >= 0 else min(a + off, b))
    else:
        size = None
    return [tt(t.dtype, tuple(s for i, s in enumerate(t.shape) if i not in (d1, d2)) + (size,))]


@rule("aten::addbmm")
def addbmm(ctx: Ctx):
    """``beta * self + alpha * sum_b batch1[b] @ batch2[b]``: (n, p), self broadcast to it."""
    s, b1, b2 = ctx.tensor(0), ctx.tensor(1), ctx.tensor(2)
    dtype = result_type([s.dtype, b1.dtype, b2.dtype]) if s.dtype and b1.dtype and b2.dtype else None
    if b1.shape is None or b2.shape is None:
        return [tt(dtype, None)]
    if len(b1.shape) != 3 or len(b2.shape) != 3:
        raise ctx.fail(f"batch1 and batch2 must be 3-D tensors, got {list(b1.shape)} and {list(b2.shape)}")
    out = (b1.shape[1], b2.shape[2])
    if s.shape is not None:
        broadcast_shapes([s.shape, out], ctx.fail)
    return [tt(dtype, out)]


@rule("aten::inner")
def inner(ctx: Ctx):
    a, b = ctx.tensor(0), ctx.tensor(1)
    dtype = result_type([a.dtype, b.dtype]) if a.dtype and b.dtype else None
    if a.shape is None or b.shape is None:
        return [tt(dtype, None)]
    if not a.shape or not b.shape:
        return [tt(dtype, tuple(a.shape) + tuple(b.shape))]
    return [tt(dtype, tuple(a.shape[:-1]) + tuple(b.shape[:-1]))]


@rule("aten::linalg_householder_product", "aten::ormqr")
def householder(ctx: Ctx):
    """``linalg_householder_product(A, tau)``: A's shape; ``ormqr(A, tau, C, ...)``: C's shape."""
    t = ctx.tensor(2 if ctx.op.startswith("aten::ormqr") else 0)
    return [tt(_float(ctx, t), t.shape)]
