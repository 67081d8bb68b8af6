"""A packed single-precision GEMM in numba with explicit AVX-512 vectors (:mod:`.simd`).

``C^T = (W @ X)^T`` for a constant weight ``W`` (M x K) packed once at build time and an
operand ``X`` (K x N) that the caller writes straight into the packed layout (the im2col
gather, the Winograd input transform):

* weights: ``(MB, K, 64)``, row block ``ob`` holds rows ``64 ob .. 64 ob + 63`` (zero rows pad M
  up to a multiple of 64); ``wp[ob, k, r] = W[64 ob + r, k]``;
* operand: ``(NB, K, 6)``, column block ``pb`` holds columns ``6 pb .. 6 pb + 5``
  (``xp[pb, k, j] = X[k, 6 pb + j]``), padding columns zero (or anything: their results are
  written to padding rows of ``C^T`` that nobody reads);
* result: ``C^T`` as ``(NB * 6, MB * 64)``, pixel-major (NHWC-like): row ``p`` holds every
  output channel of column ``p``.

The micro-kernel keeps a 64 x 6 tile of C in 24 zmm accumulators; per k it loads 4 weight
vectors and broadcasts 6 operand values (10 loads for 24 FMAs). Nothing is packed per call:
OpenBLAS re-packs the weight on every call, which for resnet's 512-channel layers (9.4 MB of
weights, N = 49) costs about as much as the FMAs. The K loop is blocked so a weight
block stays in L1/L2 while every column block uses it, and the weights are read from memory
once per call, in order.

Every kernel takes a row-block range and a column-block range, so callers can split a GEMM
over threads (see ``parallel.py``). ``nogil``, ``cache=True``.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .jit import JIT, plain_args
from .simd import prefetch, vadd, vfma, vload, vsplat, vstore, vzero

MR, NR = 64, 6          # micro-tile: rows (4 vectors of 16) x columns
KC_MAX = 160            # K block at most: 64 x 160 floats of weights = 40 KiB, in L1 beside the operand's 6 x 160


def pack_weight(w2d: np.ndarray) -> np.ndarray:
    """(M, K) -> (ceil(M / 64), K, 64) float32, zero rows appended."""
    M, K = w2d.shape
    mb = -(-M // MR)
    wp = np.zeros((mb * MR, K), np.float32)
    wp[:M] = w2d
    return np.ascontiguousarray(wp.reshape(mb, MR, K).transpose(0, 2, 1))


def blocks(n: int) -> int:
    """Column blocks of :data:`NR` for ``n`` columns."""
    return -(-n // NR)


@njit(**JIT)
def _tile_u(wf, wb, xf, xb, ldb, cf, cb, ldc, k0, k1, accumulate):
    """C^T[6 x 64 tile at cb] (+)= sum over k in [k0, k1) of x[xb + ldb k + j] * w[wb + 64k + r]
    (a packed operand has ldb = 6)."""
    a00 = vzero(); a01 = vzero(); a02 = vzero(); a03 = vzero()      # noqa: E702
    a10 = vzero(); a11 = vzero(); a12 = vzero(); a13 = vzero()      # noqa: E702
    a20 = vzero(); a21 = vzero(); a22 = vzero(); a23 = vzero()      # noqa: E702
    a30 = vzero(); a31 = vzero(); a32 = vzero(); a33 = vzero()      # noqa: E702
    a40 = vzero(); a41 = vzero(); a42 = vzero(); a43 = vzero()      # noqa: E702
    a50 = vzero(); a51 = vzero(); a52 = vzero(); a53 = vzero()      # noqa: E702
    for k in range(k0, k1):
        w = wb + 64 * k
        w0 = vload(wf, w); w1 = vload(wf, w + 16); w2 = vload(wf, w + 32); w3 = vload(wf, w + 48)  # noqa: E702
        x = xb + ldb * k
        b = vsplat(xf, x)
        a00 = vfma(w0, b, a00); a01 = vfma(w1, b, a01); a02 = vfma(w2, b, a02); a03 = vfma(w3, b, a03)  # noqa: E702
        b = vsplat(xf, x + 1)
        a10 = vfma(w0, b, a10); a11 = vfma(w1, b, a11); a12 = vfma(w2, b, a12); a13 = vfma(w3, b, a13)  # noqa: E702
        b = vsplat(xf, x + 2)
        a20 = vfma(w0, b, a20); a21 = vfma(w1, b, a21); a22 = vfma(w2, b, a22); a23 = vfma(w3, b, a23)  # noqa: E702
        b = vsplat(xf, x + 3)
        a30 = vfma(w0, b, a30); a31 = vfma(w1, b, a31); a32 = vfma(w2, b, a32); a33 = vfma(w3, b, a33)  # noqa: E702
        b = vsplat(xf, x + 4)
        a40 = vfma(w0, b, a40); a41 = vfma(w1, b, a41); a42 = vfma(w2, b, a42); a43 = vfma(w3, b, a43)  # noqa: E702
        b = vsplat(xf, x + 5)
        a50 = vfma(w0, b, a50); a51 = vfma(w1, b, a51); a52 = vfma(w2, b, a52); a53 = vfma(w3, b, a53)  # noqa: E702
    if accumulate:
        a00 = vadd(a00, vload(cf, cb)); a01 = vadd(a01, vload(cf, cb + 16))                      # noqa: E702
        a02 = vadd(a02, vload(cf, cb + 32)); a03 = vadd(a03, vload(cf, cb + 48))                 # noqa: E702
        c = cb + ldc
        a10 = vadd(a10, vload(cf, c)); a11 = vadd(a11, vload(cf, c + 16))                        # noqa: E702
        a12 = vadd(a12, vload(cf, c + 32)); a13 = vadd(a13, vload(cf, c + 48))                   # noqa: E702
        c += ldc
        a20 = vadd(a20, vload(cf, c)); a21 = vadd(a21, vload(cf, c + 16))                        # noqa: E702
        a22 = vadd(a22, vload(cf, c + 32)); a23 = vadd(a23, vload(cf, c + 48))                   # noqa: E702
        c += ldc
        a30 = vadd(a30, vload(cf, c)); a31 = vadd(a31, vload(cf, c + 16))                        # noqa: E702
        a32 = vadd(a32, vload(cf, c + 32)); a33 = vadd(a33, vload(cf, c + 48))                   # noqa: E702
        c += ldc
        a40 = vadd(a40, vload(cf, c)); a41 = vadd(a41, vload(cf, c + 16))                        # noqa: E702
        a42 = vadd(a42, vload(cf, c + 32)); a43 = vadd(a43, vload(cf, c + 48))                   # noqa: E702
        c += ldc
        a50 = vadd(a50, vload(cf, c)); a51 = vadd(a51, vload(cf, c + 16))                        # noqa: E702
        a52 = vadd(a52, vload(cf, c + 32)); a53 = vadd(a53, vload(cf, c + 48))                   # noqa: E702
    c = cb
    vstore(cf, c, a00); vstore(cf, c + 16, a01); vstore(cf, c + 32, a02); vstore(cf, c + 48, a03)  # noqa: E702
    c += ldc
    vstore(cf, c, a10); vstore(cf, c + 16, a11); vstore(cf, c + 32, a12); vstore(cf, c + 48, a13)  # noqa: E702
    c += ldc
    vstore(cf, c, a20); vstore(cf, c + 16, a21); vstore(cf, c + 32, a22); vstore(cf, c + 48, a23)  # noqa: E702
    c += ldc
    vstore(cf, c, a30); vstore(cf, c + 16, a31); vstore(cf, c + 32, a32); vstore(cf, c + 48, a33)  # noqa: E702
    c += ldc
    vstore(cf, c, a40); vstore(cf, c + 16, a41); vstore(cf, c + 32, a42); vstore(cf, c + 48, a43)  # noqa: E702
    c += ldc
    vstore(cf, c, a50); vstore(cf, c + 16, a51); vstore(cf, c + 32, a52); vstore(cf, c + 48, a53)  # noqa: E702


@njit(inline="always", **JIT)
def _ahead(wb, k0, k1, kc, tiles):
    """Weight lines to prefetch per tile of block [k0, k1), and where: the block after the next (the
    weights are one stream, ob-major then k). Without it, a weight that is not in cache (resnet's
    512-channel layers in a network run: 9.4 MB each) arrives at the speed of the first tile's
    loads: 2.0-2.3 ms vs 1.84 hot; with it 1.74-1.88."""
    return (64 * (k1 - k0) // 16 + tiles - 1) // tiles, wb + 64 * (k1 + kc)


@njit(inline="always", **JIT)
def _prefetch_lines(wf, a, lines, end):
    for i in range(lines):
        if a + 16 * i < end:
            prefetch(wf, a + 16 * i)


@plain_args
@njit(**JIT)
def gemm(wf, w0, xf, x0, cf, c0, K, MB, ob0, ob1, pb0, pb1, ldc):
    """Row blocks [ob0, ob1) x column blocks [pb0, pb1) of ``C^T = (W @ X)^T``.

    ``wf``, ``xf``, ``cf`` are flat float32 arrays; the packed weight starts at ``wf[w0]``, the
    packed operand at ``xf[x0]``, C^T (leading dimension ``ldc`` >= 64 MB) at ``cf[c0]``. K is cut
    into equal blocks of at most :data:`KC_MAX`.
    """
    nk = (K + KC_MAX - 1) // KC_MAX
    kc = (K + nk - 1) // nk
    end = w0 + ob1 * K * 64
    for ob in range(ob0, ob1):
        wb = w0 + ob * K * 64
        for k0 in range(0, K, kc):
            k1 = min(K, k0 + kc)
            lines, ahead = _ahead(wb, k0, k1, kc, pb1 - pb0)
            for pb in range(pb0, pb1):
                _prefetch_lines(wf, ahead + 16 * lines * (pb - pb0), lines, end)
                _tile_u(wf, wb, xf, x0 + pb * K * 6, 6, cf, c0 + pb * 6 * ldc + ob * 64, ldc, k0, k1, k0 > 0)


@plain_args
@njit(**JIT)
def gemm_u(wf, w0, xf, x0, ldb, cf, c0, K, MB, ob0, ob1, pb0, pb1, ldc):
    """:func:`gemm` on an unpacked operand X (K x N) row-major from ``xf[x0]`` with leading dimension
    ``ldb``, column block ``pb`` being columns 6 pb .. 6 pb + 5 (columns past N are padding, their
    results unread), into C^T with leading dimension ``ldc`` (>= 64 MB). For small operands
    (Winograd's per-point (C x tiles) matrices) this is within ~15 % of the packed layout and lets
    the producer write whole rows."""
    nk = (K + KC_MAX - 1) // KC_MAX
    kc = (K + nk - 1) // nk
    end = w0 + ob1 * K * 64
    for ob in range(ob0, ob1):
        wb = w0 + ob * K * 64
        for k0 in range(0, K, kc):
            k1 = min(K, k0 + kc)
            lines, ahead = _ahead(wb, k0, k1, kc, pb1 - pb0)
            for pb in range(pb0, pb1):
                _prefetch_lines(wf, ahead + 16 * lines * (pb - pb0), lines, end)
                _tile_u(wf, wb, xf, x0 + pb * 6, ldb, cf, c0 + pb * 6 * ldc + ob * 64, ldc, k0, k1, k0 > 0)
