"""Reductions: sum, mean, prod, amax/amin, max/min (+indices), argmax/argmin, norms, std/var,
cumsum/cumprod, median, all/any, logsumexp, topk, sort.

``dim`` arguments follow torch: ``None`` or ``[]`` reduces every dimension (for
sum/mean/amax/amin/std/var); negative dims count from the end. Integer and
bool sums and products accumulate in int64, as in torch.
"""
from __future__ import annotations

import math

import numpy as np

from srcore.plugin import KernelError, NodeInfo, Specialized, TensorType

from .index import _along
from .promotion import DEFAULT_FLOAT, INT64, as_array, dtype_of_code, float_type


def _axis(dim, x=None):
    """numpy's ``axis`` for a torch ``dim``; a 0-d ``x`` takes dim 0/-1 as "everything", as torch does."""
    if dim is None:
        return None
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    if x is not None and x.ndim == 0:
        bad = [d for d in dims if d not in (0, -1)]
        if bad:
            raise KernelError(f"Dimension out of range (expected to be in range of [-1, 0], but got {bad[0]})")
        return None
    if isinstance(dim, int):
        return dim
    return dims if dims else None


def _int_acc(x, dtype):
    d = dtype_of_code(dtype)
    if d is None and x.dtype.kind in "biu":
        return INT64
    return d


def _reduce_acc(x, dtype):
    """``_int_acc`` for ``ufunc.reduce``, whose own accumulator for bool and signed ints is already
    int64 (np.int_ here): asking for it takes the casting path, ~3x the call on a small tensor."""
    if dtype is None and x.dtype.kind in "bi" and _NATIVE_INT64:
        return None
    return _int_acc(x, dtype)


_NATIVE_INT64 = np.dtype(np.int_) == INT64


def _reduce(fn, x, axis, keepdim, out, **kw):
    # ``fn`` is a ufunc's reduce where there is one (np.add.reduce, not np.sum): numpy's np.sum /
    # np.max wrappers add ~3 us of Python per call, as much as the reduction of a small tensor
    r = fn(x, axis=axis, keepdims=keepdim, out=out, **kw)
    return out if out is not None else as_array(r)


def sum(self, dim=None, keepdim=False, *, dtype=None, out=None):
    """``aten::sum`` / ``sum.dim_IntList``."""
    return _reduce(np.add.reduce, self, _axis(dim, self), keepdim, out, dtype=_reduce_acc(self, dtype))


def mean(self, dim=None, keepdim=False, *, dtype=None, out=None):
    """``aten::mean`` / ``mean.dim`` (floating inputs, or a floating ``dtype``)."""
    if dtype is None and self.dtype.kind not in "fc":
        raise KernelError(f"mean(): could not infer output dtype. Input dtype must be either a floating point "
                          f"or complex dtype. Got: {self.dtype}")
    axis = _axis(dim, self)
    if dtype is None and self.dtype in _MEAN_DIRECT and (out is None or out.dtype == self.dtype):
        # numpy's own arithmetic (np.mean: a sum in the input's dtype, then a division by the count)
        # without its ~4 us of Python: a third of a small mean's call
        r = np.add.reduce(self, axis=axis, keepdims=keepdim, out=out)
        if axis is None:
            count = self.size
        else:
            count = 1
            for a in ((axis,) if isinstance(axis, int) else axis):
                count *= self.shape[a]
        if isinstance(r, np.ndarray):
            return np.true_divide(r, count, out=r)
        return as_array(np.true_divide(r, count))
    return _reduce(np.mean, self, axis, keepdim, out, dtype=dtype_of_code(dtype))


_MEAN_DIRECT = frozenset((np.dtype(np.float32), np.dtype(np.float64)))


def prod(self, dim=None, keepdim=False, *, dtype=None, out=None):
    """``aten::prod`` / ``prod.dim_int``."""
    return _reduce(np.multiply.reduce, self, _axis(dim, self), keepdim, out, dtype=_reduce_acc(self, dtype))


def amax(self, dim=(), keepdim=False, *, out=None):
    return _reduce(np.maximum.reduce, self, _axis(dim, self), keepdim, out)


def amin(self, dim=(), keepdim=False, *, out=None):
    return _reduce(np.minimum.reduce, self, _axis(dim, self), keepdim, out)


def all(self, dim=None, keepdim=False, *, out=None):
    """``aten::all`` / ``all.dim`` / ``all.dims``: a bool tensor."""
    return _reduce(np.all, self, _axis(dim, self), keepdim, out)


def any(self, dim=None, keepdim=False, *, out=None):
    return _reduce(np.any, self, _axis(dim, self), keepdim, out)


def _arg(fn, x, dim, keepdim, out):
    if dim is None:
        r = fn(x.reshape(-1))
        r = np.asarray(r, dtype=np.int64)
        if keepdim:
            r = r.reshape((1,) * x.ndim)
        if out is not None:
            np.copyto(out, r)
            return out
        return r
    if x.ndim == 0:
        r = np.zeros((), np.int64)
    else:
        # the ndarray method (C), not np.argmax's Python wrapper (~1 us of a small max.dim)
        r = (x.argmax if fn is np.argmax else x.argmin if fn is np.argmin else
             lambda **kw: fn(x, **kw))(axis=dim, keepdims=keepdim)
    if out is not None:
        np.copyto(out, r)
        return out
    return as_array(r, np.int64).astype(np.int64, copy=False)


def argmax(self, dim=None, keepdim=False, *, out=None):
    """``aten::argmax``: first index of the maximum (NaN counts as the maximum)."""
    return _arg(np.argmax, self, dim, keepdim, out)


def argmin(self, dim=None, keepdim=False, *, out=None):
    return _arg(np.argmin, self, dim, keepdim, out)


def _max_min(vfn, ifn, self, dim, keepdim, out):
    if dim is None:  # aten::max(Tensor self) -> Tensor
        return _reduce(vfn, self, None, False, out)
    values, indices = (None, None) if out is None else out
    values = _reduce(vfn, self, _axis(dim, self), keepdim, values)
    indices = _arg(ifn, self, dim, keepdim, indices)
    return values, indices


def max(self, dim=None, keepdim=False, *, out=None):
    """``aten::max`` (all -> Tensor) / ``max.dim`` (-> (values, indices))."""
    return _max_min(np.maximum.reduce, np.argmax, self, dim, keepdim, out)


def min(self, dim=None, keepdim=False, *, out=None):
    return _max_min(np.minimum.reduce, np.argmin, self, dim, keepdim, out)


def linalg_vector_norm(self, ord=2, dim=None, keepdim=False, *, dtype=None, out=None):
    """``aten::linalg_vector_norm``: ``sum(|x|^ord)^(1/ord)``; inf/-inf/0 as in torch."""
    x = self if dtype is None else self.astype(dtype_of_code(dtype))
    axis = _axis(dim, x)
    a = np.abs(x, out=np.empty(x.shape, x.dtype))  # an array even for 0-d x (the ufunc would give a scalar)
    if ord == float("inf"):
        return _reduce(np.maximum.reduce, a, axis, keepdim, out)
    if ord == float("-inf"):
        return _reduce(np.minimum.reduce, a, axis, keepdim, out)
    if ord == 0:
        return _reduce(np.add.reduce, a != 0, axis, keepdim, out, dtype=a.dtype)
    if ord == 1:
        return _reduce(np.add.reduce, a, axis, keepdim, out)
    if ord == 2:
        r = _reduce(np.add.reduce, np.square(a, out=a), axis, keepdim, out)
        return as_array(np.sqrt(r, out=r))
    r = _reduce(np.add.reduce, np.power(a, ord, out=a), axis, keepdim, out)
    return as_array(np.power(r, 1.0 / ord, out=r))


def norm(self, p=2, dim=None, keepdim=False, *, dtype=None, out=None):
    """``aten::norm.Scalar`` / ``norm.ScalarOpt_dim`` (``p=None`` is 2) / the ``*_dtype`` forms."""
    return linalg_vector_norm(self, 2 if p is None else p, dim, keepdim, dtype=dtype, out=out)


def _var_direct(x, axis, keepdim, ddof, out, root):
    """np.var's two passes (sum, divide by the count, subtract, square, sum, divide by ``count - ddof``
    clipped at 0) through the ufuncs, without np.var's ~6 us of Python wrapping (half a small std's
    call). The counts are Python numbers, so float32 divides in float32 (np.var divides by an
    np.intp, in float64, then rounds: results may differ from it in the last bit; both are within
    torch's tolerance). None where np.var must decide (non-float dtypes, empty or 0-d tensors)."""
    if x.dtype not in _MEAN_DIRECT or x.size == 0 or x.ndim == 0:
        return None
    if axis is None:
        count = x.size
    else:
        count = 1
        for a in ((axis,) if isinstance(axis, int) else axis):
            count *= x.shape[a]
    m = np.add.reduce(x, axis=axis, keepdims=True)
    np.true_divide(m, count, out=m)
    d = np.subtract(x, m)
    np.multiply(d, d, out=d)
    r = np.add.reduce(d, axis=axis, keepdims=keepdim, out=out)
    if not isinstance(r, np.ndarray):   # a full reduction gives a numpy scalar: a 0-d array to divide in place
        r = np.array(r)
    dof = count - ddof
    if dof > 0:
        np.true_divide(r, dof, out=r)
    else:   # torch and numpy: x / 0 (inf, or NaN for a zero sum)
        with np.errstate(divide="ignore", invalid="ignore"):
            np.true_divide(r, 0, out=r)
    if root:
        np.sqrt(r, out=r)
    return r


def var(self, dim=None, unbiased=True, keepdim=False, *, correction=None, out=None):
    """``aten::var`` / ``var.dim`` / ``var.correction`` (``correction`` None -> 1)."""
    if isinstance(dim, bool):  # aten::var(Tensor self, bool unbiased=True)
        dim, unbiased = None, dim
    ddof = (1 if unbiased else 0) if correction is None else correction
    axis = _axis(dim, self)
    r = _var_direct(self, axis, keepdim, ddof, out, False)
    return r if r is not None else _reduce(np.var, self, axis, keepdim, out, ddof=ddof)


def std(self, dim=None, unbiased=True, keepdim=False, *, correction=None, out=None):
    """``aten::std`` / ``std.dim`` / ``std.correction``."""
    if isinstance(dim, bool):
        dim, unbiased = None, dim
    ddof = (1 if unbiased else 0) if correction is None else correction
    axis = _axis(dim, self)
    r = _var_direct(self, axis, keepdim, ddof, out, True)
    return r if r is not None else _reduce(np.std, self, axis, keepdim, out, ddof=ddof)


def _cumulative(ufunc_acc, self, dim, dtype, out):
    if self.ndim == 0:
        _axis(dim, self)  # torch accepts only dim 0/-1 on a 0-d tensor
        r = self.astype(_int_acc(self, dtype) or self.dtype)
        if out is None:
            return r
        np.copyto(out, r)
        return out
    r = ufunc_acc(self, axis=dim, dtype=_int_acc(self, dtype), out=out)
    return out if out is not None else r


def cumsum(self, dim, *, dtype=None, out=None):
    """``aten::cumsum``: int and bool accumulate in int64 (``dtype`` overrides)."""
    return _cumulative(np.cumsum, self, dim, dtype, out)


def cumprod(self, dim, *, dtype=None, out=None):
    """``aten::cumprod``: int and bool accumulate in int64 (``dtype`` overrides), as ``cumsum``."""
    return _cumulative(np.cumprod, self, dim, dtype, out)


def _median_position(x, axis):
    """Per slice along ``axis``: the index of torch's median element.

    torch takes the lower median, the ``(n - 1) // 2``-th smallest, with ties broken by position
    (a stable order); a slice holding NaN gives its first NaN.
    """
    n = x.shape[axis]
    pos = np.take(np.argsort(x, axis=axis, kind="stable"), [(n - 1) // 2], axis=axis)
    if x.dtype.kind == "f":
        nan = np.isnan(x)
        has = np.any(nan, axis=axis, keepdims=True)
        if has.any():
            pos = np.where(has, np.argmax(nan, axis=axis, keepdims=True), pos)
    return pos


def median(self, dim=None, keepdim=False, *, out=None):
    """``aten::median`` (all elements -> 0-d) / ``median.dim`` (-> (values, indices)).

    The lower median (no averaging of the two middle values); NaN if the slice has one, with
    the index of its first NaN; equal values: the one that comes first in a stable sort.
    """
    if self.dtype.kind == "b":
        raise KernelError('"median_cpu" not implemented for \'Bool\'')
    if dim is None:
        flat = self.reshape(-1)
        if flat.size == 0:  # torch: NaN, or NaN cast to the integer type
            r = np.array(np.nan if self.dtype.kind == "f" else np.iinfo(self.dtype).min, self.dtype)
        else:
            r = flat[_median_position(flat, 0)[0]]
        r = np.asarray(r, self.dtype).reshape(())
        if out is None:
            return r
        np.copyto(out, r)
        return out
    if self.ndim == 0:
        _axis(dim, self)
        values, indices = self.copy(), np.zeros((), np.int64)
    else:
        d = dim % self.ndim if -self.ndim <= dim < self.ndim else None
        if d is None:
            raise KernelError(f"Dimension out of range (expected to be in range of [{-self.ndim}, "
                              f"{self.ndim - 1}], but got {dim})")
        if self.shape[d] == 0:
            raise KernelError(f"median(): Expected reduction dim {d} to have non-zero size.")
        indices = _median_position(self, d)
        values = np.take_along_axis(self, indices, axis=d)
        if not keepdim:
            indices, values = np.squeeze(indices, d), np.squeeze(values, d)
        indices = indices.astype(np.int64, copy=False)
    if out is None:
        return values, indices
    np.copyto(out[0], values)
    np.copyto(out[1], indices)
    return out


def logsumexp(self, dim, keepdim=False, *, out=None):
    """``aten::logsumexp`` (ints -> float32) as ATen computes it: ``log(sum(exp(x - m))) + m`` with
    ``m`` the max, taken as 0 where infinite (all ``-inf`` gives ``-inf``, a ``+inf`` gives ``inf``).
    numpy, not ``scipy.special.logsumexp``: scipy's array-API version costs ~225 us on a (2, 9, 20)
    tensor, this ~11 us."""
    x = self if self.dtype.kind == "f" else self.astype(DEFAULT_FLOAT)
    axis = _axis(dim, x)
    if x.size and x.ndim:
        r = _logsumexp_finite(x, axis, keepdim)
        if r is not None:
            if out is None:
                return r
            np.copyto(out, r)
            return out
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if x.size == 0:        # an empty reduction: log(0) = -inf, as torch
            r = np.log(np.sum(np.exp(x), axis=axis, keepdims=keepdim))
        else:
            # the ufuncs' reduce, not np.amax / np.sum (~3 us of Python wrapping each), and the
            # result's shape from the kept-dims one instead of a second reduction
            if x.ndim == 0:   # (a 0-d reduction gives numpy scalars: one element along axis 0)
                x, axis, keepdim = x.reshape(1), 0, False
            m = np.maximum.reduce(x, axis=axis, keepdims=True)
            m[np.isinf(m)] = 0
            e = np.subtract(x, m)
            np.exp(e, out=e)
            r = np.add.reduce(e, axis=axis, keepdims=True)
            np.log(r, out=r)
            np.add(r, m, out=r)
            if not keepdim:
                axes = range(x.ndim) if axis is None else (axis,) if isinstance(axis, int) else axis
                r = r.reshape(tuple(n for i, n in enumerate(r.shape) if i not in {a % x.ndim for a in axes}))
    r = as_array(r, x.dtype).astype(float_type(x.dtype), copy=False)
    if out is None:
        return r
    np.copyto(out, r)
    return out


def _logsumexp_finite(x, axis, keepdim):
    """:func:`logsumexp` of a float tensor whose maxima along ``axis`` are all finite, without the
    ``np.errstate`` block (~2 us of a small call) and the infinite-max fix (~1 us): then ``x - m <= 0``
    (or NaN), the sum of the exps is at least 1 (or NaN) and nothing can warn. None when a max is
    not finite (a ``+inf``, a row of ``-inf``, NaN): the general path."""
    if axis is None or (not keepdim and (1 if isinstance(axis, int) else len(axis)) >= x.ndim):
        return None   # (a full reduction's numpy scalar: the general path)
    m = np.maximum.reduce(x, axis=axis, keepdims=True)
    if not np.logical_and.reduce(np.isfinite(m), axis=None):   # (a sum of the maxima could warn: inf - inf)
        return None
    e = np.subtract(x, m)
    np.exp(e, out=e)
    r = np.add.reduce(e, axis=axis, keepdims=keepdim)
    np.log(r, out=r)
    np.add(r, m.reshape(r.shape), out=r)
    return r


def _sorted_indices(x, axis, descending, stable=True):
    if not descending:
        return np.argsort(x, axis=axis, kind="stable" if stable else None)
    # stable descending: sort the reversed array ascending, reverse, map positions back (reversed
    # by a slice: np.flip's Python is ~1 us of a small sort)
    n = x.shape[axis]
    rev = (slice(None),) * (axis % x.ndim) + (slice(None, None, -1),)
    i = np.argsort(x[rev], axis=axis, kind="stable")
    return (n - 1) - i[rev]


def sort(self, dim=-1, descending=False, *, stable=None, out=None):
    """``aten::sort`` / ``sort.stable``: (values, indices); NaN sorts as the largest."""
    if self.ndim == 0:
        values, indices = self.copy(), np.zeros((), np.int64)
    else:
        indices = _sorted_indices(self, dim, descending)
        # (the index's cached positions: np.take_along_axis builds them in Python every call)
        values = self[_along(indices, dim % self.ndim)]
    if out is None:
        return values, indices
    np.copyto(out[0], values)
    np.copyto(out[1], indices)
    return out


#: topk selects with a partition (O(n)) and sorts only the k chosen when k is at most this share of
#: the dim; a full stable sort of a 4000-wide row costs ~20x the selection (sampling's top-50 of a vocab)
TOPK_PARTIAL_SHARE = 0.25


def _topk_partial(x, k, dim, largest):
    """The indices of ``topk`` by selection, in the full stable sort's order (value, then lower index
    first among equal values), or None where the full sort is as cheap (large ``k``), where NaN is in
    ``x`` (it sorts as the largest; comparisons cannot select it) or where values equal to the k-th
    reach past it (the selection would pick among the ties arbitrarily)."""
    n = x.shape[dim]
    if not 0 < k <= n * TOPK_PARTIAL_SHARE or x.dtype.kind not in "fiu":
        return None
    if x.dtype.kind == "f" and np.isnan(x).any():
        return None
    rows = np.moveaxis(x, dim, -1).reshape(-1, n)
    pos = n - k if largest else k - 1
    part = np.argpartition(rows, pos, axis=-1)
    cols = part[:, n - k:] if largest else part[:, :k]
    kth = np.take_along_axis(rows, part[:, pos, None], axis=-1)
    if ((rows >= kth) if largest else (rows <= kth)).sum(-1).max() != k:
        return None
    cols = np.sort(cols, axis=-1)                          # index order, so the stable sort breaks ties
    vals = np.take_along_axis(rows, cols, axis=-1)
    order = _sorted_indices(vals, -1, largest)
    idx = np.take_along_axis(cols, order, axis=-1).astype(np.int64, copy=False)
    lead = np.moveaxis(x, dim, -1).shape[:-1]
    return np.moveaxis(idx.reshape(lead + (k,)), -1, dim)


def topk(self, k, dim=-1, largest=True, sorted=True, *, out=None):
    """``aten::topk``: the ``k`` largest (or smallest) along ``dim``, in sorted order."""
    if self.ndim == 0:
        return sort(self, out=out)
    idx = _topk_partial(self, k, dim, largest)
    if idx is None:
        idx = _sorted_indices(self, dim, largest)
        idx = np.take(idx, np.arange(k), axis=dim)
    values = np.take_along_axis(self, idx, axis=dim)
    if out is None:
        return values, idx
    np.copyto(out[0], values)
    np.copyto(out[1], idx)
    return out


# --- the compiled topk (``jit_topk.py``, numba) ----------------------------------------------------

#: rows shorter than this keep the numpy kernel (selection saves little on a short row) ...
TOPK_JIT_MIN_ROW = 256
#: ... unless the whole tensor has at most this many elements: there the numpy kernel's ~10 calls
#: are the cost (a point net's kNN, 16 rows of 32, k=4: 51 us numpy, 12 compiled; 8 rows of 200,
#: k=100: 37 / 28; 1000 rows of 32, k=4: 309 / 915, so many short rows stay numpy's)
TOPK_JIT_MAX_SMALL = 4096
_TOPK_JIT_DTYPES = ("float32", "float64", "int32", "int64")


def topk_matcher(node: NodeInfo):
    """``aten::topk`` with a constant ``k``, ``dim`` and ``largest`` on a float or int32/64 tensor whose
    row length (along ``dim``) is unknown or at least :data:`TOPK_JIT_MIN_ROW`, or of at most
    :data:`TOPK_JIT_MAX_SMALL` elements: the compiled
    heap selection (compiled now); None otherwise (the numpy kernel)."""
    src = node.args[0].type if node.args else None
    if not (isinstance(src, TensorType) and src.dtype in _TOPK_JIT_DTYPES and src.shape is not None
            and node.is_const("k") and node.is_const("dim") and node.is_const("largest")):   # (``all`` is aten::all here)
        return None
    nd = len(src.shape)
    dim = node.const("dim")
    if nd == 0 or not -nd <= dim < nd:
        return None
    n = src.shape[dim]
    k = int(node.const("k"))
    # (a loop: ``all`` and ``any`` here are this module's aten::all / aten::any kernels)
    static = True
    for d in src.shape:
        static = static and isinstance(d, int)
    small = static and math.prod(src.shape) <= TOPK_JIT_MAX_SMALL
    if isinstance(n, int) and (n < TOPK_JIT_MIN_ROW and not small or not 0 < k <= n):
        return None
    from .jit_topk import topk_rows

    kernel = topk_rows(src.dtype)
    largest = bool(node.const("largest"))
    dim %= nd

    want = np.dtype(src.dtype)

    def topk_jit(self, sorted=True, out=None):
        if self.dtype != want or self.ndim != nd or not 0 < k <= self.shape[dim]:
            return topk(self, k, dim, largest, sorted, out=out)
        n = self.shape[dim]
        last = dim == nd - 1
        rows = (self if last else np.moveaxis(self, dim, -1)).reshape(-1, n)
        if not rows.flags.c_contiguous:
            rows = np.ascontiguousarray(rows)
        lead = self.shape[:dim] + self.shape[dim + 1:]
        if out is None or not last or not (out[0].flags.c_contiguous and out[1].flags.c_contiguous):
            vals = np.empty((rows.shape[0], k), self.dtype)
            idx = np.empty((rows.shape[0], k), np.int64)
        else:   # straight into the outs
            kernel(rows, k, largest, out[0].reshape(-1, k), out[1].reshape(-1, k))
            return out
        kernel(rows, k, largest, vals, idx)
        vals, idx = vals.reshape(lead + (k,)), idx.reshape(lead + (k,))
        if not last:
            vals, idx = np.moveaxis(vals, -1, dim), np.moveaxis(idx, -1, dim)
        if out is None:
            return vals, idx
        np.copyto(out[0], vals)
        np.copyto(out[1], idx)
        return out
    return Specialized(topk_jit, args=(0, 4))
