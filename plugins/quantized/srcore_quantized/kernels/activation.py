"""Activations on quantized tensors: relu/relu6/hardtanh/clamp on the stored integers; leaky_relu,
hardswish, sigmoid, hardsigmoid, tanh, elu, celu, threshold and gelu through dequantize -> f ->
quantize with torch's rounding (both of its code paths)."""
from __future__ import annotations

import numpy as np

from srcore.plugin import QDTYPES, KernelError, QParams

from ._common import (F32, buffer, dequant_scalar, dequant_vec, ints, output_qparams, quant_scalar, quant_vec,
                      require_per_tensor, split_tail, wrap)


def relu_out(self, *, out=None):
    """``max(q, zero_point)``; the output keeps the input's parameters."""
    x = require_per_tensor(self, "aten::relu")
    res = buffer(out, x.shape, x.qdtype)
    np.maximum(ints(x), x.qparams.zero_point, out=res)
    return wrap(res, x.qdtype, x.qparams)


def relu_(self):
    x = require_per_tensor(self, "aten::relu_")
    np.maximum(ints(x), x.qparams.zero_point, out=ints(x))
    return x


def _quantize_val(value: float, q: QParams, qdtype: str) -> int:
    return int(quant_scalar(np.asarray([value], F32), q.scale, q.zero_point, qdtype)[0])


def _clamp(x, lo, hi, out, op):
    require_per_tensor(x, op)
    q, qdtype = x.qparams, x.qdtype
    info = QDTYPES[qdtype]
    qlo = info.qmin if lo is None else _quantize_val(lo, q, qdtype)
    qhi = info.qmax if hi is None else _quantize_val(hi, q, qdtype)
    res = buffer(out, x.shape, qdtype)
    np.clip(ints(x), qlo, qhi, out=res)
    if lo is not None and hi is not None and qlo > qhi:
        res[...] = qhi
    return wrap(res, qdtype, q)


def relu6_out(self, *, out=None):
    """``clamp(q, zero_point, quantize(6))``."""
    return _clamp(self, 0.0, 6.0, out, "aten::relu6")


def quantized_relu6(qx, inplace=False):
    res = relu6_out(qx)
    if inplace:
        ints(qx)[...] = ints(res)
        return qx
    return res


def hardtanh_out(self, min_val=-1.0, max_val=1.0, *, out=None):
    return _clamp(self, float(min_val), float(max_val), out, "aten::hardtanh")


def clamp_out(self, min=None, max=None, *, out=None):
    lo = None if min is None else float(np.asarray(min).reshape(-1)[0])
    hi = None if max is None else float(np.asarray(max).reshape(-1)[0])
    return _clamp(self, lo, hi, out, "aten::clamp")


# -- dequantize -> f -> quantize -----------------------------------------------------------------------
def _through_float(x, f, q_out: QParams, out, op: str):
    """Apply float32 ``f`` with torch's vectorized path (fma dequantize) on whole blocks and its scalar
    path on the tail. 8-bit inputs go through a 256-entry table per path."""
    require_per_tensor(x, op)
    qdtype, q_in = x.qdtype, x.qparams
    flat = ints(x).reshape(-1)
    res = buffer(out, x.shape, qdtype)
    dst = res.reshape(-1)
    k = split_tail(flat.size, qdtype)
    info = QDTYPES[qdtype]
    if info.qmax - info.qmin < 256:
        levels = np.arange(info.qmin, info.qmax + 1)
        idx = flat.astype(np.int64) - info.qmin
        if k:
            table = quant_vec(f(dequant_vec(levels, q_in.scale, q_in.zero_point)), q_out.scale, q_out.zero_point, qdtype)
            dst[:k] = table[idx[:k]]
        if k < flat.size:
            table = quant_scalar(f(dequant_scalar(levels, q_in.scale, q_in.zero_point)), q_out.scale,
                                 q_out.zero_point, qdtype)
            dst[k:] = table[idx[k:]]
    else:
        if k:
            quant_vec(f(dequant_vec(flat[:k], q_in.scale, q_in.zero_point)), q_out.scale, q_out.zero_point, qdtype,
                      out=dst[:k])
        if k < flat.size:
            quant_scalar(f(dequant_scalar(flat[k:], q_in.scale, q_in.zero_point)), q_out.scale, q_out.zero_point,
                         qdtype, out=dst[k:])
    return wrap(res, qdtype, q_out)


def _leaky(slope):
    s = F32(slope)
    return lambda v: np.where(v > 0, v, v * s).astype(F32)


def leaky_relu_out(self, negative_slope=0.01, *, out=None):
    """aten::leaky_relu of a quantized tensor: the output keeps the input's parameters."""
    return _through_float(self, _leaky(float(negative_slope)), self.qparams, out, "aten::leaky_relu")


def quantized_leaky_relu(qx, negative_slope, inplace, output_scale, output_zero_point):
    q = output_qparams(qx.qdtype, output_scale, output_zero_point, "quantized::leaky_relu")
    res = _through_float(qx, _leaky(float(negative_slope)), q, None, "quantized::leaky_relu")
    if inplace and q == qx.qparams:
        ints(qx)[...] = ints(res)
        return qx
    return res


def _hardswish(v):
    three, six = F32(3.0), F32(6.0)
    return (v * np.minimum(np.maximum(v + three, F32(0.0)), six) / six).astype(F32)


def hardswish_out(input, output_scale, output_zero_point, *, out=None):
    """``x * min(max(x + 3, 0), 6) / 6`` in float32."""
    q = output_qparams(input.qdtype, output_scale, output_zero_point, "quantized::hardswish")
    return _through_float(input, _hardswish, q, out, "quantized::hardswish")


def _elu(alpha, scale, input_scale):
    """torch's qelu: ``x * scale`` for ``x >= 0``, else ``(exp(x * input_scale) - 1) * alpha * scale``
    (float32 steps in its order)."""
    a, s, i = F32(alpha), F32(scale), F32(input_scale)

    def f(v):
        with np.errstate(over="ignore"):
            neg = (np.exp(v * i) - F32(1.0)) * a * s
        return np.where(v >= 0, v * s, neg).astype(F32)
    return f


def elu_out(self, output_scale, output_zero_point, alpha=1.0, scale=1.0, input_scale=1.0, *, out=None):
    """``quantized::elu`` (what FX makes of nn.ELU) through float32, to the output parameters."""
    q = output_qparams(self.qdtype, output_scale, output_zero_point, "quantized::elu")
    return _through_float(self, _elu(float(alpha), float(scale), float(input_scale)), q, out, "quantized::elu")


def _sigmoid(v):
    with np.errstate(over="ignore"):  # exp(-x) = inf for very negative x: sigmoid is 0, as in torch
        return (F32(1.0) / (F32(1.0) + np.exp(-v))).astype(F32)


def _hardsigmoid(v):
    return (np.minimum(np.maximum(v + F32(3.0), F32(0.0)), F32(6.0)) / F32(6.0)).astype(F32)


#: torch's fixed output parameters of sigmoid-like ops on quantized tensors
FIXED = {"sigmoid": {"quint8": QParams(1.0 / 256, 0), "qint8": QParams(1.0 / 256, -128)},
         "tanh": {"quint8": QParams(2.0 / 256, 128), "qint8": QParams(2.0 / 256, 0)}}


def sigmoid_out(self, *, out=None):
    """aten::sigmoid of a quantized tensor: output scale 1/256, zero point 0 (quint8) or -128 (qint8)."""
    require_per_tensor(self, "aten::sigmoid")
    return _through_float(self, _sigmoid, FIXED["sigmoid"][self.qdtype], out, "aten::sigmoid")


def hardsigmoid_out(self, *, out=None):
    require_per_tensor(self, "aten::hardsigmoid")
    return _through_float(self, _hardsigmoid, FIXED["sigmoid"][self.qdtype], out, "aten::hardsigmoid")


def tanh_out(self, *, out=None):
    require_per_tensor(self, "aten::tanh")
    return _through_float(self, lambda v: np.tanh(v).astype(F32), FIXED["tanh"][self.qdtype], out, "aten::tanh")


def quantized_sigmoid_out(qx, output_scale, output_zero_point, *, out=None):
    q = output_qparams(qx.qdtype, output_scale, output_zero_point, "quantized::sigmoid")
    return _through_float(qx, _sigmoid, q, out, "quantized::sigmoid")


# -- gelu: torch's qgelu_kernel, each code path with its own arithmetic --------------------------------
def _fma32(a, b, c):
    """float32 ``fma(a, b, c)``: the float32 product is exact in float64, one rounding to float32."""
    return (a.astype(np.float64) * b.astype(np.float64) + np.asarray(c, np.float64)).astype(F32)


def _erf_vec(v):
    """ATen's ``Vectorized<float>::erf`` (AVX2 build, the one the quantized kernels run): Abramowitz and
    Stegun 7.1.26 in float32 with fma, ``exp`` the correctly rounded one (Sleef's is within 1 ulp)."""
    sign = np.signbit(v)
    a = np.abs(v)
    t = (F32(1.0) / _fma32(np.full_like(a, F32(0.3275911)), a, F32(1.0))).astype(F32)
    r = _fma32(np.full_like(t, F32(1.061405429)), t, F32(-1.453152027))
    r = _fma32(r, t, F32(1.421413741))
    r = _fma32(r, t, F32(-0.284496736))
    r = _fma32(r, t, F32(0.254829592))
    e = np.exp(-(v * v).astype(np.float64)).astype(F32)
    y = _fma32((-e * t).astype(F32), r, F32(1.0))
    return np.where(sign, -y, y).astype(F32)


def _gelu_vec(approximate: str):
    half, one = F32(0.5), F32(1.0)
    if approximate == "tanh":
        beta, kappa = F32(np.sqrt(2.0) * (2.0 / np.sqrt(np.pi)) * 0.5), F32(0.044715)

        def f(v):   # kPointFiveVec * value * (kOneVec + (kBetaVec * (value + kKappaVec * value^3)).tanh())
            cube = (v * v * v).astype(F32)
            inner = (beta * (v + kappa * cube)).astype(F32)
            return (half * v * (one + np.tanh(inner.astype(np.float64)).astype(F32))).astype(F32)
        return f
    alpha = F32(np.sqrt(0.5))
    return lambda v: (v * half * (one + _erf_vec((v * alpha).astype(F32)))).astype(F32)


def _gelu_scalar(approximate: str):
    """The scalar path computes in double (float input, double constants), rounded to float at the end."""
    import math

    if approximate == "tanh":
        beta, kappa = math.sqrt(2.0) * (2.0 / math.sqrt(math.pi)) * 0.5, 0.044715

        def one(x):
            cube = float(F32(F32(x) * F32(x)) * F32(x))   # value_dx is a float: its cube is float32
            inner = beta * (x + kappa * cube)
            return 0.5 * x * (1.0 + math.tanh(inner))
    else:
        s = math.sqrt(0.5)

        def one(x):
            return x * 0.5 * (1.0 + math.erf(x * s))
    return lambda v: np.array([one(float(x)) for x in v.reshape(-1)], np.float64).astype(F32).reshape(v.shape)


def _through_float2(x, f_vec, f_scalar, q_out: QParams, out, op: str):
    """:func:`_through_float` with a different float function per code path (only 8-bit: a table of
    256 levels per path; ``f_scalar`` may be slow)."""
    require_per_tensor(x, op)
    qdtype, q_in = x.qdtype, x.qparams
    info = QDTYPES[qdtype]
    if info.qmax - info.qmin >= 256:
        raise KernelError(f"{op}: {qdtype} is not supported (quint8 and qint8 are)")
    flat = ints(x).reshape(-1)
    res = buffer(out, x.shape, qdtype)
    dst = res.reshape(-1)
    k = split_tail(flat.size, qdtype)
    levels = np.arange(info.qmin, info.qmax + 1)
    idx = flat.astype(np.int64) - info.qmin
    if k:
        table = quant_vec(f_vec(dequant_vec(levels, q_in.scale, q_in.zero_point)), q_out.scale, q_out.zero_point,
                          qdtype)
        dst[:k] = table[idx[:k]]
    if k < flat.size:
        table = quant_scalar(f_scalar(dequant_scalar(levels, q_in.scale, q_in.zero_point)), q_out.scale,
                             q_out.zero_point, qdtype)
        dst[k:] = table[idx[k:]]
    return wrap(res, qdtype, q_out)


def gelu_out(self, approximate="none", *, out=None):
    """aten::gelu of a quantized tensor (torch's ``qgelu_kernel``): the output keeps the input's
    parameters; the vectorized path computes in float32 with ATen's vector erf (or tanh), the
    scalar tail in double with ``std::erf`` (``std::tanh``)."""
    if approximate not in ("none", "tanh"):
        raise KernelError(f"aten::gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    x = require_per_tensor(self, "aten::gelu")
    with np.errstate(over="ignore", invalid="ignore"):
        return _through_float2(x, _gelu_vec(approximate), _gelu_scalar(approximate), x.qparams, out, "aten::gelu")


def gelu_(self, approximate="none"):
    res = gelu_out(self, approximate)
    ints(self)[...] = ints(res)
    return self


def celu_out(self, output_scale, output_zero_point, alpha=1.0, *, out=None):
    """``quantized::celu``: torch runs its elu kernel with ``scale`` 1 and ``input_scale`` 1 / alpha."""
    q = output_qparams(self.qdtype, output_scale, output_zero_point, "quantized::celu")
    a = float(alpha)
    if a == 0:
        raise KernelError("quantized::celu: alpha must not be 0")
    return _through_float(self, _elu(a, 1.0, 1.0 / a), q, out, "quantized::celu")


def threshold_out(self, threshold, value, *, out=None):
    """aten::threshold / quantized::threshold (torch's ``qthreshold_kernel``): ``x > threshold ? x :
    value`` on the dequantized values (float32), quantized back with the input's parameters."""
    th, v = F32(float(threshold)), F32(float(value))
    return _through_float(self, lambda x: np.where(x > th, x, v).astype(F32), self.qparams, out, "aten::threshold")


def quantized_clamp_out(qx, min=None, max=None, *, out=None):
    """quantized::clamp: aten::clamp's quantized kernel (the bounds quantized, the integers clamped)."""
    return clamp_out(qx, min, max, out=out)


def quantized_dropout(self, output_scale, output_zero_point, p=0.5, training=False):
    """quantized::dropout: torch returns its input as it is (parameters included)."""
    return require_per_tensor(self, "quantized::dropout")
