"""The int8 layers' arithmetic: exact integer GEMM on a float BLAS, fbgemm's requantization.

A quantized conv or linear layer sums products of zero-point-shifted 8-bit integers (int32
accumulators in fbgemm). A float BLAS sums such products *exactly* while every partial sum is an
integer the float type represents: below 2^24 in float32, 2^53 in float64. So the layer bounds
its sums when it is built, from its weights and the input dtype's range: blocks of
``2^24 / (max|x - zp_x| * max|w - zp_w|)`` terms of the depth are exact in float32 (the
``sgemm`` tactic sums the blocks in float64), and ``dgemm`` is exact in one call (for any depth
below 2^37). Both compute the same integers; the builder times them.

Requantization is fbgemm's ``ReQuantizeOutput`` with a float bias, per output channel ``j``:
``act_w = float32(s_x) * s_w[j]``, ``y = nearbyint((float32(acc) + bias[j] / act_w) *
(act_w / s_y)) + zp_y``, clamped to the dtype (from ``zp_y`` with a fused relu), all in float32:
the integers ``torch.ops.quantized`` (x86 backend) and srcore's ``quantized_cpu`` produce.

``quantize`` is fbgemm's ``Quantize`` (``nearbyint(fma(x, 1/s, zp))`` in float32), ``dequantize``
torch's ``(q - zp) * s``; ``add`` follows torch's two code paths (vectorized blocks of 64
elements: ``fma`` dequantize, round, add zp; the tail: ``(q - zp) * s``, add zp, round).
"""
from __future__ import annotations

import numpy as np

F32 = np.float32
F64 = np.float64

#: float32 sums integers exactly below this
F32_EXACT = 2 ** 24
#: elements per vectorized step of torch's elementwise quantized loops (8-bit dtypes)
VEC_BLOCK = 64


def float32_chunk(x_range: int, w_shifted: np.ndarray) -> int:
    """The most terms of a dot product whose partial sums stay exact in float32 (at least 1)."""
    return max(1, (F32_EXACT - 1) // max(1, x_range * _wmax(w_shifted)))


def _wmax(w_shifted: np.ndarray) -> int:
    return int(np.abs(w_shifted).max()) if w_shifted.size else 0


def matmul_exact(a: np.ndarray, w_t: np.ndarray, chunk: int, out: np.ndarray | None = None) -> np.ndarray:
    """``a @ w_t`` of integer-valued float32 arrays, exactly: over blocks of ``chunk`` terms of the
    depth (each block's sums stay below 2^24: exact in float32), the blocks added in float64."""
    k = w_t.shape[0]
    if chunk >= k:
        return np.matmul(a, w_t, out=out)
    acc = np.zeros((a.shape[0], w_t.shape[1]), F64)
    for k0 in range(0, k, chunk):
        acc += a[:, k0:k0 + chunk] @ w_t[k0:k0 + chunk]
    if out is None:
        return acc
    out[...] = acc
    return out


def input_range(qmin: int, qmax: int, zero_point: int) -> int:
    """The largest ``|q - zero_point|`` of a quantized input."""
    return max(zero_point - qmin, qmax - zero_point)


class Requant:
    """fbgemm's per-channel requantization constants of one layer (float32)."""

    def __init__(self, x_scale: float, w_scales: np.ndarray, bias, y_scale: float, y_zero_point: int,
                 qmin: int, qmax: int, relu: bool):
        self.act_w = F32(x_scale) * np.asarray(w_scales, F32)
        self.mult = self.act_w / F32(y_scale)
        self.bias = None if bias is None else np.asarray(bias, F32) / self.act_w
        self.zp = float(y_zero_point)
        self.lo = float(y_zero_point if relu else qmin)
        self.hi = float(qmax)

    def __call__(self, acc: np.ndarray, out: np.ndarray, channel_axis: int = -1) -> None:
        """``acc`` (..., channels) of exact integers (float32 or float64) -> ``out`` (same shape);
        ``channel_axis=1``: ``acc`` is NCHW. ``acc`` may be overwritten."""
        raw = acc.astype(F32, copy=False) if acc.dtype != F32 else acc
        bias, mult = self.bias, self.mult
        if channel_axis != -1:
            tail = (1,) * (acc.ndim - channel_axis - 1)
            mult = mult.reshape(-1, *tail)
            bias = None if bias is None else bias.reshape(-1, *tail)
        if bias is not None:
            raw += bias
        raw *= mult
        np.rint(raw, out=raw)
        raw += F32(self.zp)           # an integer below 2^9 added to an integer: exact in float32
        np.clip(raw, self.lo, self.hi, out=raw)
        out[...] = raw


class OnednnRequant:
    """oneDNN's requantization (``srcore.plugin.int8_onednn``: ``float(acc) * (s_x s_w) + bias``,
    ``nearbyint(y / s_y + zp)``, each step in float32 with ideep's round-tripped scales), for the
    weights torch packed for oneDNN; called as :class:`Requant`. ``kind``: "conv" or "linear"."""

    def __init__(self, x_scale: float, w_scales: np.ndarray, bias, y_scale: float, y_zero_point: int,
                 y_dtype: str, relu: bool, kind: str):
        from srcore.plugin import int8_onednn

        self.onednn = int8_onednn
        self.args = (x_scale, np.asarray(w_scales, F32), bias, kind)
        self.out_args = (y_scale, y_zero_point, y_dtype, relu)

    def __call__(self, acc: np.ndarray, out: np.ndarray, channel_axis: int = -1) -> None:
        if channel_axis != -1:
            acc, out = np.moveaxis(acc, channel_axis, -1), np.moveaxis(out, channel_axis, -1)
        y = self.onednn.scaled(acc, *self.args)
        self.onednn.requantize(y, *self.out_args, out)


def gemm_kernel(w_t: np.ndarray, x_zero_point: int, requant: Requant, chunk: int):
    """A quantized linear layer: ``fn(x, y)``, ``x`` (..., K) stored integers, ``y`` (..., N);
    ``w_t`` (K, N) the shifted weights in the float type the products are summed in (float32: in
    blocks of ``chunk`` terms, :func:`matmul_exact`)."""
    ft = w_t.dtype
    k, n = w_t.shape

    def qgemm(x, y):
        a = x.reshape(-1, k).astype(ft)
        a -= ft.type(x_zero_point)
        requant(matmul_exact(a, w_t, chunk), y.reshape(-1, n))
    return qgemm


def conv_kernel(w_t: np.ndarray, groups: int, kernel: tuple[int, int], stride, padding, dilation,
                x_zero_point: int, requant: Requant, chunk: int):
    """A quantized 2-D convolution: ``fn(x, y)`` on NCHW stored integers; ``w_t`` (groups, C/g*kh*kw,
    Cout/g) shifted weights. The input is shifted before zero padding (padding stands for a real
    zero), its windows gathered (im2col) and multiplied group by group."""
    ft = w_t.dtype
    kh, kw = kernel
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    g, kg, cg_out = w_t.shape

    def qconv(x, y):
        N, C, H, W = x.shape
        OH, OW = y.shape[2], y.shape[3]
        xs = np.zeros((N, C, H + 2 * ph, W + 2 * pw), ft)
        inner = xs[:, :, ph:ph + H, pw:pw + W]
        inner[...] = x
        inner -= ft.type(x_zero_point)
        s = xs.strides
        win = np.lib.stride_tricks.as_strided(xs, (N, OH, OW, C, kh, kw),
                                              (s[0], s[2] * sh, s[3] * sw, s[1], s[2] * dh, s[3] * dw),
                                              writeable=False)
        cg = C // g
        acc = np.empty((N * OH * OW, g * cg_out), ft if chunk >= kg else F64)
        for gi in range(g):
            cols = win[:, :, :, gi * cg:(gi + 1) * cg].reshape(N * OH * OW, kg)
            matmul_exact(cols, w_t[gi], chunk, out=acc[:, gi * cg_out:(gi + 1) * cg_out])
        res = np.empty((N * OH * OW, g * cg_out), y.dtype)
        requant(acc, res)
        y[...] = res.reshape(N, OH, OW, -1).transpose(0, 3, 1, 2)
    return qconv


def quantize_kernel(scale: float, zero_point: int, qmin: int, qmax: int):
    """float32 -> stored integers: ``nearbyint(float32(x * (1/s) + zp))``, the product and sum exact
    in float64 and rounded once to float32 (fbgemm's fused multiply-add)."""
    inv = F64(F32(1.0) / F32(scale))
    zp = F64(zero_point)

    def quantize(x, y):
        r = x.astype(F64) * inv
        r += zp
        r = np.rint(r.astype(F32))
        np.clip(r, qmin, qmax, out=r)
        y[...] = r
    return quantize


def dequantize_kernel(scale: float, zero_point: int):
    """Stored integers -> float32: ``(q - zp) * s`` (torch's per-tensor ``dequantize``)."""
    s = F32(scale)

    def dequantize(x, y):
        np.subtract(x, zero_point, out=y, dtype=F32)   # |q - zp| < 2^9: exact
        y *= s
    return dequantize


def relu_kernel(zero_point: int):
    """relu of a quantized tensor: ``max(q, zp)`` (the stored integer of a real zero)."""
    def qrelu(x, y):
        np.maximum(x, zero_point, out=y)
    return qrelu


def add_kernel(a_params, b_params, y_params, qmin: int, qmax: int, relu: bool, layout: str = "nchw"):
    """``quantized::add(_relu)``: dequantize both, add, (relu), quantize, on torch's two code paths;
    ``layout`` says which elements torch puts on the scalar one: the last ``numel % block`` in NCHW
    order (``nchw``), in NHWC order (``channels_last``: torch held both inputs so), or all (``mixed``).
    Orders matter only for 4-D operands with more than one channel and pixel."""
    (sa, za), (sb, zb), (sy, zy) = a_params, b_params, y_params
    fa, fb = F32(sa), F32(sb)
    pa, pb = F64(F32(fa * F32(-za))), F64(F32(fb * F32(-zb)))
    inv = F32(1.0) / F32(sy)

    def qadd(a, b, y):
        shape = a.shape
        ordered = len(shape) == 4 and shape[1] > 1 and shape[2] * shape[3] > 1
        if ordered and layout == "channels_last":
            nhwc = np.empty((shape[0], shape[2], shape[3], shape[1]), y.dtype)
            qadd_flat(a.transpose(0, 2, 3, 1).reshape(-1), b.transpose(0, 2, 3, 1).reshape(-1), nhwc.reshape(-1), False)
            y[...] = nhwc.transpose(0, 3, 1, 2)
        else:
            qadd_flat(a.reshape(-1), b.reshape(-1), y.reshape(-1), ordered and layout == "mixed")

    def qadd_flat(a, b, out, all_scalar: bool):
        k = 0 if all_scalar else a.size // VEC_BLOCK * VEC_BLOCK
        if k:   # vectorized blocks: fma dequantize, round, then add the zero point
            c = (a[:k].astype(F64) * F64(fa) + pa).astype(F32) + (b[:k].astype(F64) * F64(fb) + pb).astype(F32)
            if relu:
                np.maximum(c, F32(0), out=c)
            r = np.rint(c * inv).astype(F64) + zy
            np.clip(r, qmin, qmax, out=r)
            out[:k] = r
        if k < a.size:   # the tail: (q - zp) * s, zero point added before rounding
            c = (a[k:].astype(np.int64) - za).astype(F32) * fa + (b[k:].astype(np.int64) - zb).astype(F32) * fb
            if relu:
                np.maximum(c, F32(0), out=c)
            r = np.rint(F32(zy) + c * inv).astype(F64)
            np.clip(r, qmin, qmax, out=r)
            out[k:] = r
    return qadd


def mean_kernel(inner_shape: tuple[int, ...], mode: str, zero_point: int, qmin: int, qmax: int):
    """The mean of the innermost dims on stored integers (the result keeps the input's parameters),
    rounded as torch (``srcore.plugin.int8_means``): its quantized ``adaptive_avg_pool2d`` to 1x1
    (``mode`` ``"adaptive"``: the NCHW kernel, ``"adaptive_nhwc"``: the NHWC one) or its fast
    ``mean`` (``"mean"``); the sums exact in int64."""
    from srcore.plugin import int8_means

    n = int(np.prod(inner_shape))
    if mode == "mean":
        scale = lambda s: int8_means.fast_mean(s, n, qmin, qmax)   # noqa: E731
    else:
        h, w = inner_shape
        nhwc = mode == "adaptive_nhwc"
        scale = lambda s: int8_means.adaptive_avg(s, h, w, zero_point, nhwc, qmin, qmax)   # noqa: E731

    def qmean(x, y):
        y.reshape(-1)[...] = scale(x.reshape(-1, n).sum(axis=1, dtype=np.int64))
    return qmean


def max_pool_kernel(kernel, stride, padding, dilation, qmin: int):
    """Max pool over stored integers (monotonic in the real value: exact); padding never wins."""
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel, stride, padding, dilation

    def qmax_pool(x, y):
        N, C, H, W = x.shape
        OH, OW = y.shape[2], y.shape[3]
        if ph or pw:
            xp = np.full((N, C, H + 2 * ph, W + 2 * pw), qmin, x.dtype)
            xp[:, :, ph:ph + H, pw:pw + W] = x
        else:
            xp = x
        first = True
        for i in range(kh):
            for j in range(kw):
                v = xp[:, :, i * dh:i * dh + (OH - 1) * sh + 1:sh, j * dw:j * dw + (OW - 1) * sw + 1:sw]
                if first:
                    y[...] = v
                    first = False
                else:
                    np.maximum(y, v, out=y)
    return qmax_pool
