"""The pointwise vocabulary of the engine, evaluated with numpy (float32, torch's semantics).

This is the meaning of every op a ``fused_pointwise`` layer may hold; the compiled
kernels are tested against it, and it runs groups the compiler cannot take.
"""
from __future__ import annotations

import numpy as np

try:
    from scipy.special import erf as _erf
except ImportError:  # pragma: no cover - scipy is optional; math.erf per element is slow but exact
    import math
    _erf = np.vectorize(math.erf, otypes=[np.float64])

F32 = np.float32


def _gelu(x):
    return (0.5 * x * (1.0 + _erf(x.astype(np.float64) / np.sqrt(2.0)))).astype(F32)


def _gelu_tanh(x):
    x64 = x.astype(np.float64)
    return (0.5 * x64 * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x64 + 0.044715 * x64 ** 3)))).astype(F32)


def _softplus(x, beta=1.0, threshold=20.0):
    bx = x * F32(beta)
    return np.where(bx > threshold, x, np.log1p(np.exp(bx)) / F32(beta)).astype(F32)


def _elu(x, alpha=1.0, scale=1.0, input_scale=1.0):
    neg = F32(alpha) * np.expm1(x * F32(input_scale))
    return (F32(scale) * np.where(x > 0, x, neg)).astype(F32)


def _clamp(x, min=None, max=None):
    y = x
    if min is not None:
        y = np.where(np.isnan(y), y, np.maximum(y, F32(min)))
    if max is not None:
        y = np.where(np.isnan(y), y, np.minimum(y, F32(max)))
    return y.astype(F32)


def _pow(x, exponent):
    """torch.pow(Tensor, Scalar): the exponents torch special-cases take its formulas (1 / sqrt(-0.0)
    is -inf where powf gives +inf); others powf."""
    e = F32(exponent)
    special = {0.0: lambda: np.ones_like(x), 1.0: lambda: x.copy(), 2.0: lambda: x * x, 3.0: lambda: x * x * x,
               0.5: lambda: np.sqrt(x), -0.5: lambda: F32(1) / np.sqrt(x), -1.0: lambda: F32(1) / x,
               -2.0: lambda: F32(1) / (x * x)}
    return special[float(e)]() if float(e) in special else np.power(x, e)


#: op -> f(x, **params) for one-operand ops
UNARY_REF = {
    "neg": np.negative, "abs": np.abs, "exp": np.exp, "log": np.log, "sqrt": np.sqrt,
    "rsqrt": lambda x: (1.0 / np.sqrt(x)).astype(F32), "reciprocal": lambda x: (1.0 / x).astype(F32),
    "square": np.square,
    "relu": lambda x: np.where(np.isnan(x), x, np.maximum(x, F32(0))),
    "relu6": lambda x: _clamp(x, 0.0, 6.0),
    # torch's float32 formulas: exp(-x) overflows to inf below -88.7, so sigmoid is 0 there (not a denormal)
    "sigmoid": lambda x: (F32(1) / (F32(1) + np.exp(-x))).astype(F32),
    "tanh": np.tanh,
    "sin": np.sin, "cos": np.cos, "expm1": np.expm1, "log1p": np.log1p,
    "erf": lambda x: _erf(x.astype(np.float64)).astype(F32),
    "silu": lambda x: (x / (F32(1) + np.exp(-x))).astype(F32),
    "gelu": _gelu, "gelu_tanh": _gelu_tanh,
    "clamp": _clamp,
    "leaky_relu": lambda x, negative_slope=0.01: np.where(x > 0, x, x * F32(negative_slope)).astype(F32),
    "elu": _elu,
    "hardswish": lambda x: (x * np.clip(x + 3.0, 0.0, 6.0) / 6.0).astype(F32),
    "hardsigmoid": lambda x: (np.clip(x + 3.0, 0.0, 6.0) / 6.0).astype(F32),
    "softplus": _softplus,
    "mish": lambda x: (x * np.tanh(_softplus(x).astype(np.float64))).astype(F32),
    "pow": lambda x, exponent: _pow(x, exponent),
    "nan_to_num": lambda x, nan=0.0, posinf=3.4028234663852886e38, neginf=-3.4028234663852886e38: np.nan_to_num(
        x, nan=F32(nan), posinf=F32(posinf), neginf=F32(neginf)).astype(F32),
    "round": np.rint,
}

#: op -> f(a, b) for two-operand ops
BINARY_REF = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
    "maximum": np.maximum, "minimum": np.minimum,
    "prelu": lambda x, w: np.where(x > 0, x, x * w),
    "remainder": lambda a, b: _remainder(a, b), "floor_divide": lambda a, b: _floor_divide(a, b),
}


def _remainder(a, b):
    """torch's float remainder: numpy's, but a zero keeps fmod's sign (numpy gives b's)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        mod = np.fmod(a, b)
        return np.where((mod != 0) & ((b < 0) != (mod < 0)), mod + b, mod).astype(F32)


def _floor_divide(a, b):
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        return np.floor_divide(a, b).astype(F32)   # (numpy's npy_divmod: ATen's div_floor_floating)


def eval_ops(ops, inputs):
    """Evaluate fused ops (``FusedOp`` records) on ``inputs``; every op's float32 result, in order."""
    vals = []

    def get(a):
        kind, x = a
        if kind == "ext":
            return inputs[x]
        if kind == "tmp":
            return vals[x]
        return F32(x)

    with np.errstate(all="ignore"):
        for op in ops:
            args = [get(a) for a in op.args]
            params = dict(op.params)
            if op.op in BINARY_REF:
                r = BINARY_REF[op.op](args[0], args[1])
            else:
                r = UNARY_REF[op.op](np.asarray(args[0], F32), **params)
            vals.append(np.asarray(r, F32))
    return vals
