"""Reductions over constant dims: mean, sum, prod, amax, amin, var, std, logsumexp; softmax,
log_softmax and cumsum along one dim."""
from __future__ import annotations

from .pointwise import exp
from .table import (DEFERRED_SOFTMAX, EngineBuildError, arg_shape, divide, f32, i64, nan_checks, norm_dim, out, rank,
                    rank_of, register)


def _dims_arg(n, name: str = "dim"):
    d = n.const(name, None)
    if d is None:
        return None
    return [d] if isinstance(d, int) else list(d)


def _dims_ok(n, name: str = "dim") -> bool:
    r = rank_of(n, 0)
    d = _dims_arg(n, name)
    if r is None or n.const("dtype", None) is not None:
        return False
    if d is None:
        return True
    try:
        ds = [norm_dim(int(v), r) for v in d]
    except (EngineBuildError, TypeError, ValueError):
        return False
    return len(set(ds)) == len(ds)


def _axes(c, x, name: str = "dim") -> list[int]:
    r = rank(x)
    d = c.const(name, None)
    if d is None:
        return list(range(r))
    d = [d] if isinstance(d, int) else list(d)
    return list(range(r)) if not d else sorted(norm_dim(int(v), r) for v in d)


def _reduce(fn):
    def convert(c):
        o, x = c.o, c.x("self")
        axes = _axes(c, x)
        if not axes:   # a 0-d tensor
            return x
        return out(getattr(o, fn)(x, i64(o, axes), bool(c.const("keepdim", False))))
    return convert


register("aten::mean.dim", consts=("dim", "keepdim", "dtype"), check=_dims_ok)(_reduce("reduce_mean"))
register("aten::sum.dim_IntList", consts=("dim", "keepdim", "dtype"), check=_dims_ok)(_reduce("reduce_sum"))


@register("aten::mean", consts=("dtype",), check=lambda n: n.const("dtype", None) is None and rank_of(n, 0) is not None)
def _mean_all(c):
    o, x = c.o, c.x("self")
    return out(o.reduce_mean(x, i64(o, list(range(rank(x)))), False)) if rank(x) else x


@register("aten::sum", consts=("dtype",), check=lambda n: n.const("dtype", None) is None and rank_of(n, 0) is not None)
def _sum_all(c):
    o, x = c.o, c.x("self")
    return out(o.reduce_sum(x, i64(o, list(range(rank(x)))), False)) if rank(x) else x


@register("aten::prod.dim_int", consts=("dim", "keepdim", "dtype"), check=_dims_ok)
def _prod(c):
    o, x = c.o, c.x("self")
    if rank(x) == 0:
        return x
    return out(o.reduce_prod(x, i64(o, [norm_dim(c.const("dim"), rank(x))]), bool(c.const("keepdim", False))))


def _nan_kept(o, x, axes, keep, y):
    """``y`` (a max or min over ``axes``) with NaN where the reduced slice has a NaN, as torch."""
    if not nan_checks():
        return y
    has_nan = out(o.reduce_logical_or(out(o.is_nan(x)), i64(o, axes), keep))
    return out(o.select(has_nan, f32(o, float("nan")), y))


def _extreme(fn):
    def convert(c):
        o, x = c.o, c.x("self")
        axes = _axes(c, x)
        if not axes:
            return x
        keep = bool(c.const("keepdim", False))
        return _nan_kept(o, x, axes, keep, out(getattr(o, fn)(x, i64(o, axes), keep)))
    return convert


def _nonempty_ok(n) -> bool:
    """amax/amin of an empty slice is an error in torch: the reduced dims must be static and non-zero."""
    if not _dims_ok(n):
        return False
    shape = arg_shape(n, 0)
    d = _dims_arg(n)
    axes = range(len(shape)) if not d else [norm_dim(int(v), len(shape)) for v in d]
    return all(isinstance(shape[a], int) and shape[a] > 0 for a in axes)


register("aten::amax", consts=("dim", "keepdim"), check=_nonempty_ok)(_extreme("reduce_max"))
register("aten::amin", consts=("dim", "keepdim"), check=_nonempty_ok)(_extreme("reduce_min"))


def _count(c, x, axes) -> int:
    shape = x.get_partial_shape()
    n = 1
    for a in axes:
        if shape[a].is_dynamic:
            c.fail("var/std over a dynamic dim")
        n *= shape[a].get_length()
    return n


def _static_reduced_ok(n) -> bool:
    if not _dims_ok(n):
        return False
    shape = arg_shape(n, 0)
    d = _dims_arg(n)
    axes = range(len(shape)) if not d else [norm_dim(int(v), len(shape)) for v in d]
    return all(isinstance(shape[a], int) for a in axes)


def _correction(c) -> float:
    if "correction" in c.names:
        v = c.const("correction", None)
        return 1.0 if v is None else float(v)
    return 1.0 if c.const("unbiased", True) else 0.0


def _var(c):
    o, x = c.o, c.x("self")
    axes = _axes(c, x)
    keep = bool(c.const("keepdim", False))
    n = _count(c, x, axes)
    mean = out(o.reduce_mean(x, i64(o, axes), True))
    d = out(o.subtract(x, mean))
    ss = out(o.reduce_sum(out(o.multiply(d, d)), i64(o, axes), keep))
    denom = max(n - _correction(c), 0.0)
    # torch: a non-positive denominator gives inf (or NaN for 0/0)
    return divide(o, ss, f32(o, denom))


register("aten::var.dim", consts=("dim", "unbiased", "keepdim"), check=_static_reduced_ok)(_var)
register("aten::var.correction", consts=("dim", "correction", "keepdim"), check=_static_reduced_ok)(_var)
register("aten::std.dim", consts=("dim", "unbiased", "keepdim"), check=_static_reduced_ok)(
    lambda c: out(c.o.sqrt(_var(c))))
register("aten::std.correction", consts=("dim", "correction", "keepdim"), check=_static_reduced_ok)(
    lambda c: out(c.o.sqrt(_var(c))))


@register("aten::logsumexp", consts=("dim", "keepdim"), check=_dims_ok)
def _logsumexp(c):
    """max + log(sum(exp(x - max))), the max taken as 0 where it is infinite (torch's way)."""
    o, x = c.o, c.x("self")
    axes = _axes(c, x)
    if not axes:
        return x
    keep = bool(c.const("keepdim", False))
    m = out(o.reduce_max(x, i64(o, axes), True))
    m = out(o.select(out(o.is_inf(m)), f32(o, 0.0), m))
    s = out(o.log(out(o.reduce_sum(exp(o, out(o.subtract(x, m))), i64(o, axes), keep))))
    return out(o.add(s, m if keep else out(o.squeeze(m, i64(o, axes)))))


def _dim1_ok(n) -> bool:
    r = rank_of(n, 0)
    d = n.const("dim", None)
    if r is None or not isinstance(d, int) or n.const("dtype", None) is not None:
        return False
    return -max(r, 1) <= d < max(r, 1)


def _along(fn):
    def convert(c):
        o, x = c.o, c.x("self")
        r = rank(x)
        if r == 0:
            x1 = out(o.unsqueeze(x, i64(o, 0)))
            return out(o.squeeze(fn(o, x1, 0), i64(o, [0])))
        return fn(o, x, norm_dim(c.const("dim"), r))
    return convert


def _nan_rows(o, x, d, y):
    """``y`` (a softmax along ``d``) with NaN along every slice torch makes NaN: one holding a NaN
    or +inf (x - max is NaN there), or all -inf (max is -inf). OpenVINO gives 0 or -inf."""
    if not nan_checks():
        return y
    ax = i64(o, [d])
    bad = out(o.logical_or(out(o.is_nan(x)), out(o.is_inf(x, {"detect_negative": False}))))
    bad = out(o.reduce_logical_or(bad, ax, True))
    all_neg_inf = out(o.reduce_logical_and(out(o.is_inf(x, {"detect_positive": False})), ax, True))
    return out(o.select(out(o.logical_or(bad, all_neg_inf)), f32(o, float("nan")), y))


def _feeds_only_matmuls(node, d: int, r: int) -> bool:
    """The softmax (along the last dim) is read only as the left operand of matmuls inside the
    segment: ``softmax(scores) @ v``, the attention pattern OpenVINO fuses into one kernel."""
    v = node.outputs[0]
    graph = node.graph
    if d != r - 1 or not v.uses or any(v is o for o in getattr(graph, "outputs", ())):
        return False
    return all(u.user.kind in ("aten::matmul", "aten::bmm") and u.offset == 0 for u in v.uses)


@register("aten::softmax.int", consts=("dim", "dtype"), check=_dim1_ok)
def _softmax(c):
    """Softmax with torch's NaN rows. The row check reads the scores a second time, which keeps
    OpenVINO from fusing ``softmax(q @ k^T) @ v`` into its attention kernel; that kernel gives
    torch's NaN rows by itself (a row holding NaN or +inf, or all -inf, comes out NaN through the
    matmul). So a softmax read only by matmuls is left unchecked while a deferral is open
    (:data:`DEFERRED_SOFTMAX`); the engine keeps that model only if OpenVINO fused every such
    softmax, and otherwise builds it again with the checks."""
    deferred = DEFERRED_SOFTMAX.get()

    def fn(o, x, d):
        y = out(o.softmax(x, d))
        if deferred is not None and nan_checks() and _feeds_only_matmuls(c.node, d, rank(x)):
            deferred.append(c.where())
            return y
        return _nan_rows(o, x, d, y)
    return _along(fn)(c)
register("aten::log_softmax.int", consts=("dim", "dtype"), check=_dim1_ok)(
    _along(lambda o, x, d: _nan_rows(o, x, d, out(o.log_softmax(x, d)))))
register("aten::cumsum", consts=("dim", "dtype"), check=_dim1_ok)(
    _along(lambda o, x, d: out(o.cumsum(x, i64(o, d)))))
