"""Winograd F(2x2, 3x3) and F(4x4, 3x3) for 3x3, stride-1, undilated, ungrouped 2-D convolutions.

Each m x m output tile comes from an n x n input tile (n = m + 2):
``Y = A^T [(G g G^T) . (B^T d B)] A``. Every stage is a BLAS GEMM, so no numpy pass has a
short strided inner loop (the old F(2x2) spent ~60% of its time in such transform passes):

1. pad the input (``fill_padded``), then one ``as_strided`` copy gathers the overlapping
   tiles into ``D`` (n*n, C, N*tiles);
2. input transform: ``U = kron(B^T, B^T) @ D``, one (n*n x n*n) GEMM;
3. ``M[k] = Gw[k] @ U[k]`` for the n*n points: one batched (O x C) @ (C x N*tiles) matmul;
   the bias is added to the one point whose output-transform column is all ones;
4. output transform: ``Y = kron(A^T, A^T) @ M``, one (m*m x n*n) GEMM;
5. m strided copies (one per tile column) scatter the m x m tiles of ``Y`` into the NCHW
   output (via a crop buffer when the output is not a multiple of m).

F(4x4) does 4x fewer multiplies than direct convolution in its main GEMM (F(2x2): 2.25x),
at the price of bigger transforms and float32 error. Its points are 0, 1, -1, 2, -1/2 (and
infinity) rather than the usual 0, +-1, +-2: on resnet_small's real activations that
measured max|err|/max|y| <= 1.7e-6 per layer instead of 5.6e-6 (F(2x2) <= 5.7e-7, im2col
<= 7.7e-7, torch's float32 conv <= 5.9e-7; all against float64). The weight transform
``G g G^T`` is done once, in float64, when the size is first seen (at load for a static shape).
Which m (or im2col) a shape gets is :func:`choose` (measured crossovers).
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
from numpy.lib.stride_tricks import as_strided

from . import parallel as _par
from .workspace import fill_padded

# (B^T, G, A^T) per output tile size m. F(2x2): points 0, 1, -1. F(4x4): points 0, 1, -1, 2, -1/2;
# B^T and A^T entries are multiples of 1/8 (exact in binary), G's thirds and fifteenths only
# ever meet the weights, in float64.
_MATRICES = {
    2: ([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]],
        [[1, 0, 0], [1 / 2, 1 / 2, 1 / 2], [1 / 2, -1 / 2, 1 / 2], [0, 0, 1]],
        [[1, 1, 1, 0], [0, 1, -1, -1]]),
    4: ([[1, 3 / 2, -2, -3 / 2, 1, 0], [0, -1, -5 / 2, -1 / 2, 1, 0], [0, 1, 1 / 2, -5 / 2, 1, 0],
         [0, -1 / 2, -1, 1 / 2, 1, 0], [0, 2, -1, -2, 1, 0], [0, 1, 3 / 2, -2, -3 / 2, 1]],
        [[1, 0, 0], [-1 / 3, -1 / 3, -1 / 3], [1 / 3, -1 / 3, 1 / 3], [1 / 15, 2 / 15, 4 / 15],
         [-16 / 15, 8 / 15, -4 / 15], [0, 0, 1]],
        [[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -1 / 2, 0], [0, 1, 1, 4, 1 / 4, 0], [0, 1, -1, 8, -1 / 8, 1]]),
}
# the transformed weight's first dim (n*n points) tells the tile size
_TILE = {16: 2, 36: 4}
# point 1 (index 1 in both sets) has an all-ones A^T column: a bias added to M[n + 1] reaches
# every output of the tile exactly once
_BIAS_POINT = 1

_G = np.array(_MATRICES[2][1])   # F(2x2)'s G (kept for the weight-transform test)


def matrices(m):
    """(B^T, G, A^T) of F(m x m, 3x3) as float64 arrays."""
    return tuple(np.array(a, dtype=np.float64) for a in _MATRICES[m])


@lru_cache(maxsize=None)
def _gemm_matrices(m, dtype):
    """``kron(B^T, B^T)`` (n*n, n*n) and ``kron(A^T, A^T)`` (m*m, n*n) in ``dtype``, C-contiguous."""
    bt, _, at = matrices(m)
    kb, ka = np.kron(bt, bt).astype(dtype), np.kron(at, at).astype(dtype)
    kb.setflags(write=False)
    ka.setflags(write=False)
    return kb, ka


def transform_weight(w, m=2):
    """(O, C, 3, 3) -> (n*n, O, C) C-contiguous ``G w G^T``, point (r, s) at index n*r + s.

    One (n*n, 9) x (9, O*C) matmul in float64 with ``kron(G, G)``, cast once to ``w.dtype``."""
    O, C = w.shape[:2]
    g = matrices(m)[1]
    u = np.kron(g, g) @ w.reshape(O * C, 9).astype(np.float64).T          # (n*n, O*C)
    return u.astype(w.dtype).reshape((m + 2) ** 2, O, C)


def applies(w, stride, pads, dilation, groups) -> bool:
    """Whether the Winograd kernel computes this conv (2-D 3x3, stride 1, dilation 1, groups 1)."""
    return (w.ndim == 4 and tuple(w.shape[2:]) == (3, 3) and groups == 1
            and tuple(stride) == (1, 1) and tuple(dilation) == (1, 1) and len(pads) == 2)


# Crossovers, measured on resnet_small's layers with cold caches (the model reads ~46 MB of
# weights per call, so a layer's weights come from memory, not cache; the transformed weight is
# n*n/9 times the plain one): the n*n GEMMs need enough tiles to be compute-bound. 1 thread,
# ms, im2col / F(2x2) / F(4x4) (torch): 64ch 56x56 3.00 / 3.14 / 2.12 (1.93); 128ch 28x28
# 2.53 / 2.26 / 1.77 (1.88); 256ch 14x14 2.74 / 2.38 / 2.71 (2.26); 512ch 7x7 3.53 / 4.16 /
# 6.86 (3.77). In the whole model, F(4x4) at 14x14 cost +0.9 ms and F(2x2) at 7x7 +2.4 ms.
F4_MIN_TILES = 30
F2_MIN_TILES = 20
# fewer input or output channels than this: im2col. Winograd saves on the products (K = C) but
# its transforms cost per channel (1 thread, ms, im2col / F(2x2) / F(4x4): 360 samples 1 -> 16ch
# 8x8 0.38 / 2.92 / 2.36; 16 -> 32ch 4x4 2.04 / 2.09 / 1.17; 16ch 56x56 0.36 / 0.34 / 0.29;
# 8ch 56x56 0.15 / 0.16 / 0.14)
MIN_CHANNELS = 16
# F(4x4) only where its tiles waste little (14x14 is 16 tiles of 16x16): its GEMM work must be
# at most this fraction of F(2x2)'s (0.5625 when both tile the output exactly)
F4_MAX_WORK_VS_F2 = 0.65


def all_finite(x) -> bool:
    """Whether ``x`` holds no NaN and no inf; Winograd is only used then.

    The transforms mix every value of an input tile into every output of it, so one NaN or
    inf would turn a whole tile of outputs NaN where a direct conv keeps them finite (or
    inf). ``max - min`` is non-finite exactly when ``x`` has a NaN or an inf (or finite
    extremes whose difference overflows, which only sends the conv to im2col): ~18 us on
    an 800 KB activation, against ~35 us for a sum.
    """
    if x.size == 0:
        return True
    with np.errstate(over="ignore", invalid="ignore"):
        return bool(np.isfinite(x.max() - x.min()))


def choose(N, C, O, Ho, Wo):
    """The algorithm for a 3x3 stride-1 conv of ``N`` samples, ``C`` -> ``O`` channels, with
    ``Ho`` x ``Wo`` outputs: 4 (F(4x4)), 2 (F(2x2)) or 0 (im2col). The same at 2 BLAS threads: the small GEMMs scale
    less than im2col's one big GEMM, but resnet_small still measured 27.0 ms with these choices
    against 29.2 ms with im2col for 56x56 and 30.1 ms with im2col from 28x28."""
    if min(C, O) < MIN_CHANNELS:
        return 0
    t4 = N * -(-Ho // 4) * -(-Wo // 4)
    t2 = N * -(-Ho // 2) * -(-Wo // 2)
    if t4 >= F4_MIN_TILES and 36 * t4 <= F4_MAX_WORK_VS_F2 * 16 * t2:
        return 4
    return 2 if t2 >= F2_MIN_TILES else 0


def conv3x3(x, gw, bias, pads, out, ws, threads=1):
    """The conv of ``x`` (N, C, H, W) with a transformed weight ``gw`` (n*n, O, C) into ``out``
    (C-contiguous, (N, O, Ho, Wo)); the tile size follows from ``gw``.

    ``threads > 1``: three phases on :mod:`.parallel`'s pool, each in ``threads`` parts: padding
    + gather + input transform by input channel, the products by point (whole GEMMs: splitting
    each small GEMM by output channel scaled worse), output transform + scatter by output channel.
    """
    n2, O, C = gw.shape
    m = _TILE[n2]
    n = m + 2
    N, _, H, W = x.shape
    (pt, pb), (pl, pr) = pads
    Ho, Wo = H + pt + pb - 2, W + pl + pr - 2
    th, tw = -(-Ho // m), -(-Wo // m)
    Hp, Wp = m * th + 2, m * tw + 2
    T = N * th * tw
    dt = x.dtype
    kb, ka = _gemm_matrices(m, dt)
    # padded with extra zero rows/cols at the bottom/right so whole tiles cover an odd output
    xpads = [(pt, Hp - H - pt), (pl, Wp - W - pl)]
    xp = ws.get(None, "pad", (N, C, Hp, Wp), dt)
    s = xp.strides
    tiles = as_strided(xp, (n, n, C, N, th, tw), (s[2], s[3], s[1], s[0], m * s[2], m * s[3]), writeable=False)
    d = ws.get(None, "wg_a", (n, n, C, N, th, tw), dt)
    u = ws.get(None, "wg_u", (n2, C, T), dt)
    d2, u2 = d.reshape(n2, C * T), u.reshape(n2, C * T)

    def transform_input(c0, c1):
        fill_padded(xp[:, c0:c1], x[:, c0:c1], xpads)
        np.copyto(d[:, :, c0:c1], tiles[:, :, c0:c1])
        np.matmul(kb, d2[:, c0 * T:c1 * T], out=u2[:, c0 * T:c1 * T])

    even = Ho == m * th and Wo == m * tw
    full = out if even else ws.get(None, "wg_full", (N, O, m * th, m * tw), dt)
    # (a, b, O, N, th, tw) view of the output tiles: element (a, b) of tile (i, j) of (n, o)
    scatter = full.reshape(N, O, th, m, tw, m).transpose(3, 5, 1, 0, 2, 4)
    mm = y = None   # M shares D's buffer: taken once the input transform is done

    def products(k0, k1):
        np.matmul(gw[k0:k1], u[k0:k1], out=mm[k0:k1])
        kbias = (n + 1) * _BIAS_POINT
        if bias is not None and k0 <= kbias < k1:
            np.add(mm[kbias], bias[:, None], out=mm[kbias])

    def transform_output(o0, o1):
        np.matmul(ka, mm.reshape(n2, O * T)[:, o0 * T:o1 * T], out=y.reshape(m * m, O * T)[:, o0 * T:o1 * T])
        # one copy per tile column: numpy then loops along a row of tiles, not over the m
        # elements of a tile row (64ch 56x56: 166 -> 88 us)
        for b in range(m):
            np.copyto(scatter[:, b, o0:o1], y[:, b, o0:o1])
        if not even:
            out[:, o0:o1] = full[:, o0:o1, :Ho, :Wo]

    split = threads > 1 and C >= 2 * threads and O >= 2 * threads
    if split:
        cchunks, kchunks, ochunks = _par.split(C, threads), _par.split(n2, threads), _par.split(O, threads)
        _par.run_parts(lambda i: transform_input(*cchunks[i]), threads, threads)
    else:
        transform_input(0, C)
    mm = ws.get(None, "wg_a", (n2, O, T), dt)
    y = ws.get(None, "wg_y", (m, m, O, N, th, tw), dt)
    if split:
        _par.run_parts(lambda i: products(*kchunks[i]), threads, threads)
        _par.run_parts(lambda i: transform_output(*ochunks[i]), threads, threads)
    else:
        products(0, n2)
        transform_output(0, O)
    return out
