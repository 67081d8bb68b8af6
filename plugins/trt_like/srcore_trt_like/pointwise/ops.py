"""The op table of pointwise kernels, and the float32 scalar functions its templates call.

One :class:`OpDef` per op: arity, named float parameters with their defaults, and a numba
expression template. A generated kernel evaluates ``template.format(*operands, **params)``
where each operand and parameter is the name of a float32 local or module constant, so a
template may use an operand several times. The scalar functions below reproduce torch's
float32 CPU formulas (the vectorized ATen kernels: same operation order, NaN propagation and
infinities), with :mod:`.fastmath` for the transcendental parts.
"""
from __future__ import annotations

import math

import attrs

from ..kernels.fastmath import (F32, clamp, clamp_ir, exp_ir, expm1_ir, float32_function, gelu,  # noqa: F401
                                gelu_ir, gelu_tanh, gelu_tanh_ir, hardsigmoid, hardsigmoid_ir, hardswish,
                                hardswish_ir, leaky_relu, leaky_relu_ir, log1p_ir, silu, silu_ir, tanh_ir, where)


def maximum_ir(a: F32, b: F32) -> F32:
    return where((a < b) | b.is_nan(), b, a)           # NaN from either side, as torch


def minimum_ir(a: F32, b: F32) -> F32:
    return where((b < a) | b.is_nan(), b, a)


def relu_ir(x: F32) -> F32:
    return where(x < 0.0, 0.0, x)                       # NaN and -0.0 pass through, as in torch


def relu6_ir(x: F32) -> F32:
    return where(x > 6.0, 6.0, where(x < 0.0, 0.0, x))


def reciprocal_ir(x: F32) -> F32:
    return 1.0 / x


def rsqrt_ir(x: F32) -> F32:
    return 1.0 / x.call("llvm.sqrt")


def pow_ir(x: F32, e: F32) -> F32:
    """torch.pow(Tensor, Scalar): the exponents torch special-cases take its formulas (and,
    ``e`` being a constant, LLVM folds the selects and vectorizes); others call powf."""
    y = x.call("llvm.pow", e)
    for value, special in ((-2.0, 1.0 / (x * x)), (-1.0, 1.0 / x), (-0.5, 1.0 / x.call("llvm.sqrt")),
                           (0.5, x.call("llvm.sqrt")), (3.0, x * x * x), (2.0, x * x), (1.0, x),
                           (0.0, 1.0)):
        y = where(e == value, special, y)
    return y


def elu_ir(x: F32, alpha: F32, scale: F32, input_scale: F32) -> F32:
    # torch: negcoef = alpha * scale in float32; x <= 0 ? expm1(x * input_scale) * negcoef : x * scale
    return where(x <= 0.0, expm1_ir(x * input_scale) * (alpha * scale), x * scale)


def mish_ir(x: F32) -> F32:
    return x * tanh_ir(log1p_ir(exp_ir(x)))


def softplus_ir(x: F32, beta: F32, threshold: F32) -> F32:
    xb = x * beta
    return where(xb > threshold, x, log1p_ir(exp_ir(xb)) / beta)


def nan_to_num_ir(x: F32, nan: F32, posinf: F32, neginf: F32) -> F32:
    return where(x.is_nan(), nan, where(x == math.inf, posinf, where(x == -math.inf, neginf, x)))


def round_ir(x: F32) -> F32:
    return x.call("llvm.roundeven")                     # torch's nearbyint: halves to even


def _xor(p, q):
    return (p & ~q) | (~p & q)


def remainder_ir(a: F32, b: F32) -> F32:
    """torch's float remainder (ATen's): ``fmod``, plus ``b`` where its sign differs from ``b``'s
    (Python's rule; a zero keeps fmod's sign: ``-0.0 % 3`` is -0.0, unlike numpy's +0.0)."""
    mod = a.fmod(b)
    return where((mod != 0.0) & _xor(b < 0.0, mod < 0.0), mod + b, mod)


def floor_divide_ir(a: F32, b: F32) -> F32:
    """torch's float ``floor_divide`` (ATen's ``div_floor_floating``, CPython's divmod): ``(a - fmod)
    / b`` less one where the signs differ, floored and rounded up past .5; a zero quotient takes
    the sign of ``a / b``; a zero divisor gives ``a / b``."""
    mod = a.fmod(b)
    div = (a - mod) / b
    div = where((mod != 0.0) & _xor(b < 0.0, mod < 0.0), div - 1.0, div)
    low = div.call("llvm.floor")
    low = where(div - low > 0.5, low + 1.0, low)
    q = a / b
    negative = (q < 0.0) | ((q == 0.0) & (1.0 / q < 0.0))   # (copysign(0, q): -0.0 for a -0.0 quotient)
    return where(b == 0.0, q, where(div != 0.0, low, where(negative, -0.0, 0.0)))


maximum = float32_function(maximum_ir)
minimum = float32_function(minimum_ir)
relu = float32_function(relu_ir)
relu6 = float32_function(relu6_ir)
reciprocal = float32_function(reciprocal_ir)
rsqrt = float32_function(rsqrt_ir)
pow_scalar = float32_function(pow_ir)
elu = float32_function(elu_ir)
mish = float32_function(mish_ir)
softplus = float32_function(softplus_ir)
nan_to_num = float32_function(nan_to_num_ir)
round_even = float32_function(round_ir)
remainder = float32_function(remainder_ir)
floor_divide = float32_function(floor_divide_ir)

#: float32's largest finite value: nan_to_num's default for +inf (and its negative for -inf)
F32_MAX = 3.4028234663852886e38


@attrs.frozen
class OpDef:
    """One pointwise op: ``arity`` float32 operands (tensors or scalars), float parameters
    ``params`` (name, default; ``None``: required) and the numba expression computing it."""

    name: str
    arity: int
    template: str
    params: tuple[tuple[str, float | None], ...] = ()

    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.params)


_INF = math.inf

#: every op a pointwise kernel can compute, by name
OPS: dict[str, OpDef] = {d.name: d for d in (
    OpDef("add", 2, "({0} + {1})"),
    OpDef("sub", 2, "({0} - {1})"),
    OpDef("mul", 2, "({0} * {1})"),
    OpDef("div", 2, "({0} / {1})"),
    OpDef("maximum", 2, "ops.maximum({0}, {1})"),
    OpDef("minimum", 2, "ops.minimum({0}, {1})"),
    OpDef("neg", 1, "(-{0})"),
    OpDef("abs", 1, "abs({0})"),
    OpDef("square", 1, "({0} * {0})"),
    OpDef("sqrt", 1, "np.sqrt({0})"),
    OpDef("rsqrt", 1, "ops.rsqrt({0})"),
    OpDef("reciprocal", 1, "ops.reciprocal({0})"),
    OpDef("pow", 1, "ops.pow_scalar({0}, {exponent})", (("exponent", None),)),
    OpDef("exp", 1, "fm.exp({0})"),
    OpDef("expm1", 1, "fm.expm1({0})"),
    OpDef("log", 1, "fm.log({0})"),
    OpDef("log1p", 1, "fm.log1p({0})"),
    OpDef("erf", 1, "fm.erf({0})"),
    OpDef("tanh", 1, "fm.tanh({0})"),
    OpDef("sin", 1, "fm.sin({0})"),
    OpDef("cos", 1, "fm.cos({0})"),
    OpDef("sigmoid", 1, "fm.sigmoid({0})"),
    OpDef("relu", 1, "ops.relu({0})"),
    OpDef("relu6", 1, "ops.relu6({0})"),
    OpDef("clamp", 1, "ops.clamp({0}, {min}, {max})", (("min", -_INF), ("max", _INF))),
    OpDef("hardtanh", 1, "ops.clamp({0}, {min_val}, {max_val})", (("min_val", -1.0), ("max_val", 1.0))),
    OpDef("leaky_relu", 1, "ops.leaky_relu({0}, {negative_slope})", (("negative_slope", 0.01),)),
    OpDef("prelu", 2, "ops.leaky_relu({0}, {1})"),
    OpDef("elu", 1, "ops.elu({0}, {alpha}, {scale}, {input_scale})",
          (("alpha", 1.0), ("scale", 1.0), ("input_scale", 1.0))),
    OpDef("gelu", 1, "ops.gelu({0})"),
    OpDef("gelu_tanh", 1, "ops.gelu_tanh({0})"),
    OpDef("silu", 1, "ops.silu({0})"),
    OpDef("mish", 1, "ops.mish({0})"),
    OpDef("hardsigmoid", 1, "ops.hardsigmoid({0})"),
    OpDef("hardswish", 1, "ops.hardswish({0})"),
    OpDef("softplus", 1, "ops.softplus({0}, {beta}, {threshold})", (("beta", 1.0), ("threshold", 20.0))),
    OpDef("nan_to_num", 1, "ops.nan_to_num({0}, {nan}, {posinf}, {neginf})",
          (("nan", 0.0), ("posinf", F32_MAX), ("neginf", -F32_MAX))),
    OpDef("round", 1, "ops.round_even({0})"),
    OpDef("remainder", 2, "ops.remainder({0}, {1})"),
    OpDef("floor_divide", 2, "ops.floor_divide({0}, {1})"),
)}
