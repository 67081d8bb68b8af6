"""``aten::grid_sampler(_2d)`` of a quint8 tensor: torch's ``_grid_sampler_2d_cpu_quantized``, bit for bit.

torch interpolates the stored integers (bilinear only; every padding mode): per output point the source
coordinate in float32 (``GridSampler.h``), the four corner weights ``(ix_se - ix) * (iy_se - iy)``...
in float32, then per channel ``res = q_nw * nw + q_ne * ne + q_sw * sw + q_se * se`` added in that
order in float32 (a corner outside the input counts as the zero point), rounded half to even. The
output keeps the input's scale and zero point.
"""
from __future__ import annotations

import numpy as np

from srcore.plugin import KernelError

from ._common import F32, buffer, ints, require_per_tensor, wrap


def _unnormalize(c: np.ndarray, size: int, align_corners: bool) -> np.ndarray:
    if align_corners:
        return (c + F32(1)) / F32(2) * F32(size - 1)
    return ((c + F32(1)) * F32(size) - F32(1)) / F32(2)


def _clip(c: np.ndarray, size: int) -> np.ndarray:
    return np.minimum(F32(size - 1), np.maximum(c, F32(0)))


def _reflect(c: np.ndarray, twice_low: int, twice_high: int) -> np.ndarray:
    if twice_low == twice_high:
        return np.zeros_like(c)
    low = F32(twice_low) / F32(2)
    span = F32(twice_high - twice_low) / F32(2)
    c = np.abs(c - low)
    extra = np.fmod(c, span)
    flips = np.floor(c / span).astype(np.int64)
    return np.where(flips % 2 == 0, extra + low, span - extra + low).astype(F32)


def source_index(c: np.ndarray, size: int, padding: int, align_corners: bool) -> np.ndarray:
    """``grid_sampler_compute_source_index`` in float32: 0 zeros, 1 border, 2 reflection."""
    c = _unnormalize(c.astype(F32), size, align_corners)
    if padding == 1:
        c = _clip(c, size)
    elif padding == 2:
        c = _reflect(c, 0, 2 * (size - 1)) if align_corners else _reflect(c, -1, 2 * size - 1)
        c = _clip(c, size)
    return c.astype(F32)


def grid_sampler_2d_out(input, grid, interpolation_mode, padding_mode, align_corners, *, out=None):
    """``aten::grid_sampler_2d`` (and ``aten::grid_sampler`` of a 4-D input) on a quint8 tensor."""
    op = "aten::grid_sampler_2d"
    x = require_per_tensor(input, op)
    if x.qdtype != "quint8":
        raise KernelError(f"{op}: torch samples quint8 tensors only, got {x.qdtype}")
    if int(interpolation_mode) != 0:
        raise KernelError(f"{op}: only bilinear interpolation (mode 0) is supported on quantized tensors, as torch")
    padding = int(padding_mode)
    if padding not in (0, 1, 2):
        raise KernelError(f"{op}: padding_mode {padding} is not one of 0 (zeros), 1 (border), 2 (reflection)")
    g = np.asarray(grid)
    if x.ndim != 4 or g.ndim != 4 or g.shape[-1] != 2 or g.shape[0] != x.shape[0]:
        raise KernelError(f"{op}: expects a 4-D input and an (N, H, W, 2) grid of the same batch, got "
                          f"{list(x.shape)} and {list(g.shape)}")
    if g.dtype != np.float32:
        raise KernelError(f"{op}: the grid must be float32, got {g.dtype}")
    n, c, h, w = x.shape
    ix = source_index(g[..., 0], w, padding, bool(align_corners))      # (N, Ho, Wo)
    iy = source_index(g[..., 1], h, padding, bool(align_corners))
    x0, y0 = np.floor(ix).astype(np.int64), np.floor(iy).astype(np.int64)
    x1, y1 = x0 + 1, y0 + 1
    fx0, fy0, fx1, fy1 = (v.astype(F32) for v in (x0, y0, x1, y1))
    weights = ((fx1 - ix) * (fy1 - iy), (ix - fx0) * (fy1 - iy), (fx1 - ix) * (iy - fy0), (ix - fx0) * (iy - fy0))
    q = ints(x)
    zp = F32(int(x.qparams.zero_point) & 0xFF)       # torch reads it as uint8
    batch = np.arange(n)[:, None, None]
    res = None
    for (yy, xx), wt in zip(((y0, x0), (y0, x1), (y1, x0), (y1, x1)), weights):
        inside = (yy >= 0) & (yy < h) & (xx >= 0) & (xx < w)
        vals = q[batch, :, np.clip(yy, 0, h - 1), np.clip(xx, 0, w - 1)].astype(F32)   # (N, Ho, Wo, C)
        vals = np.where(inside[..., None], vals, zp)
        term = vals * wt[..., None]
        res = term if res is None else (res + term).astype(F32)
    r = np.rint(res)
    dst = buffer(out, (n, c) + g.shape[1:3], "quint8")
    np.moveaxis(dst, 1, -1)[...] = r
    return wrap(dst, "quint8", x.qparams)
