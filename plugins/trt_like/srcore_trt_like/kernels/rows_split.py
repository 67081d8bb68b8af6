"""Softmax, layer norm and group norm rows, and resized planes, split over numba's OpenMP team: the
threads claim chunks of rows (planes) one at a time (:mod:`.atomics`), each chunk the one-thread
kernel of :mod:`.rows` (:mod:`.resize`) on its slice, so a row's bits do not depend on the thread
(or the team) that ran it."""
from __future__ import annotations

import numpy as np
from numba import njit, prange

from .atomics import claim
from .jit import PARALLEL_JIT
from .resize import bilinear_planes, linear_rows, nearest_planes
from .rows import group_norm_rows, layer_norm_row, softmax_row

#: rows a claim takes: bert_encoder's softmax rows of 128 take ~0.3 us each, a claim ~0.02 us
CHUNK = 16


@njit(**PARALLEL_JIT)
def softmax_split(x, out, scale, nt):
    n = x.shape[0]
    nxt = np.zeros(1, np.int64)
    for t in prange(nt):
        a = claim(nxt) * CHUNK
        while a < n:
            for r in range(a, min(n, a + CHUNK)):
                softmax_row(x[r], out[r], scale)
            a = claim(nxt) * CHUNK


@njit(**PARALLEL_JIT)
def layer_norm_split(x, w, b, eps, out, nt):
    n = x.shape[0]
    nxt = np.zeros(1, np.int64)
    for t in prange(nt):
        a = claim(nxt) * CHUNK
        while a < n:
            for r in range(a, min(n, a + CHUNK)):
                layer_norm_row(x[r], w, b, eps, out[r])
            a = claim(nxt) * CHUNK


@njit(**PARALLEL_JIT)
def group_norm_split(x, w, b, eps, out, code, slope, nt):
    """:func:`.rows.group_norm_rows` (``x`` (N * G, C / G, S), ``w``, ``b`` (G, C / G)) one row (a
    group of one sample) a claim."""
    n, groups = x.shape[0], w.shape[0]
    nxt = np.zeros(1, np.int64)
    for t in prange(nt):
        r = claim(nxt)
        while r < n:
            g = r % groups
            group_norm_rows(x[r:r + 1], w[g:g + 1], b[g:g + 1], eps, out[r:r + 1], code, slope)
            r = claim(nxt)


@njit(**PARALLEL_JIT)
def nearest_split(x, h, w, out, chunk, nt):
    """:func:`.resize.nearest_planes` ``chunk`` planes a claim."""
    n = x.shape[0]
    nxt = np.zeros(1, np.int64)
    for t in prange(nt):
        a = claim(nxt) * chunk
        while a < n:
            nearest_planes(x[a:a + chunk], h, w, out[a:a + chunk])
            a = claim(nxt) * chunk


@njit(**PARALLEL_JIT)
def bilinear_split(x, h0, h1, lh, w0, w1, lw, out, chunk, nt):
    """:func:`.resize.bilinear_planes` ``chunk`` planes a claim."""
    n = x.shape[0]
    nxt = np.zeros(1, np.int64)
    for t in prange(nt):
        a = claim(nxt) * chunk
        while a < n:
            bilinear_planes(x[a:a + chunk], h0, h1, lh, w0, w1, lw, out[a:a + chunk])
            a = claim(nxt) * chunk


@njit(**PARALLEL_JIT)
def linear_split(x, i0, i1, l1, out, chunk, nt):
    """:func:`.resize.linear_rows` ``chunk`` rows a claim."""
    n = x.shape[0]
    nxt = np.zeros(1, np.int64)
    for t in prange(nt):
        a = claim(nxt) * chunk
        while a < n:
            linear_rows(x[a:a + chunk], i0, i1, l1, out[a:a + chunk])
            a = claim(nxt) * chunk
