"""``aten::grid_sampler`` (bilinear / nearest, every padding mode) as one compiled kernel (numba),
shared by the backends (``srcore.plugin.grid_sample``: the cpu plugin's kernel and trt_like's
``grid_sample`` layer).

A numpy version gathers ``x[n, :, iy, ix]`` four times through fancy indexing and allocates a
dozen (N, C, Ho, Wo) temporaries: a spatial transformer's 16x28x28 sample took 50-200 us. Here, per
batch item, each grid point's source coordinate, taps and weights are computed once (float64:
ATen's ``GridSampler.h`` arithmetic), then every channel plane is sampled in one pass with
contiguous writes. Modes: 0 bilinear, 1 nearest; padding: 0 zeros, 1 border, 2 reflection.
"""
from __future__ import annotations

import math

import numba
import numpy as np

#: releases the GIL, cached on disk, IEEE division, FMA contraction only
JIT = dict(nogil=True, cache=True, error_model="numpy", fastmath={"contract"})

SIGNATURE = ("void(float32[:, :, :, ::1], float32[:, :, :, ::1], int64, int64, boolean, float32[:, :, :, ::1], "
             "int64[:, ::1], float64[:, ::1])")


@numba.njit(**JIT)
def _coord(c, size, padding, align_corners):
    """A grid value -> a source coordinate (``compute_coordinates`` of ATen's ``GridSampler.h``)."""
    c = (c + 1.0) / 2.0 * (size - 1) if align_corners else ((c + 1.0) * size - 1.0) / 2.0
    if padding == 1:                                      # border
        c = min(max(c, 0.0), size - 1.0)
    elif padding == 2:                                    # reflection, bounds doubled as in ATen
        lo2, hi2 = (0.0, 2.0 * (size - 1)) if align_corners else (-1.0, 2.0 * size - 1.0)
        if lo2 == hi2:
            c = 0.0
        else:
            lo, span = lo2 / 2.0, (hi2 - lo2) / 2.0
            c = abs(c - lo)
            extra = np.fmod(c, span)
            flips = math.floor(c / span)
            c = extra + lo if flips % 2 == 0 else span - extra + lo
        c = min(max(c, 0.0), size - 1.0)
    return c


@numba.njit(**JIT)
def grid_sampler(x, grid, mode, padding, align_corners, o, idx, wts):
    """``x`` (N, C, H, W), ``grid`` (N, Ho, Wo, 2) -> ``o`` (N, C, Ho, Wo). ``idx`` / ``wts`` (Ho*Wo, 4)
    are per-call scratch: the flat source index and weight of each tap (weight 0 where outside)."""
    N, C, H, W = x.shape
    Ho, Wo = grid.shape[1], grid.shape[2]
    P = Ho * Wo
    for n in range(N):
        for i in range(Ho):
            for j in range(Wo):
                p = i * Wo + j
                gx = _coord(np.float64(grid[n, i, j, 0]), W, padding, align_corners)
                gy = _coord(np.float64(grid[n, i, j, 1]), H, padding, align_corners)
                for t in range(4):
                    idx[p, t] = 0
                    wts[p, t] = 0.0
                if mode == 1:                             # nearest: round half to even
                    rx, ry = np.rint(gx), np.rint(gy)
                    if 0.0 <= rx <= W - 1.0 and 0.0 <= ry <= H - 1.0:
                        idx[p, 0] = int(ry) * W + int(rx)
                        wts[p, 0] = 1.0
                    continue
                fx, fy = math.floor(gx), math.floor(gy)
                ax, ay = gx - fx, gy - fy
                t = 0
                for dy in range(2):
                    yy = fy + dy
                    wy = ay if dy else 1.0 - ay
                    for dx in range(2):
                        xx = fx + dx
                        wx = ax if dx else 1.0 - ax
                        if 0.0 <= xx <= W - 1.0 and 0.0 <= yy <= H - 1.0:
                            idx[p, t] = int(yy) * W + int(xx)
                            wts[p, t] = wy * wx
                        t += 1
        for c in range(C):
            plane = x[n, c].reshape(H * W)
            out = o[n, c].reshape(P)
            for p in range(P):
                out[p] = (wts[p, 0] * plane[idx[p, 0]] + wts[p, 1] * plane[idx[p, 1]]
                          + wts[p, 2] * plane[idx[p, 2]] + wts[p, 3] * plane[idx[p, 3]])


class GridSampler:
    """``run(input, grid, mode, padding, align_corners, out)`` for float32 C-contiguous 4-D tensors
    (compiled for :data:`SIGNATURE` when made: no call pays for a compilation)."""

    def __init__(self):
        args, _ = numba.core.sigutils.normalize_signature(SIGNATURE)
        grid_sampler.compile(SIGNATURE)
        self.kernel = grid_sampler.overloads[tuple(args)].entry_point

    def __call__(self, x, grid, mode, padding, align_corners, out):
        P = grid.shape[1] * grid.shape[2]
        self.kernel(x, grid, mode, padding, bool(align_corners), out, np.empty((P, 4), np.int64),
                    np.empty((P, 4), np.float64))
        return out
