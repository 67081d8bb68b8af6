"""``F.grid_sample`` and ``F.affine_grid`` on 4-D inputs (spatial transformers, optical-flow warping).

Coordinates follow ATen's ``GridSampler.h``: a grid value in [-1, 1] maps to pixel centres
(``align_corners=False``: -1 is the left edge of the first pixel) or to the corner pixels
(``align_corners=True``); padding ``zeros`` reads 0 outside, ``border`` clamps, ``reflection``
mirrors the coordinate back inside. Bilinear and nearest interpolation (nearest rounds half to
even, as ``nearbyint``); bicubic is refused.
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


def _gather(x, iy, ix, valid):
    """``x[n, :, iy, ix]`` for every grid point (N, C, Ho, Wo); 0 where not ``valid``."""
    n = x.shape[0]
    H, W = x.shape[2:]
    iyc, ixc = np.clip(iy, 0, H - 1), np.clip(ix, 0, W - 1)
    b = np.arange(n).reshape(n, 1, 1)
    v = x[b, :, iyc, ixc]                               # N, Ho, Wo, C
    v = np.where(valid[..., None], v, 0)
    return np.moveaxis(v, -1, 1)


def grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners, out=None):
    """``aten::grid_sampler`` / ``grid_sampler_2d``."""
    if input.ndim != 4:
        raise KernelError(f"grid_sampler: only 4-D inputs (N, C, H, W) are supported on cpu, got {input.ndim}-D")
    mode, padding = _MODES.get(interpolation_mode), _PADDING.get(padding_mode)
    if mode not in ("bilinear", "nearest") or padding is None:
        raise KernelError(f"grid_sampler: mode {mode or interpolation_mode!r} with padding "
                          f"{padding or padding_mode!r} is not supported on cpu (bilinear and nearest are)")
    H, W = input.shape[2:]
    g = grid.astype(np.float64)
    x = _source_coords(g[..., 0], W, padding, align_corners)
    y = _source_coords(g[..., 1], H, padding, align_corners)
    if mode == "nearest":
        ix, iy = np.rint(x).astype(np.int64), np.rint(y).astype(np.int64)
        r = _gather(input, iy, ix, (ix >= 0) & (ix < W) & (iy >= 0) & (iy < H))
    else:
        x0, y0 = np.floor(x), np.floor(y)
        wx1, wy1 = x - x0, y - y0
        x0, y0 = x0.astype(np.int64), y0.astype(np.int64)
        r = 0
        for dy, wy in ((0, 1 - wy1), (1, wy1)):
            for dx, wx in ((0, 1 - wx1), (1, wx1)):
                iy, ix = y0 + dy, x0 + dx
                valid = (ix >= 0) & (ix < W) & (iy >= 0) & (iy < H)
                r = r + _gather(input, iy, ix, valid) * (wy * wx)[:, None]
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
