"""numba input/output transforms of Winograd F(2x2, 3x3) and F(4x4, 3x3), NCHW float32.

Layouts: the input transform writes ``v`` (n*n, C, T), the output transform reads
``m`` (n*n, O, T), n = m + 2 and T = N * th * tw tiles (tile index ``(b * th + ty) * tw + tx``),
so the GEMM between them is one ``np.matmul`` of (n*n, O, C) by (n*n, C, T).

Input: per (image, channel, tile row), the column transform runs over the whole row
(contiguous, vectorised) into a small row buffer whose left/right columns are the zero
padding; rows outside the image are a zero row. So padding costs nothing and no padded
copy of the input exists. Output: the row transform runs over all tiles of one (image,
channel) plane (contiguous), then per tile row the column transform into a row buffer,
and the epilogue (bias, residual, relu) in the same pass that writes ``out``; partial tiles
at the bottom/right are cut there.

Every kernel takes a channel range ``[c0, c1)`` (output channels for the output transform), so
a caller may split one call over threads; they are ``nogil``. Constants are float32 globals
(a float64 constant would promote the whole expression to float64 and halve the SIMD width).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .winograd_math import F2, F4
from . import epilogue
from .jit import JIT

_f = np.float32


def _symmetric_constants(mats):
    """(a, b, a^2, b^2, a^3, b^3, a^2 b^2, a^2 + b^2, a b^2, a^2 b) for F(4x4) points (0, +-a, +-b),
    after checking that ``BT``/``AT`` have the structure the kernels hard-code."""
    _, a, _, b, _ = (float(p) for p in mats.points)
    P, S = a * a * b * b, a * a + b * b
    bt = np.array([[P, 0, -S, 0, 1, 0], [0, -a * b * b, -b * b, a, 1, 0], [0, a * b * b, -b * b, -a, 1, 0],
                   [0, -a * a * b, -a * a, b, 1, 0], [0, a * a * b, -a * a, -b, 1, 0], [0, P, 0, -S, 0, 1]])
    at = np.array([[1, 1, 1, 1, 1, 0], [0, a, -a, b, -b, 0], [0, a * a, a * a, b * b, b * b, 0],
                   [0, a ** 3, -a ** 3, b ** 3, -b ** 3, 1]])
    assert np.allclose(mats.BT, bt, rtol=1e-15) and np.allclose(mats.AT, at, rtol=1e-15)
    return tuple(_f(v) for v in (a, b, a * a, b * b, a ** 3, b ** 3, P, S, a * b * b, a * a * b))


assert np.array_equal(F2.BT, [[-1, 0, 1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, -1, 0, 1]])
assert np.array_equal(F2.AT, [[1, 1, 1, 0], [0, 1, -1, 1]])
_A, _B, _A2, _B2, _A3, _B3, _P, _S, _AB2, _A2B = _symmetric_constants(F4)
_ZERO = _f(0.0)
# unsigned offsets: numba checks signed indices for negative wraparound, which stops vectorisation
_U1, _U2, _U3, _U4, _U5 = (np.uint64(i) for i in range(1, 6))


@njit(inline="always", **JIT)
def _bt6(d0, d1, d2, d3, d4, d5):
    """B^T of F(4x4) applied to six values."""
    e1 = d4 - _B2 * d2
    o1 = _A * d3 - _AB2 * d1
    e2 = d4 - _A2 * d2
    o2 = _B * d3 - _A2B * d1
    return _P * d0 - _S * d2 + d4, e1 + o1, e1 - o1, e2 + o2, e2 - o2, _P * d1 - _S * d3 + d5


@njit(inline="always", **JIT)
def _at6(m0, m1, m2, m3, m4, m5):
    """A^T of F(4x4) applied to six values."""
    pa, sa = m1 + m2, m1 - m2
    pb, sb = m3 + m4, m3 - m4
    return m0 + pa + pb, _A * sa + _B * sb, _A2 * pa + _B2 * pb, _A3 * sa + _B3 * sb + m5


@njit(inline="always", **JIT)
def _bt4(d0, d1, d2, d3):
    """B^T of F(2x2) applied to four values."""
    return d2 - d0, d1 + d2, d2 - d1, d3 - d1


@njit(**JIT)
def input_f4(x, pad_top, pad_left, th, tw, v, c0, c1):
    """``v[6k + l, c, t]`` = (B^T d B)[k, l] of the 6x6 input tile t of channel c, for c in [c0, c1)."""
    N, C, H, W = x.shape
    zrow = np.zeros(W, np.float32)
    rows = np.zeros((6, 4 * tw + 2), np.float32)     # columns outside [pad_left, pad_left + W) stay 0
    wr = min(W, 4 * tw + 2 - pad_left)                # input columns any tile reads
    for n in range(N):
        for c in range(c0, c1):
            for ty in range(th):
                h0 = 4 * ty - pad_top
                r0 = x[n, c, h0] if 0 <= h0 < H else zrow
                r1 = x[n, c, h0 + 1] if 0 <= h0 + 1 < H else zrow
                r2 = x[n, c, h0 + 2] if 0 <= h0 + 2 < H else zrow
                r3 = x[n, c, h0 + 3] if 0 <= h0 + 3 < H else zrow
                r4 = x[n, c, h0 + 4] if 0 <= h0 + 4 < H else zrow
                r5 = x[n, c, h0 + 5] if 0 <= h0 + 5 < H else zrow
                s0, s1, s2 = rows[0, pad_left:], rows[1, pad_left:], rows[2, pad_left:]
                s3, s4, s5 = rows[3, pad_left:], rows[4, pad_left:], rows[5, pad_left:]
                for w in range(wr):
                    s0[w], s1[w], s2[w], s3[w], s4[w], s5[w] = _bt6(r0[w], r1[w], r2[w], r3[w], r4[w], r5[w])
                t = (n * th + ty) * tw
                for k in range(6):
                    q = rows[k]
                    v0, v1, v2 = v[6 * k, c, t:t + tw], v[6 * k + 1, c, t:t + tw], v[6 * k + 2, c, t:t + tw]
                    v3, v4, v5 = v[6 * k + 3, c, t:t + tw], v[6 * k + 4, c, t:t + tw], v[6 * k + 5, c, t:t + tw]
                    for tx in range(tw):
                        b = _U4 * np.uint64(tx)
                        v0[tx], v1[tx], v2[tx], v3[tx], v4[tx], v5[tx] = _bt6(
                            q[b], q[b + _U1], q[b + _U2], q[b + _U3], q[b + _U4], q[b + _U5])


@njit(**JIT)
def output_f4(m, bias, res, has_res, relu, out, th, tw, o0, o1):
    """``out[:, o] = relu?(A^T M A + bias[o] (+ res[:, o]))`` for o in [o0, o1), cut to out's size."""
    N, O, Ho, Wo = out.shape
    ti = th * tw
    cols = np.empty((24, ti), np.float32)            # A^T applied down each tile column: (4 rows x 6, tiles)
    y = np.empty(4 * tw, np.float32)
    for n in range(N):
        t0 = n * ti
        for o in range(o0, o1):
            for l in range(6):
                m0, m1, m2 = m[l, o, t0:t0 + ti], m[6 + l, o, t0:t0 + ti], m[12 + l, o, t0:t0 + ti]
                m3, m4, m5 = m[18 + l, o, t0:t0 + ti], m[24 + l, o, t0:t0 + ti], m[30 + l, o, t0:t0 + ti]
                p0, p1, p2, p3 = cols[l], cols[6 + l], cols[12 + l], cols[18 + l]
                for t in range(ti):
                    p0[t], p1[t], p2[t], p3[t] = _at6(m0[t], m1[t], m2[t], m3[t], m4[t], m5[t])
            bo = bias[o]
            for ty in range(th):
                s = ty * tw
                for i in range(min(4, Ho - 4 * ty)):
                    q0, q1, q2 = cols[6 * i, s:s + tw], cols[6 * i + 1, s:s + tw], cols[6 * i + 2, s:s + tw]
                    q3, q4, q5 = cols[6 * i + 3, s:s + tw], cols[6 * i + 4, s:s + tw], cols[6 * i + 5, s:s + tw]
                    for tx in range(tw):
                        b = _U4 * np.uint64(tx)
                        y[b], y[b + _U1], y[b + _U2], y[b + _U3] = _at6(q0[tx], q1[tx], q2[tx], q3[tx], q4[tx], q5[tx])
                    h = 4 * ty + i
                    epilogue.row(y, out[n, o, h], res[n, o, h] if has_res else y, bo, has_res, relu, Wo)


@njit(**JIT)
def input_f2(x, pad_top, pad_left, th, tw, v, c0, c1):
    """``v[4k + l, c, t]`` = (B^T d B)[k, l] of the 4x4 input tile t of channel c, for c in [c0, c1)."""
    N, C, H, W = x.shape
    zrow = np.zeros(W, np.float32)
    rows = np.zeros((4, 2 * tw + 2), np.float32)
    wr = min(W, 2 * tw + 2 - pad_left)
    for n in range(N):
        for c in range(c0, c1):
            for ty in range(th):
                h0 = 2 * ty - pad_top
                r0 = x[n, c, h0] if 0 <= h0 < H else zrow
                r1 = x[n, c, h0 + 1] if 0 <= h0 + 1 < H else zrow
                r2 = x[n, c, h0 + 2] if 0 <= h0 + 2 < H else zrow
                r3 = x[n, c, h0 + 3] if 0 <= h0 + 3 < H else zrow
                s0, s1, s2, s3 = rows[0, pad_left:], rows[1, pad_left:], rows[2, pad_left:], rows[3, pad_left:]
                for w in range(wr):
                    s0[w], s1[w], s2[w], s3[w] = _bt4(r0[w], r1[w], r2[w], r3[w])
                t = (n * th + ty) * tw
                for k in range(4):
                    q = rows[k]
                    v0, v1 = v[4 * k, c, t:t + tw], v[4 * k + 1, c, t:t + tw]
                    v2, v3 = v[4 * k + 2, c, t:t + tw], v[4 * k + 3, c, t:t + tw]
                    for tx in range(tw):
                        b = _U2 * np.uint64(tx)
                        v0[tx], v1[tx], v2[tx], v3[tx] = _bt4(q[b], q[b + _U1], q[b + _U2], q[b + _U3])


@njit(**JIT)
def output_f2(m, bias, res, has_res, relu, out, th, tw, o0, o1):
    """F(2x2) output transform and epilogue for output channels [o0, o1) (see :func:`output_f4`)."""
    N, O, Ho, Wo = out.shape
    ti = th * tw
    cols = np.empty((8, ti), np.float32)
    y = np.empty(2 * tw, np.float32)
    for n in range(N):
        t0 = n * ti
        for o in range(o0, o1):
            for l in range(4):
                m0, m1 = m[l, o, t0:t0 + ti], m[4 + l, o, t0:t0 + ti]
                m2, m3 = m[8 + l, o, t0:t0 + ti], m[12 + l, o, t0:t0 + ti]
                p0, p1 = cols[l], cols[4 + l]
                for t in range(ti):
                    p0[t] = m0[t] + m1[t] + m2[t]
                    p1[t] = m1[t] - m2[t] + m3[t]
            bo = bias[o]
            for ty in range(th):
                s = ty * tw
                for i in range(min(2, Ho - 2 * ty)):
                    q0, q1 = cols[4 * i, s:s + tw], cols[4 * i + 1, s:s + tw]
                    q2, q3 = cols[4 * i + 2, s:s + tw], cols[4 * i + 3, s:s + tw]
                    for tx in range(tw):
                        b = _U2 * np.uint64(tx)
                        y[b] = q0[tx] + q1[tx] + q2[tx]
                        y[b + _U1] = q1[tx] - q2[tx] + q3[tx]
                    h = 2 * ty + i
                    epilogue.row(y, out[n, o, h], res[n, o, h] if has_res else y, bo, has_res, relu, Wo)
