"""Compiled channels-last copies: a channels-first tensor written, moved to channels-last, into a
column range of a larger output (a folded ``permute`` in a ``cat``, ``tactics/data.py``)."""
from __future__ import annotations

import numba

from .jit import JIT


@numba.njit(**JIT)
def channels_last_into(x, out, lead, c, s, off):
    """``x`` seen as (lead, c, s) and ``out`` as (lead, rest), both C-contiguous:
    ``out[l, off + j * c + k] = x[l, k, j]`` (NCHW -> NHWC for lead = N, s = H * W)."""
    xf = x.reshape(lead, c, s)
    of = out.reshape(lead, out.size // lead)
    for m in range(lead):
        xm, om = xf[m], of[m]
        for j in range(s):
            base = off + j * c
            for k in range(c):
                om[base + k] = xm[k, j]


#: :func:`transpose_tiles`' tile: this many rows of the source (its channels) by ...
TILE_ROWS = 16
#: ... this many columns (its pixels): 4 KiB read and 4 KiB written a tile, both in L1
TILE_COLS = 64


@numba.njit(**JIT)
def transpose_tiles(x, out, b, m, n):
    """``x`` seen as (b, m, n) and ``out`` as (b, n, m), both C-contiguous: ``out[i, k, j] =
    x[i, j, k]`` (a ``permute`` that moves a group of dims past another, NCHW -> NHWC), tile by tile.
    A tile reads TILE_ROWS rows of TILE_COLS contiguous values each and writes TILE_COLS short rows
    within L1. numpy's transposed copy walks the source in the destination's order: with rows 4 KiB
    apart (32x32 planes) every read maps to the same L1 set (a detection head's 75x32x32 permute:
    ~2.5x slower than this on the AMD EPYC)."""
    xf = x.reshape(b, m, n)
    of = out.reshape(b, n, m)
    for i in range(b):
        xi, oi = xf[i], of[i]
        for j0 in range(0, m, TILE_ROWS):
            j1 = min(j0 + TILE_ROWS, m)
            for k0 in range(0, n, TILE_COLS):
                k1 = min(k0 + TILE_COLS, n)
                for j in range(j0, j1):
                    for k in range(k0, k1):
                        oi[k, j] = xi[j, k]
