"""``F.grid_sample`` (4-D and 5-D inputs) and ``F.affine_grid`` (4-D) (spatial transformers, optical-flow warping).

Coordinates follow ATen's ``GridSampler.h``: a grid value in [-1, 1] maps to pixel centres
(``align_corners=False``: -1 is the left edge of the first pixel) or to the corner pixels
(``align_corners=True``); padding ``zeros`` reads 0 outside, ``border`` clamps, ``reflection``
mirrors the coordinate back inside. Bilinear (trilinear on 5-D) and nearest interpolation
(nearest rounds half to even, as ``nearbyint``); bicubic (4-D only, as torch) with ATen's A = -0.75,
each of its 16 taps read through the padding mode.
"""
from __future__ import annotations

import numpy as np

from srcore.plugin import KernelError, NodeInfo, Specialized

_MODES = {0: "bilinear", 1: "nearest", 2: "bicubic"}
_PADDING = {0: "zeros", 1: "border", 2: "reflection"}


def _unnormalize(c, size: int, align_corners: bool):
    if align_corners:
        return (c + 1) / 2 * (size - 1)
    return ((c + 1) * size - 1) / 2


def _reflect(c, lo2: float, hi2: float):
    """Mirror ``c`` into [lo2/2, hi2/2] (bounds given doubled, as ATen does, to stay in ints)."""
    if lo2 == hi2:
        return np.zeros_like(c)
    lo, span = lo2 / 2, (hi2 - lo2) / 2
    c = np.abs(c - lo)
    flips = np.floor(c / span)
    extra = np.fmod(c, span)
    return np.where(flips % 2 == 0, extra + lo, span - extra + lo)


def _source_coords(c, size: int, padding: str, align_corners: bool):
    c = _unnormalize(c, size, align_corners)
    if padding == "border":
        c = np.clip(c, 0, size - 1)
    elif padding == "reflection":
        c = _reflect(c, 0, 2 * (size - 1)) if align_corners else _reflect(c, -1, 2 * size - 1)
        c = np.clip(c, 0, size - 1)
    return c


def _gather(x, idx, valid):
    """``x[n, :, *idx]`` for every grid point (N, C, *grid's spatial shape); 0 where not ``valid``."""
    n = x.shape[0]
    clipped = tuple(np.clip(i, 0, s - 1) for i, s in zip(idx, x.shape[2:]))
    b = np.arange(n).reshape((n,) + (1,) * (idx[0].ndim - 1))
    v = x[(b, slice(None)) + clipped]                   # N, *grid, C
    v = np.where(valid[..., None], v, 0)
    return np.moveaxis(v, -1, 1)


def _inside(idx, sizes):
    ok = True
    for i, s in zip(idx, sizes):
        ok = ok & (i >= 0) & (i < s)
    return ok


def _cubic_weights(t, a: float = -0.75):
    """ATen's ``get_cubic_upsample_coefficients``: the 4 taps' weights at offsets -1, 0, 1, 2."""
    def near(x):
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return far(t + 1), near(t), near(1 - t), far(2 - t)


def _padded(i, size: int, padding: str, align_corners: bool):
    """A bicubic tap's integer coordinate after the padding mode (ATen's ``compute_coordinates``)."""
    if padding == "border":
        return np.clip(i, 0, size - 1)
    if padding == "reflection":
        c = _reflect(i.astype(np.float64), 0, 2 * (size - 1)) if align_corners \
            else _reflect(i.astype(np.float64), -1, 2 * size - 1)
        return np.clip(c, 0, size - 1).astype(np.int64)
    return i


def grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners, out=None):
    """``aten::grid_sampler`` / ``grid_sampler_2d`` / ``grid_sampler_3d``: 4-D input (bilinear,
    nearest, bicubic) or 5-D (trilinear as "bilinear", nearest)."""
    nd = input.ndim - 2
    if nd not in (2, 3) or grid.ndim != input.ndim or grid.shape[-1] != nd:
        raise KernelError(f"grid_sampler: a {input.ndim}-D input with a grid of shape {grid.shape} is not "
                          "supported on cpu (4-D or 5-D inputs with a matching grid are)")
    mode, padding = _MODES.get(interpolation_mode), _PADDING.get(padding_mode)
    if mode is None or padding is None or (mode == "bicubic" and nd != 2):
        raise KernelError(f"grid_sampler: mode {mode or interpolation_mode!r} with padding "
                          f"{padding or padding_mode!r} on a {input.ndim}-D input is not supported "
                          "(torch has bicubic for 4-D inputs only)")
    sizes = input.shape[2:]
    g = grid.astype(np.float64)
    coords = [g[..., nd - 1 - d] for d in range(nd)]   # the grid's last axis is (x, y[, z]): W first
    if mode == "bicubic":   # taps read through the padding mode, not the coordinate (ATen)
        H, W = sizes
        x = _unnormalize(coords[1], W, align_corners)
        y = _unnormalize(coords[0], H, align_corners)
        x0, y0 = np.floor(x), np.floor(y)
        wxs, wys = _cubic_weights(x - x0), _cubic_weights(y - y0)
        x0, y0 = x0.astype(np.int64), y0.astype(np.int64)
        r = 0
        for i, wy in enumerate(wys):
            iy = _padded(y0 - 1 + i, H, padding, align_corners)
            for j, wx in enumerate(wxs):
                ix = _padded(x0 - 1 + j, W, padding, align_corners)
                r = r + _gather(input, (iy, ix), _inside((iy, ix), sizes)) * (wy * wx)[:, None]
    else:
        src = [_source_coords(c, s, padding, align_corners) for c, s in zip(coords, sizes)]
        if mode == "nearest":
            idx = tuple(np.rint(c).astype(np.int64) for c in src)
            r = _gather(input, idx, _inside(idx, sizes))
        else:
            lo = [np.floor(c) for c in src]
            frac = [c - f for c, f in zip(src, lo)]
            lo = [f.astype(np.int64) for f in lo]
            r = 0
            for corner in np.ndindex(*(2,) * nd):
                idx = tuple(f + k for f, k in zip(lo, corner))
                w = 1
                for k, t in zip(corner, frac):
                    w = w * (t if k else 1 - t)
                r = r + _gather(input, idx, _inside(idx, sizes)) * w[:, None]
    r = np.asarray(r, input.dtype)
    if out is None:
        return r
    np.copyto(out, r)
    return out


def grid_sampler_matcher(node: NodeInfo):
    """``aten::grid_sampler(_2d)`` on float32: the compiled kernel (``jit_grid_sample.py``, compiled
    now), or None (the numpy kernel). Other shapes and modes fall back to the numpy kernel at run."""
    from .norm import _f32_node

    if not _f32_node(node, least=0):
        return None
    from .jit_grid_sample import GridSampler

    kernel = GridSampler()

    def grid_sampler_jit(input, grid, interpolation_mode, padding_mode, align_corners, out=None):
        shape = input.shape[:2] + grid.shape[1:3]
        if (interpolation_mode not in (0, 1) or padding_mode not in (0, 1, 2) or input.ndim != 4
                or grid.ndim != 4 or grid.shape[3] != 2 or grid.shape[0] != input.shape[0]
                or input.dtype != np.float32 or grid.dtype != np.float32 or 0 in input.shape[2:]
                or not (input.flags.c_contiguous and grid.flags.c_contiguous)
                or (out is not None and (out.dtype != np.float32 or not out.flags.c_contiguous
                                         or out.shape != shape))):
            return grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners, out=out)
        if out is None:
            out = np.empty(shape, np.float32)
        return kernel(input, grid, int(interpolation_mode), int(padding_mode), align_corners, out)
    return Specialized(grid_sampler_jit, args=(0, 1, 2, 3, 4))


def affine_grid_generator(theta, size, align_corners, out=None):
    """``aten::affine_grid_generator`` for a 4-D ``size``: the (N, H, W, 2) grid ``[x, y, 1] @ theta^T``."""
    if len(size) != 4:
        raise KernelError(f"affine_grid: only 4-D sizes (N, C, H, W) are supported on cpu, got {list(size)}")
    from srcore.plugin import affine_grid

    n, _, h, w = size
    base = affine_grid.base_grid(h, w, align_corners)
    r = np.einsum("hwk,njk->nhwj", base, theta.astype(np.float64)).astype(theta.dtype)
    if r.shape[0] != n:
        raise KernelError(f"affine_grid: theta has batch {theta.shape[0]}, size asks for {n}")
    if out is None:
        return r
    np.copyto(out, r)
    return out
