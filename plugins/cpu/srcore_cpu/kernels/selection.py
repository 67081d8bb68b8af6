"""Gathers, differences, quantiles, membership, histograms and small losses (numpy)."""
from __future__ import annotations

import math

import numpy as np

from srcore.plugin import KernelError

from .index import _along
from .promotion import float_type, result_type


def _store(r, out, dtype):
    r = np.asarray(r, dtype=dtype)
    if out is None:
        return r
    np.copyto(out, r, casting="unsafe")
    return out


def _check_index(index, n, what):
    if index.dtype.kind not in "iu":
        raise KernelError(f"{what}(): Expected a long tensor for index, but got {index.dtype}")
    if index.size and (index.min() < -n or index.max() >= n):
        bad = index[(index < -n) | (index >= n)].flat[0]
        raise KernelError(f"out of range: tried to access index {bad} on a tensor of {n} elements.")


def take(self, index, *, out=None):
    """``aten::take``: ``self.flatten()[index]`` (negative indices wrap)."""
    flat = self.reshape(-1)
    _check_index(index, flat.size, "take")
    return _store(flat[index], out, self.dtype)


def take_along_dim(self, indices, dim=None, *, out=None):
    """``aten::take_along_dim``: ``gather`` along ``dim`` with broadcasting; dim None: over the flattened input."""
    if dim is None:
        flat = self.reshape(-1)
        _check_index(indices, flat.size, "take_along_dim")
        return _store(flat[indices.reshape(-1)], out, self.dtype)
    n = self.shape[dim]
    if indices.ndim == self.ndim > 0 and indices.dtype.kind in "iu" and indices.size:
        d = dim % self.ndim
        if all(a == b for i, (a, b) in enumerate(zip(self.shape, indices.shape)) if i != d):
            # no broadcasting (the common case): gather's cached positions (index.py) instead of two
            # broadcast_to views and np.take_along_axis's Python (~22 -> ~7 us on a small tensor)
            lo, hi = int(np.minimum.reduce(indices, axis=None)), int(np.maximum.reduce(indices, axis=None))
            if lo < -n or hi >= n:
                _check_index(indices, n, "take_along_dim")
            return _store(self[_along(indices % n if lo < 0 else indices, d)], out, self.dtype)
    _check_index(indices, n, "take_along_dim")
    shape = list(np.broadcast_shapes(tuple(1 if i == dim % self.ndim else s for i, s in enumerate(self.shape)),
                                     tuple(1 if i == dim % self.ndim else s for i, s in enumerate(indices.shape))))
    xs, ishape = list(shape), list(shape)
    xs[dim] = self.shape[dim]
    ishape[dim] = indices.shape[dim]
    r = np.take_along_axis(np.broadcast_to(self, xs), np.broadcast_to(indices % n, ishape), dim)
    return _store(r, out, self.dtype)


def ravel(self):
    """``aten::ravel``: a view when ``self`` is contiguous, else a copy (as torch's reshape(-1))."""
    return self.reshape(-1)


def diff(self, n=1, dim=-1, prepend=None, append=None, *, out=None):
    if self.ndim == 0:
        raise KernelError("diff expects input to be at least one-dimensional")
    if n < 0:
        raise KernelError(f"order must be non-negative but got {n}")
    parts = [p for p in (prepend, self, append) if p is not None]
    x = np.concatenate([np.asarray(p, self.dtype) for p in parts], axis=dim) if len(parts) > 1 else self
    for _ in range(n):
        if x.shape[dim] == 0:
            break
        a, b = np.take(x, range(1, x.shape[dim]), axis=dim), np.take(x, range(0, x.shape[dim] - 1), axis=dim)
        x = np.logical_xor(a, b) if x.dtype == np.bool_ else a - b
    return _store(x, out, self.dtype)


_METHODS = {"linear": "linear", "lower": "lower", "higher": "higher", "midpoint": "midpoint", "nearest": "nearest"}


def _quantile(self, q, dim, keepdim, interpolation, out, nan):
    if self.dtype.kind != "f":
        raise KernelError("quantile() input tensor must be either float or double dtype")
    if interpolation not in _METHODS:
        raise KernelError(f"quantile() interpolation must be one of linear, lower, higher, midpoint or nearest. "
                          f"Got {interpolation}")
    qa = np.asarray(q, np.float64)
    if qa.size and (qa.min() < 0 or qa.max() > 1):
        raise KernelError("quantile() q values must be in the range [0, 1]")
    x = self.astype(np.float64)
    if dim is None or self.ndim == 0:
        x, axis = x.reshape(-1), 0
    else:
        axis = dim
    if x.shape[axis] == 0:
        raise KernelError("quantile() input tensor must be non-empty")
    fn = np.nanquantile if nan else np.quantile
    method = _METHODS[interpolation]
    if method == "nearest":  # torch rounds half to even on the rank, numpy rounds half down
        r = _nearest(x, qa, axis, nan)
    else:
        r = fn(x, qa, axis=axis, method=method)
        if not nan:  # torch: a NaN in a slice makes its quantiles NaN
            r = np.where(np.isnan(x).any(axis=axis), np.nan, r)
    if keepdim and self.ndim:
        if dim is None:
            r = r.reshape(qa.shape + (1,) * self.ndim)
        else:
            r = np.expand_dims(r, axis=(dim % self.ndim) + qa.ndim)
    return _store(r, out, self.dtype)


def _nearest(x, qa, axis, nan):
    xs = np.sort(np.moveaxis(x, axis, -1), axis=-1)
    n = (~np.isnan(xs)).sum(-1) if nan else np.full(xs.shape[:-1], xs.shape[-1])
    rank = np.round(np.multiply.outer(qa, n - 1)).astype(np.int64)
    idx = np.clip(rank, 0, xs.shape[-1] - 1)
    r = np.take_along_axis(np.broadcast_to(xs, qa.shape + xs.shape), idx[..., None], -1)[..., 0]
    if not nan:
        r = np.where(np.isnan(xs).any(-1), np.nan, r)
    else:
        r = np.where(n == 0, np.nan, r)
    return r


def quantile(self, q, dim=None, keepdim=False, *, interpolation="linear", out=None):
    return _quantile(self, q, dim, keepdim, interpolation, out, False)


def nanquantile(self, q, dim=None, keepdim=False, *, interpolation="linear", out=None):
    return _quantile(self, q, dim, keepdim, interpolation, out, True)


def msort(self, *, out=None):
    return _store(np.sort(self, axis=0, kind="stable") if self.ndim else self, out, self.dtype)


def _histc_range(self, bins, lo, hi):
    """torch's outer edges of ``histc`` (``histc_select_outer_bin_edges``): ``min == max`` means the
    data's range, an empty range widens by 1 each way; a range that is not finite (NaN in the data
    included) or reversed raises."""
    if self.dtype.kind != "f":
        raise KernelError(f'"histogram_cpu" not implemented for \'{self.dtype}\'')
    if bins <= 0:
        raise KernelError("torch.histc(): bins must be > 0")
    lo, hi = float(lo), float(hi)
    if lo == hi and self.size:
        lo, hi = float(self.min()), float(self.max())
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise KernelError(f"torch.histc: range of [{lo}, {hi}] is not finite")
    if lo > hi:
        raise KernelError("torch.histc(): max must be larger than min")
    return lo, hi


def histc(self, bins=100, min=0, max=0, *, out=None):  # noqa: A002 - torch's argument names
    lo, hi = _histc_range(self, bins, min, max)
    x = self.reshape(-1)
    x = x[(x >= lo) & (x <= hi)]
    return _store(np.histogram(x, bins=bins, range=(lo, hi))[0], out, self.dtype)


def histc_matcher(node):
    """``aten::histc`` on float32/float64: the compiled kernel (``jit_binning.py``, compiled now, at
    load); None otherwise (the numpy kernel)."""
    from srcore.plugin import TensorType

    src = node.args[0].type if node.args else None
    if not (isinstance(src, TensorType) and src.dtype in ("float32", "float64")):
        return None
    from . import jit_binning as J

    J.compile_histc(src.dtype)

    edges = {}    # (lo, hi, bins) -> the edges array the kernel takes

    def histc_jit(self, bins=100, min=0, max=0, *, out=None):  # noqa: A002
        if self.dtype.name not in ("float32", "float64"):
            return histc(self, bins, min, max, out=out)
        lo, hi = _histc_range(self, bins, min, max)
        e = edges.get((lo, hi, bins))
        if e is None:
            # the edges in the input's dtype, as torch's linspace of that dtype holds them
            e = np.array((lo, hi, bins), self.dtype)
            if len(edges) < 64:       # a data-dependent range (min == max) need not fill memory
                edges[(lo, hi, bins)] = e
        res = out if (out is not None and out.flags.c_contiguous and out.dtype == self.dtype
                      and out.shape == (bins,)) else np.empty(bins, self.dtype)
        J.histc_counts(self.reshape(-1), e, res)
        return _store(res, out, self.dtype) if res is not out else out
    return histc_jit


def renorm(self, p, dim, maxnorm, *, out=None):
    if self.dtype.kind != "f":
        raise KernelError("renorm: expected a floating point input")
    if p <= 0:
        raise KernelError("renorm: non-positive-norm not supported")
    axes = tuple(i for i in range(self.ndim) if i != dim % self.ndim)
    a = np.abs(self.astype(np.float64))
    norm = a.max(axis=axes, keepdims=True) if np.isinf(p) else np.sum(a ** p, axis=axes, keepdims=True) ** (1.0 / p)
    factor = np.where(norm > maxnorm, maxnorm / (norm + 1e-7), 1.0)
    return _store(self * factor, out, self.dtype)


def _reduce(r, reduction, dtype):
    if reduction == 0:
        return r
    return np.asarray(r.mean() if reduction == 1 else r.sum(), dtype)


def mse_loss(self, target, reduction=1, *, out=None):
    dt = result_type(self, target)
    return _store(_reduce((self.astype(dt) - target.astype(dt)) ** 2, reduction, dt), out, dt)


def soft_margin_loss(self, target, reduction=1, *, out=None):
    dt = result_type(self, target)
    r = np.log1p(np.exp(-target.astype(np.float64) * self.astype(np.float64)))
    return _store(_reduce(r, reduction, np.float64), out, dt)


def isin(elements, test_elements, *, assume_unique=False, invert=False, out=None):
    return _store(np.isin(elements, test_elements, invert=invert), out, np.bool_)


def index_copy(self, dim, index, source, *, out=None):
    """``aten::index_copy``: ``self`` with ``self.select(dim, index[i]) = source.select(dim, i)``."""
    if index.ndim > 1:
        raise KernelError("index_copy_(): Index should have dimension 1 or 0 (got {})".format(index.ndim))
    idx = index.reshape(-1)
    n = self.shape[dim] if self.ndim else 1
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        raise KernelError(f"index_copy_(): index {int(idx.max())} is out of bounds for dimension {dim} "
                          f"with size {n}")
    r = self.copy() if out is None else out
    if out is not None:
        np.copyto(out, self)
    if self.ndim == 0:
        if idx.size:
            r[...] = source
        return r
    sl = [slice(None)] * self.ndim
    src = np.moveaxis(np.asarray(source).reshape(np.asarray(source).shape if np.ndim(source) else (1,)), dim, 0) \
        if np.ndim(source) else np.asarray(source).reshape(1)
    for i, j in enumerate(idx):
        sl[dim] = j
        r[tuple(sl)] = src[i]
    return r


def logcumsumexp(self, dim, *, out=None):
    dt = float_type(self.dtype)
    x = self.astype(np.float64)
    r = np.logaddexp.accumulate(x, axis=dim) if x.ndim else x
    return _store(r, out, dt)


def scatter_reduce(self, dim, index, src, reduce, *, include_self=True, out=None):
    """``aten::scatter_reduce.two``: sum / prod / mean / amax / amin of src into self at index along dim."""
    if reduce not in ("sum", "prod", "mean", "amax", "amin"):
        raise KernelError(f"reduce argument must be either sum, prod, mean, amax or amin, got {reduce}")
    n = self.shape[dim] if self.ndim else 1
    if index.size and (index.min() < -n or index.max() >= n):
        raise KernelError(f"index {int(index.max())} is out of bounds for dimension {dim} with size {n}")
    r = self.copy()
    d = dim % max(self.ndim, 1)
    grid = np.indices(index.shape, sparse=True)
    pos = tuple(index % n if i == d else g for i, g in enumerate(grid)) if self.ndim else (index * 0,)
    vals = src[tuple(slice(0, s) for s in index.shape)] if src.ndim else src
    count = np.zeros(self.shape, np.int64)
    if not include_self:
        r[pos] = {"sum": 0, "mean": 0, "prod": 1,
                  "amax": _lowest(r.dtype), "amin": _highest(r.dtype)}[reduce]
    else:
        count += 1
    ufunc = {"sum": np.add, "mean": np.add, "prod": np.multiply, "amax": np.fmax if r.dtype.kind == "f" else np.maximum,
             "amin": np.fmin if r.dtype.kind == "f" else np.minimum}[reduce]
    if reduce in ("amax", "amin") and r.dtype.kind == "f":  # torch propagates NaN
        ufunc = np.maximum if reduce == "amax" else np.minimum
    ufunc.at(r, pos, vals)
    if reduce == "mean":
        np.add.at(count, pos, 1)
        c = np.maximum(count, 1)
        r = (r / c) if r.dtype.kind == "f" else np.floor_divide(r, c)
    return _store(r, out, self.dtype)


def _lowest(dt):
    return -np.inf if dt.kind == "f" else np.iinfo(dt).min if dt.kind in "iu" else False


def _highest(dt):
    return np.inf if dt.kind == "f" else np.iinfo(dt).max if dt.kind in "iu" else True


def nonzero_static(self, *, size, fill_value=-1, out=None):
    """``aten::nonzero_static``: the first ``size`` nonzero indices, padded with ``fill_value``."""
    if size < 0:
        raise KernelError(f"nonzero_static: 'size' must be an non-negative integer but got {size}")
    idx = np.argwhere(self)[:size]
    r = np.full((size, self.ndim), fill_value, np.int64)
    r[: len(idx)] = idx
    return _store(r, out, np.int64)


def multi_margin_loss(self, target, p=1, margin=1, weight=None, reduction=1, *, out=None):
    """``aten::multi_margin_loss``: ``sum_j max(0, margin - x[y] + x[j])**p / C`` over j != y."""
    if p not in (1, 2):
        raise KernelError("only p == 1 and p == 2 supported")
    x = self.reshape(1, -1) if self.ndim <= 1 else self
    y = np.asarray(target).reshape(-1)
    n, c = x.shape
    if y.size and (y.min() < 0 or y.max() >= c):
        raise KernelError("target out of range")
    xy = x[np.arange(n), y][:, None]
    z = np.maximum(0, margin - xy + x) ** p
    if weight is not None:
        z = z * np.asarray(weight)[y][:, None]
    z[np.arange(n), y] = 0
    loss = z.sum(1) / c
    if reduction == 0:
        loss = loss.reshape(self.shape[:-1]) if self.ndim > 1 else loss.reshape(())
    return _store(_reduce(loss, reduction, self.dtype), out, self.dtype)


def multilabel_margin_loss(self, target, reduction=1, *, out=None):
    """``aten::multilabel_margin_loss``: targets are class indices up to the first -1."""
    x = self.reshape(1, -1) if self.ndim <= 1 else self
    t = np.asarray(target).reshape(x.shape)
    n, c = x.shape
    loss = np.zeros(n, np.float64)
    for i in range(n):
        labels = []
        for v in t[i]:
            if v < 0:
                break
            labels.append(int(v))
        is_target = np.zeros(c, bool)
        is_target[labels] = True
        for j in labels:
            loss[i] += np.maximum(0, 1 - (x[i, j] - x[i][~is_target])).sum()
    loss = loss / c
    if reduction == 0:
        loss = loss.reshape(self.shape[:-1]) if self.ndim > 1 else loss.reshape(())
    return _store(_reduce(loss, reduction, self.dtype), out, self.dtype)
