"""Softmax, layer norm and group norm rows, and resized planes, split over numba's OpenMP team: the
threads claim chunks of rows (planes) one at a time (:func:`.atomics.split`), each chunk the
one-thread kernel of :mod:`.rows` (:mod:`.resize`) on its slice, so a row's bits do not depend on
the thread (or the team) that ran it. Every split here is called ``split(nt, chunk, n, x, ...)``:
``n`` rows (planes) of ``x``, ``chunk`` a claim, then the one-thread kernel's arguments."""
from __future__ import annotations

from numba import njit

from .atomics import split
from .jit import EXACT_JIT
from .resize import bilinear_planes, linear_rows, nearest_planes
from .rows import group_norm_rows, layer_norm_row, softmax_row

#: rows a claim takes: bert_encoder's softmax rows of 128 take ~0.3 us each, a claim ~0.02 us
CHUNK = 16


@njit(**EXACT_JIT)
def _softmax(t, a, b, x, out, scale):
    for r in range(a, b):
        softmax_row(x[r], out[r], scale)


@njit(**EXACT_JIT)
def _layer_norm(t, a, b, x, w, bias, eps, out):
    for r in range(a, b):
        layer_norm_row(x[r], w, bias, eps, out[r])


@njit(**EXACT_JIT)
def _group_norm(t, a, b, x, w, bias, eps, out, code, slope):
    """:func:`.rows.group_norm_rows` (``x`` (N * G, C / G, S), ``w``, ``bias`` (G, C / G)) a row (a
    group of one sample) at a time."""
    groups = w.shape[0]
    for r in range(a, b):
        g = r % groups
        group_norm_rows(x[r:r + 1], w[g:g + 1], bias[g:g + 1], eps, out[r:r + 1], code, slope)


@njit(**EXACT_JIT)
def _nearest(t, a, b, x, h, w, out):
    nearest_planes(x[a:b], h, w, out[a:b])


@njit(**EXACT_JIT)
def _bilinear(t, a, b, x, h0, h1, lh, w0, w1, lw, out):
    bilinear_planes(x[a:b], h0, h1, lh, w0, w1, lw, out[a:b])


@njit(**EXACT_JIT)
def _linear(t, a, b, x, i0, i1, l1, out):
    linear_rows(x[a:b], i0, i1, l1, out[a:b])


softmax_split = split(_softmax, "softmax_split")
layer_norm_split = split(_layer_norm, "layer_norm_split")
group_norm_split = split(_group_norm, "group_norm_split")
nearest_split = split(_nearest, "nearest_split")
bilinear_split = split(_bilinear, "bilinear_split")
linear_split = split(_linear, "linear_split")
