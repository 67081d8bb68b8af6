"""Activation kernels (out variants): relu, gelu, silu, sigmoid, hardswish, elu, softplus, ...

Each writes into ``out`` with at most one temporary. scipy is imported lazily
(``expit`` for sigmoid/silu, ``erf`` for exact GELU).
"""
from __future__ import annotations

import math

import numpy as np

from srcore.plugin import KernelError
from srcore.plugin import TensorType
from srcore.plugin import NodeInfo, Specialized

from .promotion import float_type


def _alloc(x, out, floating=True):
    if out is not None:
        return out
    return np.empty(x.shape, float_type(x.dtype) if floating else x.dtype)


def relu(self, *, out=None):
    """``aten::relu``: ``max(x, 0)``; NaN stays NaN."""
    r = np.maximum(self, self.dtype.type(0), out=_alloc(self, out, floating=False))
    return r


def relu6(self, *, out=None):
    return hardtanh(self, 0.0, 6.0, out=out)


def hardtanh(self, min_val=-1, max_val=1, *, out=None):
    """``aten::hardtanh``: clamp to ``[min_val, max_val]``."""
    out = _alloc(self, out, floating=False)
    if self.dtype.kind in "iu":  # torch casts the bounds to the integer type (truncation): -0.5 -> 0
        min_val, max_val = int(min_val), int(max_val)
    np.maximum(self, min_val, out=out)
    np.minimum(out, max_val, out=out)
    return out


def threshold(self, threshold, value, *, out=None):
    """``aten::threshold``: ``x if x > threshold else value``."""
    out = _alloc(self, out, floating=False)
    np.copyto(out, self)
    np.copyto(out, value, where=~(self > threshold), casting="unsafe")
    return out


def sigmoid(self, *, out=None):
    from scipy.special import expit

    return expit(self, out=_alloc(self, out))


def glu(self, dim=-1, *, out=None):
    """``aten::glu``: the first half of ``dim`` times the sigmoid of the second half."""
    from scipy.special import expit

    if self.ndim == 0:
        raise KernelError("glu does not support scalars because halving size must be even")
    d = dim % self.ndim
    n = self.shape[d]
    if n % 2:
        raise KernelError(f"glu: Halving dimension must be even, but dimension {d} is size {n}")
    a, b = np.split(self, 2, axis=d)
    if out is None:
        out = np.empty(a.shape, self.dtype)
    expit(b, out=out)
    np.multiply(out, a, out=out)
    return out


def silu(self, *, out=None):
    """``aten::silu``: ``x * sigmoid(x)``."""
    from scipy.special import expit

    out = expit(self, out=_alloc(self, out))
    np.multiply(out, self, out=out)
    return out


def gelu(self, *, approximate="none", out=None):
    """``aten::gelu``: exact ``x * Phi(x)`` via erf, or the tanh approximation."""
    out = _alloc(self, out)
    if approximate == "tanh":
        # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        np.multiply(self, self, out=out)
        np.multiply(out, 0.044715, out=out)
        np.add(out, 1.0, out=out)
        np.multiply(out, self, out=out)
        np.multiply(out, math.sqrt(2.0 / math.pi), out=out)
        np.tanh(out, out=out)
    elif approximate == "none":
        from scipy.special import erf

        np.multiply(self, 1.0 / math.sqrt(2.0), out=out)
        erf(out, out=out)
    else:
        raise ValueError(f"approximate argument must be either none or tanh, not {approximate!r}")
    np.add(out, 1.0, out=out)
    np.multiply(out, self, out=out)
    np.multiply(out, 0.5, out=out)
    return out


def hardsigmoid(self, *, out=None):
    """``aten::hardsigmoid``: ``clamp(x + 3, 0, 6) / 6``."""
    out = _alloc(self, out)
    np.add(self, 3.0, out=out)
    # maximum then minimum, not np.clip (its Python wrapper is ~2 us of a small tensor's call); NaN stays
    np.maximum(out, 0.0, out=out)
    np.minimum(out, 6.0, out=out)
    np.divide(out, 6.0, out=out)
    return out


def hardswish(self, *, out=None):
    """``aten::hardswish``: ``x * clamp(x + 3, 0, 6) / 6``."""
    out = hardsigmoid(self, out=out)
    np.multiply(out, self, out=out)
    return out


def leaky_relu(self, negative_slope=0.01, *, out=None):
    """``aten::leaky_relu``: ``x if x > 0 else x * negative_slope``, which is ``max(x, s * x)`` for
    ``s <= 1`` and ``min(x, s * x)`` above (both vectorize; a masked copy is ~10x slower). A slope of
    0 keeps the masked copy: ``0 * inf`` is NaN where torch gives ``inf``."""
    out = _alloc(self, out)
    np.multiply(self, negative_slope, out=out)
    if negative_slope == 0:
        np.copyto(out, self, where=self > 0)
    else:
        (np.maximum if negative_slope <= 1 else np.minimum)(out, self, out=out)
    return out


def prelu(self, weight, *, out=None):
    """``aten::prelu`` (nn.PReLU): ``x if x > 0 else w * x``, one ``w`` per channel (dim 1) or one
    shared."""
    if weight.size != 1:
        c = self.shape[1] if self.ndim >= 2 else 1       # torch: a 1-D input is one channel
        if weight.size != c:
            raise KernelError(f"prelu: Mismatch of parameter numbers and input channel size. Found parameter "
                              f"numbers = {weight.size} and channel size = {c}.")
        if self.ndim >= 2:
            weight = weight.reshape((1, c) + (1,) * (self.ndim - 2))
    else:
        weight = weight.reshape(())
    out = _alloc(self, out)
    np.multiply(self, weight, out=out)
    np.copyto(out, self, where=self > 0)
    return out


def rrelu(self, lower=0.125, upper=1.0 / 3.0, training=False, generator=None, *, out=None):
    """``aten::rrelu`` in eval: a leaky ReLU with the mean slope ``(lower + upper) / 2``."""
    if training:
        raise KernelError("rrelu: training=True samples random slopes; srcore runs models in eval")
    return leaky_relu(self, (lower + upper) / 2, out=out)


def softshrink(self, lambd=0.5, *, out=None):
    """``aten::softshrink``: ``x - l`` above ``l``, ``x + l`` below ``-l``, else 0 (NaN stays NaN)."""
    out = _alloc(self, out)
    lam = self.dtype.type(lambd)
    np.copyto(out, np.where(np.abs(self) <= lam, 0, self - np.copysign(lam, self)))
    return out


def hardshrink(self, lambd=0.5, *, out=None):
    """``aten::hardshrink``: 0 where ``|x| <= l``, else ``x`` (NaN stays NaN)."""
    out = _alloc(self, out)
    lam = self.dtype.type(lambd)
    np.copyto(out, np.where(np.abs(self) <= lam, 0, self))
    return out


def elu(self, alpha=1, scale=1, input_scale=1, *, out=None):
    """``aten::elu``: ``scale * (x if x > 0 else alpha * (exp(x * input_scale) - 1))``."""
    out = _alloc(self, out)
    if input_scale != 1:   # (x * 1 is exact: the pass is skipped, a small tensor's call is ~1 us a pass)
        np.multiply(self, input_scale, out=out)
        np.expm1(out, out=out)
    else:
        np.expm1(self, out=out)
    np.multiply(out, alpha, out=out)
    np.copyto(out, self, where=self > 0)
    if scale != 1:
        np.multiply(out, scale, out=out)
    return out


def softplus(self, beta=1, threshold=20, *, out=None):
    """``aten::softplus``: ``log1p(exp(beta x)) / beta``, linear where ``beta x > threshold``."""
    out = _alloc(self, out)
    bx = self if beta == 1 else np.multiply(self, beta, out=out)   # (x * 1 is exact: a small call's pass saved)
    big = bx > threshold
    np.logaddexp(bx, 0.0, out=out)  # log(1 + exp(bx)) without overflow
    if beta != 1:
        np.divide(out, beta, out=out)
    np.copyto(out, self, where=big)
    return out


def mish(self, *, out=None):
    """``aten::mish``: ``x * tanh(softplus(x))``."""
    out = softplus(self, out=out)
    np.tanh(out, out=out)
    np.multiply(out, self, out=out)
    return out


def log_sigmoid(self, *, out=None):
    """``aten::log_sigmoid``: ``-log(1 + exp(-x))``."""
    out = _alloc(self, out)
    np.negative(self, out=out)
    np.logaddexp(out, 0.0, out=out)
    np.negative(out, out=out)
    return out


# --- matcher -----------------------------------------------------------------------------------

def _relu_for(dtype: str):
    zero = np.zeros((), dtype)  # a 0-d zero of the input dtype: ~15% faster than a Python 0.0

    def relu(self, out=None):
        return np.maximum(self, zero, out=out)
    return relu


def activation_matcher(node: NodeInfo):
    """Float in, same float out, known nonzero rank: relu/sigmoid become one ufunc call;
    otherwise the generic kernel."""
    return _fast_activation(node) or {"aten::relu": relu, "aten::sigmoid": sigmoid}.get(node.op)


def _fast_activation(node: NodeInfo):
    src = node.args[0].type
    dst = node.output_types[0] if node.output_types else None
    if not (isinstance(src, TensorType) and isinstance(dst, TensorType)) or not dst.shape:
        return None
    if src.dtype != dst.dtype or src.dtype not in ("float32", "float64"):
        return None
    if node.op == "aten::relu":
        return Specialized(_relu_for(src.dtype), args=(0,))
    if node.op == "aten::sigmoid":
        from scipy.special import expit
        return Specialized(expit, args=(0,))
    return None
