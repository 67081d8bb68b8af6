"""Float32 transposed convolution of any spatial rank (1-3), compiled (numba), shared by the backends
(``srcore.plugin.conv_transpose``: the cpu plugin's kernel and trt_like's ``conv_transpose`` layer).

Two forms, every rank run as the 3-D case with unit leading dims:

- ``gemm``: the weight's (O/g * taps, C/g) columns times the input's pixels on numpy's BLAS (the
  one srcore's thread settings govern), then :func:`col2im3` adds each (output channel, tap) row
  into the cropped output at the stride over the bias. Wins where C/g is large (a DCGAN
  generator's 512 -> 256).
- ``fused``: the same in one compiled call, the product as vectorized loops (:func:`fused_col2im3`:
  no Python call per (sample, group) matrix; numba's own ``np.dot`` would call scipy's OpenBLAS, a
  second thread pool, and cost seconds of compilation).
- ``direct``: :func:`direct3`, one compiled call with no GEMM and no column buffer: each input
  channel's plane, scaled by a tap's weight, added into the output at the stride. On the small
  layers of U-Nets, audio decoders and the fifth held-out zoo (2-6 channels a group) the
  ``gemm`` form's N * groups BLAS calls and its column buffer cost more than the arithmetic.
- ``phase``: :func:`phase3`, the stride-phase form: each of the ``stride^d`` output phases a direct
  (not transposed) conv of the zero-padded input with the kernel sub-sampled to the phase's taps,
  each tap one flat multiply-add over the phase's rows, the phase written once at the stride (no
  col2im, no read-modify-write at the stride). Wins on dilated, grouped stride-2 layers whose
  col2im adds 12-wide rows at the stride (the fifth held-out zoo's ``t2``: 8.3 vs 9.8 us fused).

:class:`ConvTranspose` holds a layer's prepared weight; :meth:`ConvTranspose.pick` times the forms on
the machine it runs on (never chosen by CPU vendor).
"""
from __future__ import annotations

import math

import numba
import numpy as np

from ..errors import KernelError

#: releases the GIL, cached on disk, IEEE division, FMA contraction only
JIT = dict(nogil=True, cache=True, error_model="numpy", fastmath={"contract"})

_HYPER = ", int64" * 12
COL2IM_SIG = "void(float32[:, :, ::1], float32[::1], float32[:, :, :, :, ::1], int64, int64, int64" + _HYPER + ")"
FUSED_SIG = ("void(float32[:, :, :, :, ::1], float32[:, :, ::1], float32[::1], float32[:, :, :, :, ::1], "
             "float32[:, :, :, ::1], int64" + _HYPER + ")")
DIRECT_SIG = ("void(float32[:, :, :, :, ::1], float32[:, :, :, :, ::1], float32[::1], float32[:, :, :, :, ::1], int64"
              + _HYPER + ")")
FORMS = ("gemm", "fused", "direct", "phase")
#: the forms without a column scratch (``cols`` unused)
NO_COLS = ("direct", "phase")
#: ``fused``, ``direct`` and ``phase`` are offered up to this many input channels a group (they do
#: C/g multiply-adds per column element or output tap without BLAS's blocking)
SMALL_MAX_CIG = 32


@numba.njit(inline="always", **JIT)
def _span(kx, dw, pw, sw, W, Wo):
    """The input columns ``j0 <= j < j1`` whose output column ``j * sw - pw + kx * dw`` is inside."""
    off = kx * dw - pw
    j0 = 0 if off >= 0 else (-off + sw - 1) // sw
    j1 = min(W, (Wo - 1 - off) // sw + 1) if Wo - 1 - off >= 0 else 0
    return off, j0, j1


@numba.njit(inline="always", **JIT)
def _add_row(dst, d0, step, src, s0, m, scale, scaled):
    """``dst[d0 + j * step] += (scale *) src[s0 + j]`` for j < m, on views indexed from 0 (no
    negative-index fix-up per element: 1.4-1.7x faster on a 12-wide row)."""
    dv = dst[d0:d0 + (m - 1) * step + 1:step]
    sv = src[s0:s0 + m]
    if scaled:
        for j in range(m):
            dv[j] += scale * sv[j]
    else:
        for j in range(m):
            dv[j] += sv[j]


@numba.njit(**JIT)
def col2im3(cols, bias, out, D, H, W, kd, kh, kw, sd, sh, sw, pd, ph, pw, dd, dh, dw):
    """``out[n, o, z*sd - pd + kz*dd, i*sh - ph + ky*dh, j*sw - pw + kx*dw] += cols[n, (o, kz, ky, kx),
    (z, i, j)]`` over ``bias[o]``; positions outside ``out`` (the padding) are dropped. Taps apart
    (stride == kernel, no padding or dilation, nothing past them: a U-Net's 2x2/2 up-sampling):
    every output written once, no fill and no read-modify-write."""
    N, O, Do, Ho, Wo = out.shape
    flat = out.reshape(out.size)
    cf = cols.reshape(cols.size)
    plane = Do * Ho * Wo
    L = D * H * W
    K = kd * kh * kw
    apart = (sd == kd and sh == kh and sw == kw and pd == 0 and ph == 0 and pw == 0 and dd == 1 and dh == 1
             and dw == 1 and Do == D * kd and Ho == H * kh and Wo == W * kw)
    for n in range(N):
        for o in range(O):
            p0 = (n * O + o) * plane
            bv = bias[o]
            r0 = (n * O + o) * K * L
            if apart:
                for z in range(D):
                    for kz in range(kd):
                        for i in range(H):
                            for ky in range(kh):
                                ob = p0 + ((z * kd + kz) * Ho + i * kh + ky) * Wo
                                rk = r0 + (kz * kh + ky) * kw * L + (z * H + i) * W
                                for kx in range(kw):
                                    dv = flat[ob + kx:ob + kx + (W - 1) * kw + 1:kw]
                                    sv = cf[rk + kx * L:rk + kx * L + W]
                                    for j in range(W):
                                        dv[j] = sv[j] + bv
                continue
            pl = flat[p0:p0 + plane]
            pl[:] = bv
            for kz in range(kd):
                for ky in range(kh):
                    offy, i0, i1 = _span(ky, dh, ph, sh, H, Ho)
                    for kx in range(kw):
                        rt = r0 + ((kz * kh + ky) * kw + kx) * L
                        off, j0, j1 = _span(kx, dw, pw, sw, W, Wo)
                        m = j1 - j0
                        if m <= 0:
                            continue
                        for z in range(D):
                            oz = z * sd - pd + kz * dd
                            if oz < 0 or oz >= Do:
                                continue
                            for i in range(i0, i1):
                                _add_row(pl, (oz * Ho + i * sh + offy) * Wo + off + j0 * sw, sw,
                                         cf, rt + (z * H + i) * W + j0, m, np.float32(1.0), False)


@numba.njit(**JIT)
def fused_col2im3(x, wt, bias, out, cols, groups, kd, kh, kw, sd, sh, sw, pd, ph, pw, dd, dh, dw):
    """The ``fused`` form in one call: ``cols[n, g] = wt[g] @ x[n, g]`` as compiled loops (a row of
    pixels at a time, vectorized; no BLAS call per matrix), then :func:`col2im3`. ``x`` (N, C, D, H,
    W), ``wt`` (g, O/g * taps, C/g), ``cols`` (N, g, O/g * taps, D * H * W)."""
    N, C, D, H, W = x.shape
    L = D * H * W
    Cig = C // groups
    KK = wt.shape[1]
    xf = x.reshape(x.size)
    cf = cols.reshape(cols.size)
    for n in range(N):
        for gi in range(groups):
            x0 = (n * C + gi * Cig) * L
            for r in range(KK):
                crow = cf[((n * groups + gi) * KK + r) * L:((n * groups + gi) * KK + r + 1) * L]
                w0 = wt[gi, r, 0]
                xr = xf[x0:x0 + L]
                for q in range(L):
                    crow[q] = w0 * xr[q]
                for c in range(1, Cig):
                    wv = wt[gi, r, c]
                    xr = xf[x0 + c * L:x0 + (c + 1) * L]
                    for q in range(L):
                        crow[q] += wv * xr[q]
    col2im3(cols.reshape(N, groups * KK, L), bias, out, D, H, W, kd, kh, kw, sd, sh, sw, pd, ph, pw, dd, dh, dw)


@numba.njit(**JIT)
def direct3(x, w, bias, out, groups, kd, kh, kw, sd, sh, sw, pd, ph, pw, dd, dh, dw):
    """The transposed conv of ``x`` (N, C, D, H, W) by ``w`` (C, O/g, kd, kh, kw) into ``out``
    (N, O, Do, Ho, Wo) over ``bias``, without a GEMM: per output channel, every (input channel,
    tap)'s in-range rows added at the stride, scaled by the tap's weight."""
    N, C, D, H, W = x.shape
    O, Do, Ho, Wo = out.shape[1], out.shape[2], out.shape[3], out.shape[4]
    Og = w.shape[1]
    Cig = C // groups
    flat = out.reshape(out.size)
    xf = x.reshape(x.size)
    plane = Do * Ho * Wo
    L = D * H * W
    for n in range(N):
        for o in range(O):
            gi = o // Og
            og = o - gi * Og
            p0 = (n * O + o) * plane
            bv = bias[o]
            pl = flat[p0:p0 + plane]
            pl[:] = bv
            for ci in range(Cig):
                c = gi * Cig + ci
                x0 = (n * C + c) * L
                for kz in range(kd):
                    for ky in range(kh):
                        offy, i0, i1 = _span(ky, dh, ph, sh, H, Ho)
                        for kx in range(kw):
                            wv = w[c, og, kz, ky, kx]
                            off, j0, j1 = _span(kx, dw, pw, sw, W, Wo)
                            m = j1 - j0
                            if m <= 0:
                                continue
                            for z in range(D):
                                oz = z * sd - pd + kz * dd
                                if oz < 0 or oz >= Do:
                                    continue
                                for i in range(i0, i1):
                                    _add_row(pl, (oz * Ho + i * sh + offy) * Wo + off + j0 * sw, sw,
                                             xf, x0 + (z * H + i) * W + j0, m, wv, True)


@numba.njit(inline="always", **JIT)
def _phase_taps(k, s, p, d, r):
    """The taps ``t`` of one dimension's output phase ``r`` (outputs ``q * s + r``) and their input
    offsets ``e`` (output ``q * s + r`` takes input ``q + e``): ``(r + p - t * d) % s == 0``."""
    taps = np.empty(k, np.int64)
    offs = np.empty(k, np.int64)
    m = 0
    for t in range(k):
        v = r + p - t * d
        if v % s == 0:
            taps[m] = t
            offs[m] = v // s
            m += 1
    return taps[:m], offs[:m]


@numba.njit(inline="always", **JIT)
def _margins(n, k, s, p, d, no):
    """One dimension's zero margins (before, padded size) so every phase's tap reads ``q + e`` in range."""
    lo, hi = 0, 0
    for t in range(k):
        v = p - t * d
        for r in range(s):
            e = (r + v) // s
            if (r + v) % s == 0:
                lo, hi = min(lo, e), max(hi, e)
    qmax = (no + s - 1) // s
    return -lo, -lo + max(n, qmax + hi)


@numba.njit(**JIT)
def phase3(x, w, bias, out, groups, kd, kh, kw, sd, sh, sw, pd, ph, pw, dd, dh, dw):
    """The transposed conv of ``x`` (N, C, D, H, W) by ``w`` (C, O/g, kd, kh, kw) into ``out`` by
    stride phases: each of the ``sd * sh * sw`` output phases a direct conv of ``x`` with the kernel
    sub-sampled to the phase's taps. ``x``'s planes zero-padded so a tap's contribution to a phase's
    (rows, columns) is one flat multiply-add; each phase written once at the stride."""
    N, C, D, H, W = x.shape
    O, Do, Ho, Wo = out.shape[1], out.shape[2], out.shape[3], out.shape[4]
    Og = w.shape[1]
    Cig = C // groups
    my, Hp = _margins(H, kh, sh, ph, dh, Ho)
    mx, Wp = _margins(W, kw, sw, pw, dw, Wo)
    P = Hp * Wp
    # the padded copy as flat loops: numba's 5-D slice assignment took ~5 s of CPU to compile
    xf = np.zeros(N * C * D * P, np.float32)
    for p0 in range(N * C * D):
        xn, xc, xz = p0 // (C * D), p0 // D % C, p0 % D
        for i in range(H):
            d0 = p0 * P + (i + my) * Wp + mx
            for j in range(W):
                xf[d0 + j] = x[xn, xc, xz, i, j]
    acc = np.empty(((Ho + sh - 1) // sh) * Wp, np.float32)
    for rz in range(min(sd, Do)):
        tz, ez = _phase_taps(kd, sd, pd, dd, rz)
        Qz = (Do - rz + sd - 1) // sd
        for ry in range(min(sh, Ho)):
            ty, ey = _phase_taps(kh, sh, ph, dh, ry)
            Qy = (Ho - ry + sh - 1) // sh
            for rx in range(min(sw, Wo)):
                tx, ex = _phase_taps(kw, sw, pw, dw, rx)
                Qx = (Wo - rx + sw - 1) // sw
                M = (Qy - 1) * Wp + Qx
                a = acc[:M]
                for n in range(N):
                    for o in range(O):
                        gi = o // Og
                        og = o - gi * Og
                        bv = bias[o]
                        for qz in range(Qz):
                            a[:] = bv
                            for ci in range(Cig):
                                c = gi * Cig + ci
                                for az in range(tz.size):
                                    iz = qz + ez[az]
                                    if iz < 0 or iz >= D:
                                        continue
                                    x0 = ((n * C + c) * D + iz) * P
                                    for ay in range(ty.size):
                                        for ax in range(tx.size):
                                            wv = w[c, og, tz[az], ty[ay], tx[ax]]
                                            s0 = x0 + (ey[ay] + my) * Wp + ex[ax] + mx
                                            xr = xf[s0:s0 + M]
                                            for j in range(M):
                                                a[j] += wv * xr[j]
                            for qy in range(Qy):
                                ov = out[n, o, qz * sd + rz, qy * sh + ry, rx:rx + (Qx - 1) * sw + 1:sw]
                                av = a[qy * Wp:qy * Wp + Qx]
                                for j in range(Qx):
                                    ov[j] = av[j]


def _compiled(dispatcher, signature: str):
    """The compiled entry point for ``signature`` (compiled now or loaded from numba's cache): no
    call pays for a compilation or the dispatcher's type matching."""
    args, _ = numba.core.sigutils.normalize_signature(signature)
    dispatcher.compile(signature)
    return dispatcher.overloads[tuple(args)].entry_point


def _to3(t, fill) -> tuple:
    return (fill,) * (3 - len(t)) + tuple(int(v) for v in t)


def out_size(sp, ks, stride, padding, output_padding, dilation) -> tuple:
    """The output's spatial size (torch's ``conv_transpose`` formula)."""
    return tuple((n - 1) * s - 2 * p + d * (k - 1) + op + 1
                 for n, s, p, d, k, op in zip(sp, stride, padding, dilation, ks, output_padding))


class ConvTranspose:
    """A constant float32 weight (C, O/g, *k) of rank 1-3 with its bias and hyper-parameters, run in
    one of :data:`FORMS` (``form``; compiled at construction or at :meth:`pick`, i.e. at load)."""

    def __init__(self, w, bias, stride, padding, output_padding, groups, dilation, form: str = "gemm"):
        if form not in FORMS:
            raise KernelError(f"conv_transpose form {form!r} (one of {FORMS})")
        w = np.ascontiguousarray(w, np.float32)
        C, Og, *ks = w.shape
        self.nd, self.g, self.cig, self.O = len(ks), int(groups), C // groups, Og * groups
        self.ks = tuple(ks)
        self.stride, self.padding, self.dilation = tuple(stride), tuple(padding), tuple(dilation)
        self.out_pad = tuple(output_padding)
        self.kk = Og * math.prod(ks)
        self.w5 = w.reshape((C, Og) + _to3(ks, 1))
        self.wt = np.ascontiguousarray(w.reshape(groups, self.cig, self.kk).transpose(0, 2, 1))
        self.bias = np.zeros(self.O, np.float32) if bias is None else np.ascontiguousarray(bias, np.float32)
        self.hyper = (*_to3(ks, 1), *_to3(stride, 1), *_to3(padding, 0), *_to3(dilation, 1))
        self.form = None
        self.use(form)

    def use(self, form: str) -> None:
        self.form = form
        self.fn = _compiled(*{"gemm": (col2im3, COL2IM_SIG), "fused": (fused_col2im3, FUSED_SIG),
                              "direct": (direct3, DIRECT_SIG), "phase": (phase3, DIRECT_SIG)}[form])

    def out_shape(self, x_shape) -> tuple:
        return (x_shape[0], self.O) + out_size(x_shape[2:], self.ks, self.stride, self.padding, self.out_pad,
                                               self.dilation)

    def runner(self, x_shape, own_cols: bool = True):
        """``run(x, out, cols)``: ``out`` = the transposed conv of ``x`` (both C-contiguous float32,
        ``x`` of shape ``x_shape``, ``out`` of :meth:`out_shape`), the reshapes and arguments prepared
        once. ``cols``, the ``gemm`` and ``fused`` forms' scratch of :meth:`cols_shape`: the runner's
        own (``own_cols``: ``run(x, out)``), else every call's (a thread's workspace)."""
        N, C = x_shape[:2]
        xs5, os5 = (N, C) + _to3(x_shape[2:], 1), self.out_shape(x_shape)
        os5 = os5[:2] + _to3(os5[2:], 1)
        fn, w, bias, g, hyper = self.fn, self.wt, self.bias, self.g, self.hyper
        if math.prod(os5) == 0:
            return lambda x, out, cols=None: None
        if math.prod(xs5) == 0:
            b5 = bias.reshape(self.O, 1, 1, 1)

            def fill(x, out, cols=None):
                out.reshape(os5)[...] = b5
            return fill
        if self.form in NO_COLS:
            w = self.w5
            return lambda x, out, cols=None: fn(x.reshape(xs5), w, bias, out.reshape(os5), g, *hyper)
        cs = self.cols_shape(x_shape)
        if own_cols:
            run = self.runner(x_shape, own_cols=False)
            mine = np.empty(cs, np.float32)
            return lambda x, out, cols=None: run(x, out, mine)
        if self.form == "fused":
            def fused(x, out, cols):
                if cols.shape != cs:
                    raise KernelError(f"conv_transpose: cols of shape {cols.shape}, not {cs}")
                fn(x.reshape(xs5), w, bias, out.reshape(os5), cols, g, *hyper)
            return fused
        cig, L = self.cig, math.prod(x_shape[2:])
        sp3 = _to3(x_shape[2:], 1)
        pairs = [(n, gi) for n in range(N) for gi in range(g)]

        def gemm(x, out, cols):
            xs = x.reshape(N, g, cig, L)
            for n, gi in pairs:   # np.dot per matrix: a stacked np.matmul of small ones ran 2-5x slower
                np.dot(w[gi], xs[n, gi], out=cols[n, gi])
            fn(cols.reshape(N, -1, L), bias, out.reshape(os5), *sp3, *hyper)
        return gemm

    def cols_shape(self, x_shape) -> tuple:
        """The ``gemm`` form's scratch: (N, g, O/g * taps, pixels)."""
        return (x_shape[0], self.g, self.kk, math.prod(x_shape[2:]))

    def pick(self, x, out, rounds: int = 5, reps: int = 3, margin: float = 1.03) -> str:
        """Time the forms on ``x`` into ``out`` (best of ``rounds`` alternating rounds of ``reps`` calls,
        on the calling thread's CPU clock: ``srcore.clock``), keep the fastest (``gemm`` unless another
        beats it by ``margin``) and return its name; ``fused``, ``direct`` and ``phase`` up to
        :data:`SMALL_MAX_CIG` input channels a group."""
        from srcore import clock as _clock

        runs, best = {}, {}
        for f in FORMS if self.cig <= SMALL_MAX_CIG else ("gemm",):
            self.use(f)
            runs[f], best[f] = self.runner(x.shape), float("inf")
        for _ in range(rounds):
            for f, run in runs.items():
                best[f] = min(best[f], _clock.per_call_ns(lambda run=run: run(x, out), reps, "cpu"))
        form = min(runs, key=lambda f: (best[f] * (1.0 if f == "gemm" else margin), f != "gemm"))
        self.use(form)
        return form
