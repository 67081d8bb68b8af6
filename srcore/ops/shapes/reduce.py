"""Reductions (sum/mean/prod/amax/any/var/norm/logsumexp), max/min in all their overloads,
argmax, topk, sort, cumsum/cumprod, median."""
from __future__ import annotations

from ...ir.types import ListType
from .base import A, Ctx, UNKNOWN, dtype_code, rule, tt
from .dtypes import DEFAULT_FLOAT, category, is_integral


def reduce_shape(ctx: Ctx, shape, dims, keepdim):
    """Remove (or keep as 1) the reduced dims; ``dims`` None/[] = all dims."""
    if shape is None:
        return None
    if keepdim is UNKNOWN:
        return None
    if dims is UNKNOWN:
        return (None,) * len(shape) if keepdim else None
    if isinstance(dims, int) and not isinstance(dims, bool):
        dims = [dims]
    if not dims:
        return tuple(1 for _ in shape) if keepdim else ()
    if any(d is None or isinstance(d, str) for d in dims):
        return (None,) * len(shape) if keepdim else None
    nd = {ctx.norm_dim(d, len(shape)) for d in dims}
    if keepdim:
        return tuple(1 if i in nd else s for i, s in enumerate(shape))
    return tuple(s for i, s in enumerate(shape) if i not in nd)


def _dims_arg(ctx: Ctx, pos, name="dim"):
    a = ctx.arg(pos, name)
    if a is None or a.known is None:
        return None
    if a.elems is not None:
        return [e.known if e.is_known else None for e in a.elems]
    return a.known


def _dtype_arg(ctx: Ctx, pos):
    code = ctx.known(pos, "dtype", None)
    return None if code is None else (dtype_code(code) if code is not UNKNOWN else UNKNOWN)


def _sum_dtype(d, op):
    if op in ("sum", "prod", "cumsum", "cumprod", "nansum") and is_integral(d):
        return "int64"
    return d


@rule("aten::sum", "aten::mean", "aten::prod", "aten::nansum", "aten::nanmean", "quantized::mean_channels_last",
      "quantized::mean_qnnpack")
def reduction(ctx: Ctx):
    """``op(x, dtype)`` -> 0-d; ``op(x, dim, keepdim, dtype)`` (prod: one int dim); sum of a list."""
    if ctx.args and not ctx.is_tensor(0):  # sum.int(int[] self) -> int
        a = ctx.args[0]
        vals = [e.known for e in a.elems] if a.elems is not None else a.known
        out = ctx.node.outputs[0].type if ctx.node.outputs else None
        if isinstance(vals, (list, tuple)) and all(isinstance(v, (int, float)) for v in vals):
            return [A(out, sum(vals))]
        return [A(out)]
    x = ctx.tensor(0)
    op = ctx.op.split("::")[1].split(".")[0]
    full = len(ctx.args) <= 2 and not (len(ctx.args) == 2 and (isinstance(ctx.args[1].type, ListType)
                                                               or ctx.names and "dim" in ctx.names))
    if ctx.names is not None:
        full = "dim" not in ctx.names
    if full:
        dt = _dtype_arg(ctx, 1)
        dtype = _sum_dtype(x.dtype, op) if dt is None else (None if dt is UNKNOWN else dt)
        return [tt(dtype, ())]
    dt = _dtype_arg(ctx, 3)
    dtype = _sum_dtype(x.dtype, op) if dt is None else (None if dt is UNKNOWN else dt)
    return [tt(dtype, reduce_shape(ctx, x.shape, _dims_arg(ctx, 1), ctx.known(2, "keepdim", False)))]


@rule("aten::amax", "aten::amin", "aten::logsumexp", "aten::aminmax_same")
def amax(ctx: Ctx):
    x = ctx.tensor(0)
    dtype = x.dtype
    if ctx.op.startswith("aten::logsumexp") and is_integral(dtype):
        dtype = DEFAULT_FLOAT
    dims = _dims_arg(ctx, 1)
    return [tt(dtype, reduce_shape(ctx, x.shape, [] if dims is None else dims, ctx.known(2, "keepdim", False)))]


@rule("aten::any", "aten::all")
def any_all(ctx: Ctx):
    if not ctx.is_tensor(0):  # any.bool / all.int ...: on a list of scalars
        from ...ir.types import BOOL
        a = ctx.args[0]
        vals = [e.known for e in a.elems] if a.elems is not None else a.known
        if isinstance(vals, (list, tuple)) and UNKNOWN not in vals:
            return [A(BOOL, (any if ctx.op.startswith("aten::any") else all)(vals))]
        return [A(BOOL)]
    x = ctx.tensor(0)
    dtype = "uint8" if x.dtype == "uint8" else "bool"
    if len(ctx.args) == 1:
        return [tt(dtype, ())]
    return [tt(dtype, reduce_shape(ctx, x.shape, _dims_arg(ctx, 1), ctx.known(2, "keepdim", False)))]


@rule("aten::max", "aten::min")
def max_min(ctx: Ctx):
    """max(x) -> 0-d; max(x, other) -> elementwise; max(x, dim, keepdim) -> (values, indices)."""
    if not ctx.is_tensor(0):
        from .scalar import prim_minmax, scalar_binary
        return prim_minmax(ctx) if len(ctx.args) == 1 else scalar_binary(ctx)
    x = ctx.tensor(0)
    if len(ctx.args) == 1:
        return [tt(x.dtype, ())]
    if ctx.is_tensor(1):
        from .elementwise import binary
        return binary(ctx)
    shape = reduce_shape(ctx, x.shape, _dims_arg(ctx, 1), ctx.known(2, "keepdim", False))
    return [tt(x.dtype, shape), tt("int64", shape)][:max(1, len(ctx.node.outputs))]


@rule("aten::argmax", "aten::argmin")
def argmax(ctx: Ctx):
    x = ctx.tensor(0)
    dims = ctx.known(1, "dim", None)
    return [tt("int64", reduce_shape(ctx, x.shape, [] if dims is None else dims, ctx.known(2, "keepdim", False)))]


@rule("aten::var", "aten::std", "quantized::std_channels_last", "aten::norm", "aten::linalg_vector_norm", "aten::frobenius_norm",
      "aten::var_mean", "aten::std_mean", "aten::linalg_norm")
def var(ctx: Ctx):
    x = ctx.tensor(0)
    dtype = DEFAULT_FLOAT if is_integral(x.dtype) else x.dtype
    if category(dtype) == 3:
        dtype = {"complex64": "float32", "complex128": "float64"}.get(dtype)
    op = ctx.op
    dims, keep = [], False
    if ctx.names is not None:
        dims = _dims_arg(ctx, 0, "dim")
        keep = ctx.known(0, "keepdim", False) if "keepdim" in ctx.names else False
    else:
        # positional guess: the first int[] after self is dim, the last bool is keepdim
        for a in ctx.args[1:]:
            if isinstance(a.type, ListType) or (a.elems is not None):
                dims = _dims_arg(ctx, ctx.args.index(a))
                break
        bools = [a.known for a in ctx.args[1:] if isinstance(a.known, bool)]
        keep = bools[-1] if bools and len(ctx.args) > 2 else False
        if "norm" in op:
            p_and_dim = [a for a in ctx.args[1:] if isinstance(a.type, ListType)]
            dims = _dims_arg(ctx, ctx.args.index(p_and_dim[0])) if p_and_dim else []
    shape = reduce_shape(ctx, x.shape, [] if dims is None else dims, keep)
    n = max(1, len(ctx.node.outputs))
    return [tt(dtype, shape)] * n if n == 1 else [tt(dtype, shape), tt(x.dtype, shape)]


@rule("aten::topk")
def topk(ctx: Ctx):
    x = ctx.tensor(0)
    k, d = ctx.known(1, "k"), ctx.known(2, "dim", -1)
    if x.shape is None:
        return [tt(x.dtype, None), tt("int64", None)]
    s = list(x.shape)
    if d is UNKNOWN:
        s = [None] * len(s)
    elif s:
        d = ctx.norm_dim(d, len(s))
        if isinstance(k, int) and isinstance(s[d], int) and not 0 <= k <= s[d]:
            raise ctx.fail(f"selected index k={k} out of range for dimension {d} of size {s[d]}")
        s[d] = k if isinstance(k, int) else (k if isinstance(k, str) else None)
    return [tt(x.dtype, s), tt("int64", s)]


@rule("aten::sort")
def sort(ctx: Ctx):
    x = ctx.tensor(0)
    return [x, tt("int64", x.shape)]


@rule("aten::argsort")
def argsort(ctx: Ctx):
    return [tt("int64", ctx.tensor(0).shape)]


@rule("aten::cumsum", "aten::cumprod", "aten::cummax_values", "aten::logcumsumexp", "aten::_logcumsumexp")
def cumsum(ctx: Ctx):
    x = ctx.tensor(0)
    op = ctx.op.split("::")[1].split(".")[0]
    ctx.norm_dim(ctx.known(1, "dim"), x.rank)
    dt = _dtype_arg(ctx, 2) if len(ctx.args) > 2 else None
    dtype = _sum_dtype(x.dtype, op) if dt is None else (None if dt is UNKNOWN else dt)
    return [tt(dtype, x.shape)]


@rule("aten::cummax", "aten::cummin")
def cummax(ctx: Ctx):
    x = ctx.tensor(0)
    return [x, tt("int64", x.shape)]


@rule("aten::count_nonzero")
def count_nonzero(ctx: Ctx):
    x = ctx.tensor(0)
    dims = _dims_arg(ctx, 1)
    return [tt("int64", reduce_shape(ctx, x.shape, [] if dims is None else dims, False))]


@rule("aten::median", "aten::nanmedian")
def median(ctx: Ctx):
    """``median(x)`` -> 0-d; ``median(x, dim, keepdim)`` (and ``.dim_values``) -> (values, int64 indices)."""
    x = ctx.tensor(0)
    if x.dtype == "bool":
        raise ctx.fail("median is not implemented for bool tensors")
    has_dim = ctx.names is not None and "dim" in ctx.names or ctx.names is None and len(ctx.args) >= 2
    if not has_dim:
        return [tt(x.dtype, ())]
    d = ctx.known(1, "dim")
    if x.shape is not None and isinstance(d, int) and not isinstance(d, bool):
        nd = ctx.norm_dim(d, len(x.shape))
        if x.shape and x.shape[nd] == 0:
            raise ctx.fail(f"median(): expected reduction dim {nd} to have non-zero size")
    shape = reduce_shape(ctx, x.shape, [d] if d is not UNKNOWN else UNKNOWN, ctx.known(2, "keepdim", False))
    return [tt(x.dtype, shape), tt("int64", shape)]
