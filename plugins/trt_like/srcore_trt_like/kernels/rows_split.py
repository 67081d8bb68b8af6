"""Softmax and layer norm rows split over numba's OpenMP team: the threads claim chunks of
:data:`CHUNK` rows one at a time (:mod:`.atomics`), each row the one-row kernel of :mod:`.rows`, so a
row's bits do not depend on the thread (or the team) that ran it."""
from __future__ import annotations

import numpy as np
from numba import njit, prange

from .atomics import claim
from .jit import PARALLEL_JIT
from .rows import layer_norm_row, softmax_row

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
