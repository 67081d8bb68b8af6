"""numba kernels of the patchify tactics (a conv whose kernel equals its stride, unpadded: ConvNeXt's
4x4/4 stem, ViT's 16x16/16 patch embedding): the patches gathered as GEMM rows, and the whole
conv with its epilogue in one call for small layers."""
from __future__ import annotations

import numpy as np
from numba import njit

from .conv import epilogue
from .jit import JIT
from .simd import vadd, vfma, vload, vload_lanes, vsplat, vstore, vstore_lanes, vtranspose16, vzero

_ZERO = np.float32(0.0)


@njit(**JIT)
def gather(x, n, kh, kw, ho_n, wo_n, patches):
    """``patches[p, (c * kh + i) * kw + j] = x[n, c, ho * kh + i, wo * kw + j]`` with p = ho * wo_n + wo:
    one row of the GEMM per output pixel, a patch row's ``kw`` pixels one contiguous run."""
    C = x.shape[1]
    for ho in range(ho_n):
        for wo in range(wo_n):
            row = patches[ho * wo_n + wo]
            for c in range(C):
                for i in range(kh):
                    src = x[n, c, ho * kh + i, wo * kw:wo * kw + kw]
                    k0 = (c * kh + i) * kw
                    for j in range(kw):
                        row[k0 + j] = src[j]


@njit(**JIT)
def _product(wf, cf, of, O, K, P):
    """``of[o * P + p] = sum_k wf[o * K + k] * cf[k * P + p]``: 16 pixels by 4 output channels in
    registers (the vectorised row loop kept each output row in memory: 4.5 us for 16 x 48 x 64)."""
    for p0 in range(0, P, 16):
        m = min(16, P - p0)
        o = 0
        while o + 4 <= O:
            a0, a1, a2, a3 = vzero(), vzero(), vzero(), vzero()
            for k in range(K):
                c = vload_lanes(cf, k * P + p0, m)
                a0 = vfma(vsplat(wf, o * K + k), c, a0)
                a1 = vfma(vsplat(wf, (o + 1) * K + k), c, a1)
                a2 = vfma(vsplat(wf, (o + 2) * K + k), c, a2)
                a3 = vfma(vsplat(wf, (o + 3) * K + k), c, a3)
            vstore_lanes(of, o * P + p0, a0, m)
            vstore_lanes(of, (o + 1) * P + p0, a1, m)
            vstore_lanes(of, (o + 2) * P + p0, a2, m)
            vstore_lanes(of, (o + 3) * P + p0, a3, m)
            o += 4
        while o < O:
            a0 = vzero()
            for k in range(K):
                a0 = vfma(vsplat(wf, o * K + k), vload_lanes(cf, k * P + p0, m), a0)
            vstore_lanes(of, o * P + p0, a0, m)
            o += 1


@njit(**JIT)
def direct(x, w, bias, res, has_res, relu, act, slope, kh, kw, cols, out):
    """The whole conv, images in turn: the patches gathered as columns (``cols``: (C * kh * kw,
    Ho * Wo)), each output channel's plane accumulated row by row of them (a loop over pixels,
    vectorised), then the epilogue on the image. ``w`` is the weight as (O, C * kh * kw)."""
    N, C = x.shape[:2]
    _, O, Ho, Wo = out.shape
    P = Ho * Wo
    out3 = out.reshape(N, O, P)
    res3 = res.reshape(N, O, P)
    for n in range(N):
        for c in range(C):
            for i in range(kh):
                k0 = (c * kh + i) * kw
                for ho in range(Ho):
                    src = x[n, c, ho * kh + i]
                    for j in range(kw):
                        dst = cols[k0 + j, ho * Wo:(ho + 1) * Wo]
                        for wo in range(Wo):
                            dst[wo] = src[wo * kw + j]
        _product(w.ravel(), cols.ravel(), out3[n].ravel(), O, cols.shape[0], P)
        epilogue(out3, res3, has_res, bias, relu, act, slope, n, 0, P, 0, O)


@njit(**JIT)
def dots(w, src, base, n_c, n_i, seg, c_step, i_step, tile, out):
    """``out[o, p] = sum_k w[o, k] * patch_p[k]`` (``w``: (O, K), ``out``: (O, P), contiguous), where
    patch p is read from the flat ``src`` as ``n_c`` x ``n_i`` runs of ``seg`` (a multiple of 16)
    floats, run (c, i) at ``base[p] + c * c_step + i * i_step``, k = (c * n_i + i) * seg + j: the
    input's own rows when a patch row is whole vectors (ViT's 16 pixels), else gathered rows.
    Vectorised along K: each of ViT's 16 pixels x 32 channels is a dot product of 768, where the
    outer-product form (:func:`_product`) has one vector of pixels against a broadcast weight per
    FMA. Blocks of 4 channels x 4 pixels keep 16 accumulators in registers (8 loads per 16 FMAs);
    their lane sums come out of one 16 x 16 transpose through ``tile`` (256 floats). A last partial
    block overlaps the previous one (rewriting equal values)."""
    O, K = w.shape
    P = out.shape[1]
    wf, tf = w.ravel(), tile.ravel()
    for ob in range(0, O, 4):
        for pb in range(0, P, 4):
            o0, p0 = max(min(ob, O - 4), 0), max(min(pb, P - 4), 0)
            wr0, wr1, wr2, wr3 = (min(o0, O - 1) * K, min(o0 + 1, O - 1) * K, min(o0 + 2, O - 1) * K,
                                  min(o0 + 3, O - 1) * K)
            pr0, pr1, pr2, pr3 = (base[min(p0, P - 1)], base[min(p0 + 1, P - 1)], base[min(p0 + 2, P - 1)],
                                  base[min(p0 + 3, P - 1)])
            a00, a01, a02, a03 = vzero(), vzero(), vzero(), vzero()
            a10, a11, a12, a13 = vzero(), vzero(), vzero(), vzero()
            a20, a21, a22, a23 = vzero(), vzero(), vzero(), vzero()
            a30, a31, a32, a33 = vzero(), vzero(), vzero(), vzero()
            for c in range(n_c):
                for i in range(n_i):
                    for j in range(0, seg, 16):
                        q, k = c * c_step + i * i_step + j, (c * n_i + i) * seg + j
                        c0, c1 = vload(src, pr0 + q), vload(src, pr1 + q)
                        c2, c3 = vload(src, pr2 + q), vload(src, pr3 + q)
                        v = vload(wf, wr0 + k)
                        a00, a01, a02, a03 = vfma(v, c0, a00), vfma(v, c1, a01), vfma(v, c2, a02), vfma(v, c3, a03)
                        v = vload(wf, wr1 + k)
                        a10, a11, a12, a13 = vfma(v, c0, a10), vfma(v, c1, a11), vfma(v, c2, a12), vfma(v, c3, a13)
                        v = vload(wf, wr2 + k)
                        a20, a21, a22, a23 = vfma(v, c0, a20), vfma(v, c1, a21), vfma(v, c2, a22), vfma(v, c3, a23)
                        v = vload(wf, wr3 + k)
                        a30, a31, a32, a33 = vfma(v, c0, a30), vfma(v, c1, a31), vfma(v, c2, a32), vfma(v, c3, a33)
            vstore(tf, 0, a00), vstore(tf, 16, a01), vstore(tf, 32, a02), vstore(tf, 48, a03)
            vstore(tf, 64, a10), vstore(tf, 80, a11), vstore(tf, 96, a12), vstore(tf, 112, a13)
            vstore(tf, 128, a20), vstore(tf, 144, a21), vstore(tf, 160, a22), vstore(tf, 176, a23)
            vstore(tf, 192, a30), vstore(tf, 208, a31), vstore(tf, 224, a32), vstore(tf, 240, a33)
            t = vtranspose16(tf, 0, 16)   # t[c][r] = lane c of accumulator r
            s = vadd(vadd(vadd(vadd(t[0], t[1]), vadd(t[2], t[3])), vadd(vadd(t[4], t[5]), vadd(t[6], t[7]))),
                     vadd(vadd(vadd(t[8], t[9]), vadd(t[10], t[11])), vadd(vadd(t[12], t[13]), vadd(t[14], t[15]))))
            vstore(tf, 0, s)
            for a in range(min(4, O)):
                for b in range(min(4, P)):
                    out[o0 + a, p0 + b] = tf[4 * a + b]


@njit(**JIT)
def conv_dots(x, w, bias, res, has_res, relu, act, slope, kh, kw, patches, tile, out):
    """The whole conv, images in turn: :func:`dots` on the input in place when ``kw`` is a multiple
    of 16 (``w``: (O, C * kh * kw)), else on the patches gathered by :func:`gather` into ``patches``
    ((Ho * Wo, Kp), the columns from C * kh * kw on zeroed to match ``w``'s padding: (O, Kp)); then
    the epilogue."""
    N, C, H, W = x.shape
    _, O, Ho, Wo = out.shape
    P = Ho * Wo
    K = C * kh * kw
    Kp = w.shape[1]
    out3 = out.reshape(N, O, P)
    res3 = res.reshape(N, O, P)
    base = np.empty(P, np.int64)
    in_place = kw % 16 == 0
    if not in_place:
        patches[:, K:] = _ZERO
        for p in range(P):
            base[p] = p * Kp
    xf, pf = x.ravel(), patches.ravel()
    for n in range(N):
        if in_place:
            for p in range(P):
                base[p] = ((n * C * H) + (p // Wo) * kh) * W + (p % Wo) * kw
            dots(w, xf, base, C, kh, kw, H * W, W, tile, out3[n])
        else:
            gather(x, n, kh, kw, Ho, Wo, patches)
            dots(w, pf, base, 1, 1, Kp, 0, 0, tile, out3[n])
        epilogue(out3, res3, has_res, bias, relu, act, slope, n, 0, P, 0, O)
