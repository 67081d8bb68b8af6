"""Padding kernels: ``aten::pad`` (constant, reflect, replicate, circular) and its per-mode ops.

``pad`` lists (before, after) pairs from the last dimension backwards, as torch does; negative
values crop. numpy's ``np.pad`` modes ``reflect``, ``edge`` and ``wrap`` are torch's ``reflect``,
``replicate`` and ``circular``.
"""
from __future__ import annotations

import numpy as np
from srcore.plugin import KernelError

_MODES = {"constant": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}


def _pad(x: np.ndarray, pad, mode: str, value, out):
    if len(pad) % 2 or len(pad) // 2 > x.ndim:
        raise KernelError(f"pad of length {len(pad)} does not fit a tensor of rank {x.ndim}")
    if mode not in _MODES:
        raise KernelError(f"padding mode {mode!r} is not supported (constant, reflect, replicate, circular)")
    widths = [(0, 0)] * x.ndim
    crop = [slice(None)] * x.ndim
    for i in range(len(pad) // 2):
        d = x.ndim - 1 - i
        before, after = int(pad[2 * i]), int(pad[2 * i + 1])
        widths[d] = (max(before, 0), max(after, 0))
        n = x.shape[d] + max(before, 0) + max(after, 0)
        crop[d] = slice(-min(before, 0), n + min(after, 0))
        if mode == "reflect" and (before >= x.shape[d] or after >= x.shape[d]):
            raise KernelError(f"reflect padding ({before}, {after}) must be smaller than dimension {d} "
                              f"of size {x.shape[d]}")
    if mode == "circular":
        # torch crops first, then wraps what is left: (1, -2) on [0, 1, 2, 3] is [1, 0, 1]
        kept = tuple(slice(-min(int(pad[2 * i]), 0), x.shape[x.ndim - 1 - i] + min(int(pad[2 * i + 1]), 0))
                     for i in reversed(range(len(pad) // 2)))
        res = np.pad(x[(Ellipsis, *kept)], widths, mode="wrap")
    elif mode == "constant":
        return _constant(x, pad, 0 if value is None else value, out)
    else:
        res = np.pad(x, widths, mode=_MODES[mode])[tuple(crop)]
    if out is None:
        return np.ascontiguousarray(res)
    np.copyto(out, res)
    return out


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
    neg = np.expm1(np.minimum(x, 0) / np.array(inner, dt)) * np.array(alpha, dt)
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
