"""max / min of quantized tensors: the largest (smallest) stored integer is the largest (smallest) value
(the scale is positive), so they select integers and keep the parameters, as torch's QuantizedCPU
(``max.dim`` is torch's integer max: the first index of the extreme value)."""
from __future__ import annotations

import numpy as np

from srcore.plugin import KernelError

from ._common import buffer, ints, require_per_tensor, wrap


def _dims(op: str, ndim: int, dim) -> tuple[int, ...]:
    dims = [dim] if isinstance(dim, int) else list(dim)
    if not dims:
        return tuple(range(ndim))
    for d in dims:
        if not -max(ndim, 1) <= d < max(ndim, 1):
            raise KernelError(f"{op}: dim {d} out of range for a {ndim}-D tensor")
    return tuple(sorted({d % max(ndim, 1) for d in dims}))


def _reduce(op: str, fn, self, dim, keepdim, out):
    x = require_per_tensor(self, op)
    a = ints(x)
    if a.size == 0:
        raise KernelError(f"{op}: cannot reduce an empty tensor (shape {list(a.shape)})")
    axis = _dims(op, a.ndim, dim) if a.ndim else None
    r = np.asarray(fn(a, axis=axis, keepdims=bool(keepdim)))
    res = buffer(out, r.shape, x.qdtype)
    res[...] = r
    return wrap(res, x.qdtype, x.qparams)


def max_out(self, *, out=None):
    """``aten::max`` (every element): a 0-D tensor."""
    return _reduce("aten::max", np.max, self, (), False, out)


def min_out(self, *, out=None):
    return _reduce("aten::min", np.min, self, (), False, out)


def amax_out(self, dim=(), keepdim=False, *, out=None):
    """``aten::amax`` (srcore's rewrite of a ``max.dim`` whose indices are unused; torch has no quantized
    amax, but its ``max.dim`` values are these)."""
    return _reduce("aten::amax", np.max, self, dim, keepdim, out)


def amin_out(self, dim=(), keepdim=False, *, out=None):
    return _reduce("aten::amin", np.min, self, dim, keepdim, out)


def _extreme_dim(op: str, arg, self, dim, keepdim):
    x = require_per_tensor(self, op)
    a = ints(x)
    (d,) = _dims(op, a.ndim, dim) if a.ndim else (0,)
    if a.ndim and a.shape[d] == 0:
        raise KernelError(f"{op}: dim {dim} is empty (shape {list(a.shape)})")
    src = a if a.ndim else a.reshape(1)
    idx = np.expand_dims(arg(src, axis=d), d)          # the first index of the extreme value
    vals = np.take_along_axis(src, idx, axis=d)
    if not keepdim or not a.ndim:
        idx, vals = idx.squeeze(d), vals.squeeze(d)
    return wrap(np.ascontiguousarray(vals), x.qdtype, x.qparams), idx.astype(np.int64)


def max_dim(self, dim, keepdim=False):
    """``aten::max.dim``: (quantized values, int64 indices)."""
    return _extreme_dim("aten::max.dim", np.argmax, self, dim, keepdim)


def min_dim(self, dim, keepdim=False):
    return _extreme_dim("aten::min.dim", np.argmin, self, dim, keepdim)


def sort_stable(self, *, stable=None, dim=-1, descending=False):
    """``aten::sort.stable`` with ``stable=True`` (the matcher takes no other node): torch sorts the
    stored integers (a monotone image of the values, per tensor) with a stable sort, equal values in
    their original order, descending included; numpy's stable argsort gives the same indices (the unstable
    sort orders ties otherwise: :func:`sort_unstable`)."""
    op = "aten::sort.stable"
    if stable is not True:
        raise KernelError(f"{op}: only stable=True is supported on quantized tensors (torch's unstable order of "
                          f"equal values is not reproduced)")
    x = require_per_tensor(self, op)
    a = ints(x)
    if a.ndim == 0:
        return wrap(a.copy(), x.qdtype, x.qparams), np.zeros((), np.int64)
    (d,) = _dims(op, a.ndim, dim)
    key = -a.astype(np.int64) if descending else a
    idx = np.argsort(key, axis=d, kind="stable")
    return wrap(np.take_along_axis(a, idx, d), x.qdtype, x.qparams), idx.astype(np.int64)


# -- std: torch's integer fast path and its dequantized reference path --------------------------------------
def _std(self, dim, correction, keepdim, op: str, contiguous: bool, out):
    """``aten::std`` of a quantized tensor (torch's ``std_out_quantized_cpu``), the input's parameters.

    Where torch's fast path applies (a contiguous input reduced over its innermost dims, not one element
    with a correction) it is reproduced exactly: integer sums of the stored values and of their squares,
    ``var = sum_sq / den - 2 * mean * (sum / den) + mean * mean * N / den`` in double, ``sqrt(var) * scale``
    rounded to float32 and quantized as ``quantize_val``. Elsewhere torch dequantizes, takes the float std
    (Welford in double) and quantizes it as ``quantize_per_tensor``: srcore computes it in float64 (two
    passes), which can differ only where the std lies within double rounding of a float32 midpoint."""
    from .convert import dequantize_out
    from ._common import quant_scalar, quant_tensor

    x = require_per_tensor(self, op)
    a = ints(x)
    c = 1.0 if correction is None else float(correction)
    dims = _dims(op, a.ndim, () if dim is None else dim) if a.ndim else ()
    n = int(np.prod([a.shape[d] for d in dims])) if dims else 1
    inner = dims == tuple(range(a.ndim - len(dims), a.ndim))
    q = x.qparams
    out_shape = tuple(1 if i in dims else s for i, s in enumerate(a.shape)) if keepdim else \
        tuple(s for i, s in enumerate(a.shape) if i not in dims)
    if contiguous and inner and not (n == 1 and c != 0):
        rows = a.reshape(-1, n).astype(np.int64)
        s, ss = rows.sum(axis=1).astype(np.float64), (rows * rows).sum(axis=1).astype(np.float64)
        den = max(n - c, 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            mean, mean_unbiased = s / n, s / den
            var = np.maximum(ss / den - 2 * mean * mean_unbiased + mean * mean * n / den, 0.0)
        y = (np.sqrt(var) * float(q.scale)).astype(np.float32)
        with np.errstate(invalid="ignore"):    # no degrees of freedom: NaN, stored as the minimum (quant_scalar)
            r = quant_scalar(y, q.scale, q.zero_point, x.qdtype)
    else:
        real = dequantize_out(x).astype(np.float64)
        axis = dims if dims else None
        with np.errstate(divide="ignore", invalid="ignore"):
            mean = real.mean(axis=axis, keepdims=True)
            var = ((real - mean) ** 2).sum(axis=axis) / max(n - c, 0.0)
        with np.errstate(invalid="ignore"):
            r = quant_tensor(np.sqrt(var).astype(np.float32).reshape(-1), q.scale, q.zero_point, x.qdtype)
    res = buffer(out, out_shape, x.qdtype)
    res[...] = r.reshape(out_shape)
    return wrap(res, x.qdtype, q)


def std_out(self, unbiased=True, *, out=None):
    """``aten::std(self, unbiased)``: every element."""
    return _std(self, None, 1.0 if unbiased else 0.0, False, "aten::std", True, out)


def std_dim_out(self, dim, unbiased=True, keepdim=False, *, out=None):
    return _std(self, dim, 1.0 if unbiased else 0.0, keepdim, "aten::std.dim", True, out)


def std_correction_out(self, dim=None, *, correction=None, keepdim=False, out=None):
    return _std(self, dim, correction, keepdim, "aten::std.correction", True, out)


def std_channels_last_out(self, dim=None, correction=None, keepdim=False, *, out=None):
    """``quantized::std_channels_last``: an ``aten::std`` of a tensor torch holds channels-last (a quantized
    conv's output), which torch sees as not contiguous (unless it has one channel or one pixel): its
    dequantized reference path."""
    a = ints(self)
    contiguous = a.ndim == 4 and (a.shape[1] == 1 or a.shape[2] * a.shape[3] == 1)
    c = None if correction is None else float(correction)     # std.dim's unbiased: True / False
    return _std(self, dim, c, keepdim, "quantized::std_channels_last", contiguous, out)


# -- unstable sort and topk: torch's order of ties ------------------------------------------------------------
#: ATen sorts a 1-D ascending integer tensor of at least this many elements with fbgemm's (stable) radix
#: sort instead (``can_use_radix_sort``: ``at::internal::GRAIN_SIZE``)
_RADIX_MIN = 32768


def _rows(a: np.ndarray, d: int) -> np.ndarray:
    """``a`` with ``dim`` last, as (rows, n)."""
    return np.moveaxis(a, d, -1).reshape(-1, a.shape[d])


def _unrows(r: np.ndarray, shape, d: int) -> np.ndarray:
    moved = tuple(s for i, s in enumerate(shape) if i != d) + (r.shape[-1],)
    return np.moveaxis(r.reshape(moved), -1, d)


def sort_unstable(self, dim=-1, descending=False, *, stable=None):
    """``aten::sort`` (and ``sort.stable`` with ``stable`` not True) of a quantized tensor: torch sorts the
    stored integers with libstdc++'s ``std::sort`` on (value, index) pairs (an ascending 1-D tensor of
    32768 or more elements with a stable radix sort), so ties keep the order that algorithm leaves
    them in; :mod:`.stl_sort` runs the same steps."""
    from . import stl_sort

    op = "aten::sort"
    x = require_per_tensor(self, op)
    a = ints(x)
    if a.ndim == 0:
        return wrap(a.copy(), x.qdtype, x.qparams), np.zeros((), np.int64)
    (d,) = _dims(op, a.ndim, dim)
    if stable or (a.ndim == 1 and not descending and a.size >= _RADIX_MIN):
        return sort_stable(self, stable=True, dim=d, descending=descending)
    keys, idx = stl_sort.sort_rows(_rows(a, d), bool(descending))
    vals = _unrows(keys, a.shape, d).astype(a.dtype)
    return wrap(np.ascontiguousarray(vals), x.qdtype, x.qparams), np.ascontiguousarray(_unrows(idx, a.shape, d))


def sort_stable_flag(self, *, stable=None, dim=-1, descending=False):
    """``aten::sort.stable`` whose ``stable`` is not a constant True: stable or torch's unstable order by
    its value."""
    return sort_unstable(self, dim, descending, stable=stable)


def topk(self, k, dim=-1, largest=True, sorted=True):
    """``aten::topk`` of a quantized tensor: ATen's ``topk_impl_loop`` on the stored integers (a partial
    sort when ``k * 64 <= n``, else ``nth_element`` then a sort of the first ``k - 1``), libstdc++'s
    algorithms step for step (:mod:`.stl_sort`), so tied values come with torch's indices; the values
    keep the input's parameters."""
    from . import stl_sort

    op = "aten::topk"
    x = require_per_tensor(self, op)
    a = ints(x)
    src = a.reshape(1) if a.ndim == 0 else a
    (d,) = _dims(op, src.ndim, dim)
    n = src.shape[d]
    if not 0 <= int(k) <= n:
        raise KernelError(f"{op}: k ({k}) is out of range for a dim of {n} elements")
    keys, idx = stl_sort.topk_rows(_rows(src, d), int(k), bool(largest), bool(sorted))
    shape = src.shape[:d] + (int(k),) + src.shape[d + 1:]
    vals = _unrows(keys, shape, d).astype(a.dtype)
    idx = _unrows(idx, shape, d)
    if a.ndim == 0:
        vals, idx = vals.reshape(()), idx.reshape(())
    return wrap(np.ascontiguousarray(vals), x.qdtype, x.qparams), np.ascontiguousarray(idx)


def argsort(self, dim=-1, descending=False):
    """``aten::argsort`` of a quantized tensor: torch runs its sort (:func:`sort_unstable`) and returns
    the indices, so ties come in libstdc++'s order."""
    return sort_unstable(self, dim, descending)[1]


def argsort_stable(self, *, stable=None, dim=-1, descending=False):
    """``aten::argsort.stable``: the stable sort's indices for ``stable=True``, torch's unstable order else."""
    return sort_unstable(self, dim, descending, stable=stable)[1]


def msort(self):
    """``aten::msort``: the values of torch's sort along dim 0, the input's parameters."""
    return sort_unstable(self, 0, False)[0]
