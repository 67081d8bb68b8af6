"""Padding kernels: ``aten::pad`` (constant, reflect, replicate, circular) and its per-mode ops.

``pad`` lists (before, after) pairs from the last dimension backwards, as torch does; negative
values crop. numpy's ``np.pad`` modes ``reflect``, ``edge`` and ``wrap`` are torch's ``reflect``,
``replicate`` and ``circular``.
"""
from __future__ import annotations

import numpy as np
from srcore.plugin import KernelError

#: outputs up to this many elements are padded by one gather (measured crossover with np.pad: ~16k
#: float32 elements on Sapphire Rapids)
_GATHER_MAX = 16384

_MODES = {"constant": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}


def _pad(x: np.ndarray, pad, mode: str, value, out):
    if len(pad) % 2 or len(pad) // 2 > x.ndim:
        raise KernelError(f"pad of length {len(pad)} does not fit a tensor of rank {x.ndim}")
    if mode not in _MODES:
        raise KernelError(f"padding mode {mode!r} is not supported (constant, reflect, replicate, circular)")
    if mode == "constant":
        return _constant(x, pad, 0 if value is None else value, out)
    k = len(pad) // 2
    idx = [_source_index(x.shape[x.ndim - 1 - i], int(pad[2 * i]), int(pad[2 * i + 1]), mode, x.ndim - 1 - i)
           for i in reversed(range(k))]
    size = int(np.prod(x.shape[:x.ndim - k])) * int(np.prod([len(i) for i in idx]))
    if size <= _GATHER_MAX:
        # one gather over the padded (trailing) dims: np.pad's per-call overhead is ~20-50 us
        res = x[(Ellipsis, *np.ix_(*idx))] if k else x.copy()
    else:   # np.pad's slice copies beat an element gather on large tensors
        widths = [(0, 0)] * (x.ndim - k) + [(max(int(pad[2 * i]), 0), max(int(pad[2 * i + 1]), 0))
                                            for i in reversed(range(k))]
        crop = [slice(None)] * (x.ndim - k) + [slice(-min(int(pad[2 * i]), 0), None) for i in reversed(range(k))]
        crop = tuple(slice(c.start, c.start + len(i)) for c, i in zip(crop[x.ndim - k:], idx))
        src = x
        if mode == "circular":  # crop first, then wrap
            src = x[(Ellipsis, *(slice(-min(int(pad[2 * i]), 0), x.shape[x.ndim - 1 - i]
                                       + min(int(pad[2 * i + 1]), 0)) for i in reversed(range(k))))]
            crop = ()
        res = np.pad(src, widths, mode=_MODES[mode])[(Ellipsis, *crop)]
    if out is None:
        return np.ascontiguousarray(res)
    np.copyto(out, res)
    return out


def _source_index(n: int, before: int, after: int, mode: str, d: int) -> np.ndarray:
    """The source index along dimension ``d`` (size ``n``) of each output position, as ``np.pad``'s
    ``reflect``, ``edge`` and ``wrap`` then a crop of negative pads give them (circular: torch crops
    first, then wraps what is left: (1, -2) on [0, 1, 2, 3] is [1, 0, 1])."""
    size = n + before + after
    if size < 0:
        raise KernelError(f"pad ({before}, {after}) makes dimension {d} of size {n} negative")
    if mode == "reflect" and (before >= n or after >= n):
        raise KernelError(f"reflect padding ({before}, {after}) must be smaller than dimension {d} of size {n}")
    j = np.arange(size)
    if mode == "circular":
        lo, hi = max(-before, 0), n - max(-after, 0)
        if hi <= lo:
            if size:
                raise KernelError(f"circular padding ({before}, {after}) leaves nothing of dimension {d} "
                                  f"of size {n} to wrap")
            return j
        return lo + (j - max(before, 0)) % (hi - lo)
    if n == 0 and size:
        raise KernelError(f"{mode} padding ({before}, {after}) of dimension {d}: it is empty")
    s = j - before
    if mode == "reflect":
        return np.where(s < 0, -s, np.where(s >= n, 2 * (n - 1) - s, s))
    return np.clip(s, 0, n - 1)


def _constant(x: np.ndarray, pad, fill, out):
    """Constant padding as a fill and one strided copy (``np.pad`` costs ~10x more on small tensors)."""
    shape, src, dst = list(x.shape), [slice(None)] * x.ndim, [slice(None)] * x.ndim
    for i in range(len(pad) // 2):
        d = x.ndim - 1 - i
        before, after, n = int(pad[2 * i]), int(pad[2 * i + 1]), x.shape[d]
        shape[d] = n + before + after
        if shape[d] < 0:
            raise KernelError(f"pad ({before}, {after}) makes dimension {d} of size {n} negative")
        lo, hi = max(-before, 0), n - max(-after, 0)  # what is kept of x
        src[d] = slice(lo, max(hi, lo))
        dst[d] = slice(max(before, 0), max(before, 0) + max(hi - lo, 0))
    res = out if out is not None else np.empty(shape, x.dtype)
    res.fill(np.array(fill).astype(x.dtype))
    res[tuple(dst)] = x[tuple(src)]
    return res


def pad(self, pad, mode="constant", value=None, out=None):
    """``aten::pad``."""
    return _pad(self, pad, mode, value, out)


def constant_pad_nd(self, pad, value=0, out=None):
    """``aten::constant_pad_nd``."""
    return _pad(self, pad, "constant", value, out)


def reflection_pad(self, padding, out=None):
    """``aten::reflection_pad1d/2d``."""
    return _pad(self, padding, "reflect", None, out)


def replication_pad(self, padding, out=None):
    """``aten::replication_pad1d/2d``."""
    return _pad(self, padding, "replicate", None, out)


def pad_circular(self, pad, out=None):
    """``aten::_pad_circular``."""
    return _pad(self, pad, "circular", None, out)


def _elu_like(x, alpha, inner, scale, out):
    """scale * (max(0, x) + alpha * expm1(min(0, x) / inner))."""
    dt = x.dtype
    if out is None:
        out = np.empty(x.shape, dt)  # a 0-d input: numpy would return a scalar
    neg = np.minimum(x, 0, out=np.empty(x.shape, dt))   # (an array for a 0-d x too)
    if inner != 1.0:   # (x / 1 is exact: selu's pass skipped)
        np.true_divide(neg, np.array(inner, dt), out=neg)
    neg = np.multiply(np.expm1(neg, out=neg), np.array(alpha, dt), out=neg)
    res = np.add(np.maximum(x, 0), neg, out=out)
    if scale != 1.0:
        np.multiply(res, np.array(scale, dtype=dt), out=res)
    return res


def selu(self, out=None):
    """``aten::selu``: scale * elu(x, alpha) with torch's constants."""
    return _elu_like(self, 1.6732632423543772, 1.0, 1.0507009873554805, out)


def celu(self, alpha=1.0, out=None):
    """``aten::celu``: max(0, x) + min(0, alpha * (exp(x / alpha) - 1))."""
    return _elu_like(self, alpha, alpha, 1.0, out)
