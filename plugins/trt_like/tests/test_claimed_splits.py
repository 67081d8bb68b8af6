"""Every split of kernels/rows_split.py (one claim loop, :func:`srcore_trt_like.kernels.atomics.split`,
around each one-thread kernel) called directly on numba's team of 1 and of 2 threads: torch's
result, and the bits of the one-thread kernel on the whole array, whatever the chunk (one that does
not divide the rows, one larger than all of them). Parallel kernels of their own: ``full``."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from srcore_trt_like.kernels import resize, rows, rows_split, threads
from srcore_trt_like.kernels.activation import CODES
from srcore_trt_like.kernels.atomics import split
from srcore_trt_like.tactics.data import linear_table, nearest_table

pytestmark = pytest.mark.full
F = torch.nn.functional
f32 = np.float32
T = torch.from_numpy
RNG = np.random.default_rng(18)


def _randn(*shape):
    return (RNG.standard_normal(shape) * 3).astype(f32)


def _softmax():
    x = _randn(37, 50)
    return rows_split.softmax_split, rows.softmax_rows, (x,), (f32(1.0),), torch.softmax(T(x), -1)


def _layer_norm():
    x, w, b = _randn(37, 50), _randn(50), _randn(50)
    want = F.layer_norm(T(x), (50,), T(w), T(b), 1e-5)
    return rows_split.layer_norm_split, rows.layer_norm_rows, (x, w, b, f32(1e-5)), (), want


def _group_norm():
    N, G, C, S = 3, 4, 12, 40                 # rows (N * G, C / G, S), affine (G, C / G)
    x, w, b = _randn(N, C, S), _randn(C), _randn(C)
    want = F.group_norm(T(x), G, T(w), T(b), 1e-5)
    args = (x.reshape(N * G, C // G, S), w.reshape(G, C // G), b.reshape(G, C // G), f32(1e-5))
    return (rows_split.group_norm_split, rows.group_norm_rows, args, (CODES["none"], f32(0.01)),
            want.reshape(N * G, C // G, S))


def _nearest():
    x = _randn(13, 9, 7)
    h, w = nearest_table(9, 20, None), nearest_table(7, 15, None)
    want = F.interpolate(T(x)[None], size=(20, 15), mode="nearest")[0]
    return rows_split.nearest_split, resize.nearest_planes, (x, h, w), (), want


def _bilinear():
    x = _randn(13, 9, 7)
    (h0, h1, lh), (w0, w1, lw) = linear_table(9, 20, None, False), linear_table(7, 15, None, False)
    want = F.interpolate(T(x)[None], size=(20, 15), mode="bilinear", align_corners=False)[0]
    return rows_split.bilinear_split, resize.bilinear_planes, (x, h0, h1, lh, w0, w1, lw), (), want


def _linear():
    x = _randn(37, 11)
    i0, i1, l1 = linear_table(11, 24, None, True)
    want = F.interpolate(T(x)[None], size=24, mode="linear", align_corners=True)[0]
    return rows_split.linear_split, resize.linear_rows, (x, i0, i1, l1), (), want


@pytest.mark.parametrize("case", [_softmax, _layer_norm, _group_norm, _nearest, _bilinear, _linear])
@pytest.mark.parametrize("chunk", [1, 5, 64])
def test_each_split_gives_torch_and_the_one_thread_bits_on_one_and_two_threads(case, chunk):
    kernel, one, ins, extra, want = case()           # kernel(nt, chunk, n, *ins, out, *extra)
    out_shape = tuple(want.shape)
    alone = np.full(out_shape, np.nan, f32)
    one(*ins, alone, *extra)
    np.testing.assert_allclose(alone, want.numpy(), rtol=1e-5, atol=1e-5)
    for team in (1, 2):
        threads.use(team)
        out = np.full(out_shape, np.nan, f32)
        kernel(2, chunk, ins[0].shape[0], *ins, out, *extra)
        np.testing.assert_array_equal(out, alone)


def test_split_names_are_unique():
    """numba caches a split under its name: a second split of one name would load the first's code."""
    with pytest.raises(ValueError, match="softmax_split"):
        split(rows_split._softmax, "softmax_split")
