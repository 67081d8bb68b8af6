"""Padding of quantized tensors (``F.pad``, ``nn.ZeroPad2d``, ``constant_pad_nd``), as torch's QuantizedCPU:
the output keeps the input's parameters; a constant is quantized with them (``quantize_val``); reflect
pads 1-D and 2-D; negative pads crop. torch has no quantized replicate, circular or 3-D reflect pad.
"""
from __future__ import annotations

import numpy as np

from srcore.plugin import KernelError

from ._common import F32, buffer, ints, quant_scalar, require_per_tensor, wrap


def _pairs(op: str, a: np.ndarray, pad) -> list[tuple[int, int, int]]:
    """``(dim, before, after)`` per padded dim, the last dim first (torch's order of ``pad``)."""
    pad = [int(p) for p in pad]
    if len(pad) % 2 or len(pad) // 2 > a.ndim:
        raise KernelError(f"{op}: pad of length {len(pad)} does not fit a {a.ndim}-D tensor")
    pairs = [(a.ndim - 1 - i, pad[2 * i], pad[2 * i + 1]) for i in range(len(pad) // 2)]
    for d, before, after in pairs:
        if a.shape[d] + before + after < 0:
            raise KernelError(f"{op}: pad ({before}, {after}) makes dimension {d} of size {a.shape[d]} negative")
    return pairs


def constant_pad_nd_out(self, pad, value=0, *, out=None):
    op = "aten::constant_pad_nd"
    x = require_per_tensor(self, op)
    a = ints(x)
    pairs = _pairs(op, a, pad)
    shape, src, dst = list(a.shape), [slice(None)] * a.ndim, [slice(None)] * a.ndim
    for d, before, after in pairs:
        n = a.shape[d]
        shape[d] = n + before + after
        lo, hi = max(-before, 0), max(n - max(-after, 0), max(-before, 0))   # what is kept of the input
        src[d], dst[d] = slice(lo, hi), slice(max(before, 0), max(before, 0) + hi - lo)
    res = buffer(out, shape, x.qdtype)
    fill = quant_scalar(np.asarray(0 if value is None else value, F32).reshape(1), x.qparams.scale,
                        x.qparams.zero_point, x.qdtype)
    res.fill(fill[0])
    res[tuple(dst)] = a[tuple(src)]
    return wrap(res, x.qdtype, x.qparams)


def reflection_pad_out(self, padding, *, out=None):
    """``reflection_pad1d`` (2-D or 3-D input, 2 pads) / ``reflection_pad2d`` (3-D or 4-D, 4 pads)."""
    op = "aten::reflection_pad"
    x = require_per_tensor(self, op)
    a = ints(x)
    pairs = _pairs(op, a, padding)
    if not (len(pairs) == 1 and a.ndim in (2, 3) or len(pairs) == 2 and a.ndim in (3, 4)):
        raise KernelError(f"{op}: torch reflect-pads quantized tensors in 1-D (a 2-D or 3-D input) or 2-D "
                          f"(a 3-D or 4-D input), got {len(padding)} pads for a {a.ndim}-D input")
    idx = []
    for d, before, after in reversed(pairs):
        n = a.shape[d]
        if before >= n or after >= n:
            raise KernelError(f"{op}: padding ({before}, {after}) must be smaller than dimension {d} of size {n}")
        s = np.arange(n + before + after) - before
        idx.append(np.where(s < 0, -s, np.where(s >= n, 2 * (n - 1) - s, s)))
    res = buffer(out, a.shape[:a.ndim - len(idx)] + tuple(len(i) for i in idx), x.qdtype)
    res[...] = a[(Ellipsis, *np.ix_(*idx))]
    return wrap(res, x.qdtype, x.qparams)


def pad_out(self, pad, mode="constant", value=None, *, out=None):
    """``aten::pad``: ``constant`` and ``reflect``, the modes torch pads quantized tensors in."""
    if mode == "constant":
        return constant_pad_nd_out(self, pad, 0 if value is None else value, out=out)
    if mode == "reflect":
        return reflection_pad_out(self, pad, out=out)
    raise KernelError(f"aten::pad: torch has no {mode!r} padding of quantized tensors (constant and reflect only)")
