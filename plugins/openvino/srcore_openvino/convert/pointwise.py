"""Pointwise ops: activations, arithmetic, identities."""
from __future__ import annotations

import math

from .table import FINITE_ONLY, INT_RULE_DTYPES, PRECISION, constant_divisor_ok, divide, f32, nan_checks, out, register


def _unary(fn):
    return lambda c: fn(c.o, c.x("self"))


for _name, _fn in {
    "aten::abs": lambda o, x: out(o.absolute(x)),
    "aten::neg": lambda o, x: out(o.negative(x)),
    "aten::exp": lambda o, x: exp(o, x),
    "aten::log": lambda o, x: out(o.log(x)),
    "aten::sqrt": lambda o, x: out(o.sqrt(x)),
    "aten::rsqrt": lambda o, x: divide(o, f32(o, 1.0), out(o.sqrt(x))),
    "aten::reciprocal": lambda o, x: divide(o, f32(o, 1.0), x),
    "aten::square": lambda o, x: out(o.multiply(x, x)),
    "aten::sigmoid": lambda o, x: out(o.sigmoid(x)),
    "aten::tanh": lambda o, x: out(o.tanh(x)),
    "aten::sin": lambda o, x: out(o.sin(x)),
    "aten::cos": lambda o, x: out(o.cos(x)),
    "aten::erf": lambda o, x: out(o.erf(x)),
    "aten::silu": lambda o, x: out(o.swish(x)),
    "aten::mish": lambda o, x: out(o.mish(x)),
    "aten::hardswish": lambda o, x: out(o.hswish(x)),
    "aten::hardsigmoid": lambda o, x: keep_nan(o, x, out(o.hsigmoid(x))),
    "aten::relu": lambda o, x: relu(o, x),
    "aten::relu6": lambda o, x: clamp(o, x, 0.0, 6.0),
}.items():
    register(_name)(_unary(_fn))


def keep_nan(o, x, y):
    """``y`` with NaN where ``x`` is NaN: OpenVINO's CPU plugin turns a NaN into inf (Exp) or 0
    (HSigmoid, Relu, Maximum), torch keeps it. (Not with the engine option ``nan_checks=False``.)"""
    if not nan_checks():
        return y
    return out(o.select(out(o.is_nan(x)), x, y))


def exp(o, x):
    return keep_nan(o, x, out(o.exp(x)))


def relu(o, x, after: str | None = None):
    """torch's relu, which keeps NaN (OpenVINO's Relu, Clamp and ``Maximum(x, 0)`` turn it into 0)
    and gives 0 at -inf (PRelu with slope 0 gives NaN). ``after``: the layer it is fused into,
    "conv" (srcore's conv2d_relu, conv2d_add_relu) or "linear" (linear_relu, a FFN).

    Standalone in float32 it is ``Maximum(0, x)``, zero first: the CPU plugin's max (``vmaxps``)
    returns its second operand when either is NaN, so NaN stays NaN and -inf gives 0, with no exp
    per element (elementwise_chain 1.06x -> 1.00-1.01x OpenVINO on its ONNX file, CPU time, 1
    thread, Sapphire Rapids). Behind a layer it is OpenVINO's Elu with alpha 0 (x > 0 ? x : 0 *
    (exp(x) - 1)), fused into the convolution or fully connected layer as Relu is; a Maximum is
    not (mobilenet_v3 1.33x in one run, 1.01-1.15x with Elu). Behind a convolution in bfloat16, where
    AMX makes the convolution 3x faster, the exp Elu computes per element weighs more:
    ``Select(x < 0, 0, x)``, a pass of its own, took 0.86x the time of Elu on resnet_small, 0.98x
    on mobilenet_v3 and 1.00x on unet_small (float32: 1.01x, 0.97x, 1.02x; CPU time, 1 thread,
    Sapphire Rapids). Behind a fully connected layer Elu stays (the Select's pass made
    transformer_block_explicit's bf16 engine 1.26x OpenVINO on its ONNX file). With
    ``nan_checks=False`` relu is OpenVINO's Relu (0.80x and 0.93x of Elu on resnet_small in bf16
    and f32). For finite inputs only (``FINITE_ONLY``, the engine's model for inputs within its
    proven bound) relu is Relu, but standalone in float32 still ``Maximum(0, x)``: Relu gives +0
    for -0, torch -0 (behind a layer Relu gives torch's +0 for negatives, where Elu gives -0)."""
    bf16 = PRECISION.get() == "bf16"
    if after is None and not bf16 and FINITE_ONLY.get():
        return out(o.maximum(f32(o, 0.0), x))
    if not nan_checks():
        return out(o.relu(x))
    if after == "conv" and bf16:
        # Less, not Greater: ordered on every ISA (see clamp)
        return out(o.select(out(o.less(x, f32(o, 0.0))), f32(o, 0.0), x))
    if after is None and not bf16:
        return out(o.maximum(f32(o, 0.0), x))
    return out(o.elu(x, 0.0))


def clamp(o, x, lo, hi):
    """torch's clamp: max then min, NaN inputs stay NaN, a NaN bound makes everything NaN,
    lo > hi gives hi everywhere. Both bounds are tested with Less: OpenVINO's AVX-512 kernels
    compute Greater and GreaterEqual with unordered predicates (true where an operand is NaN; its
    AVX2 kernels say false), Less and LessEqual with ordered ones on both, as IEEE does."""
    y = x
    if lo is not None:
        if isinstance(lo, float) and math.isnan(lo):
            return out(o.add(x, f32(o, float("nan"))))
        y = out(o.select(out(o.less(y, f32(o, lo))), f32(o, lo), y))
    if hi is not None:
        if isinstance(hi, float) and math.isnan(hi):
            return out(o.add(x, f32(o, float("nan"))))
        y = out(o.select(out(o.less(f32(o, hi), y)), f32(o, hi), y))
    return y


@register("aten::clamp", consts=("min", "max"))
def _conv_clamp(c):
    return clamp(c.o, c.x("self"), c.const("min", None), c.const("max", None))


@register("aten::clamp_min", consts=("min",))
def _conv_clamp_min(c):
    return clamp(c.o, c.x("self"), c.const("min"), None)


@register("aten::clamp_max", consts=("max",))
def _conv_clamp_max(c):
    return clamp(c.o, c.x("self"), None, c.const("max"))


@register("aten::hardtanh", consts=("min_val", "max_val"))
def _conv_hardtanh(c):
    return clamp(c.o, c.x("self"), float(c.const("min_val")), float(c.const("max_val")))


@register("aten::leaky_relu", consts=("negative_slope",))
def _conv_leaky_relu(c):
    o, x = c.o, c.x("self")
    slope = float(c.const("negative_slope"))
    return out(o.select(out(o.greater(x, f32(o, 0.0))), x, out(o.multiply(x, f32(o, slope)))))


@register("aten::gelu", consts=("approximate",), check=lambda n: n.const("approximate", "none") in ("none", "tanh"))
def _conv_gelu(c):
    return gelu(c.o, c.x("self"), c.const("approximate", "none"))


def gelu(o, x, approximate):
    return out(o.gelu(x, "erf" if approximate == "none" else "tanh"))


@register("aten::elu", consts=("alpha", "scale", "input_scale"))
def _conv_elu(c):
    o, x = c.o, c.x("self")
    alpha, scale, in_scale = (float(c.const(k)) for k in ("alpha", "scale", "input_scale"))
    if scale == 1.0 and in_scale == 1.0:
        return out(o.elu(x, alpha))
    neg = out(o.multiply(out(o.subtract(exp(o, out(o.multiply(x, f32(o, in_scale)))), f32(o, 1.0))),
                         f32(o, alpha * scale)))
    return out(o.select(out(o.greater(x, f32(o, 0.0))), out(o.multiply(x, f32(o, scale))), neg))


@register("aten::selu")
def _conv_selu(c):
    o = c.o
    return out(o.selu(c.x("self"), f32(o, 1.6732632423543772), f32(o, 1.0507009873554805)))


@register("aten::celu", consts=("alpha",), check=lambda n: constant_divisor_ok(n.const("alpha", 1.0))
          and n.const("alpha", 1.0) != 0)
def _conv_celu(c):
    o, x = c.o, c.x("self")
    alpha = float(c.const("alpha", 1.0))
    neg = out(o.multiply(out(o.subtract(exp(o, divide(o, x, f32(o, alpha))), f32(o, 1.0))), f32(o, alpha)))
    return out(o.select(out(o.greater(x, f32(o, 0.0))), x, neg))


@register("aten::softplus", consts=("beta", "threshold"),
          check=lambda n: float(n.const("threshold", 20.0)) <= 88.0 and constant_divisor_ok(n.const("beta", 1.0)))
def _conv_softplus(c):
    """torch: x where beta * x > threshold, else log1p(exp(beta * x)) / beta (a threshold above 88
    lets torch's exp overflow to inf where OpenVINO's fused SoftPlus does not: such nodes run
    elsewhere)."""
    o, x = c.o, c.x("self")
    beta, threshold = float(c.const("beta", 1.0)), float(c.const("threshold", 20.0))
    bx = x if beta == 1.0 else out(o.multiply(x, f32(o, beta)))
    sp = out(o.log(out(o.add(f32(o, 1.0), out(o.exp(bx))))))
    if beta != 1.0:
        sp = divide(o, sp, f32(o, beta))
    return keep_nan(o, x, out(o.select(out(o.greater(bx, f32(o, threshold))), x, sp)))


# -- binary ---------------------------------------------------------------------------------------
def scalar(o, v):
    return f32(o, float(v))


def _other(c):
    """The second operand: a tensor, or a Scalar as float32 (torch computes a float32 tensor's
    op with a Python scalar in float32)."""
    if c.op.endswith(".Scalar") or c.op in ("aten::add.Scalar", "aten::sub.Scalar"):
        return scalar(c.o, c.const("other"))
    return c.x("other")


def _scaled(c, v):
    alpha = c.const("alpha", 1)
    if alpha == 1:
        return v
    return out(c.o.multiply(v, scalar(c.o, alpha)))


@register("aten::add.Tensor", "aten::add.Scalar", consts=("alpha",))
def _conv_add(c):
    return out(c.o.add(c.x("self"), _scaled(c, _other(c))))


@register("aten::sub.Tensor", "aten::sub.Scalar", consts=("alpha",))
def _conv_sub(c):
    return out(c.o.subtract(c.x("self"), _scaled(c, _other(c))))


@register("aten::rsub.Tensor", "aten::rsub.Scalar", consts=("alpha",))
def _conv_rsub(c):
    return out(c.o.subtract(_other(c), _scaled(c, c.x("self"))))


@register("srcore::add_relu", consts=("alpha",))
def _conv_add_relu(c):
    return relu(c.o, out(c.o.add(c.x("self"), _scaled(c, c.x("other")))))


@register("aten::mul.Tensor", "aten::mul.Scalar")
def _conv_mul(c):
    return out(c.o.multiply(c.x("self"), _other(c)))


def _divisor_ok(n) -> bool:
    """A constant divisor (a Scalar, a weight) must have a normal reciprocal (see
    ``table.RECIPROCAL_NORMAL``); a divisor computed at run time is divided by exactly."""
    v = n.const("other", None)
    return v is None or constant_divisor_ok(v)


@register("aten::div.Tensor", "aten::div.Scalar", check=_divisor_ok)
def _conv_div(c):
    return divide(c.o, c.x("self"), _other(c))


def _nan_either(o, a, b, y):
    """``y`` with NaN wherever ``a`` or ``b`` is NaN (torch's maximum/minimum propagate NaN)."""
    if not nan_checks():
        return y
    nan = out(o.logical_or(out(o.is_nan(a)), out(o.is_nan(b))))
    return out(o.select(nan, out(o.add(a, b)), y))


@register("aten::maximum")
def _conv_maximum(c):
    o, a, b = c.o, c.x("self"), c.x("other")
    return _nan_either(o, a, b, out(o.maximum(a, b)))


@register("aten::minimum")
def _conv_minimum(c):
    o, a, b = c.o, c.x("self"), c.x("other")
    return _nan_either(o, a, b, out(o.minimum(a, b)))


@register("aten::pow.Tensor_Scalar", consts=("exponent",))
def _conv_pow(c):
    o, x = c.o, c.x("self")
    e = c.const("exponent")
    e = float(e)
    if e == 0.0:   # torch: pow(x, 0) = 1, NaN included
        return out(o.broadcast(f32(o, 1.0), out(o.shape_of(x, "i64"))))
    if e == 1.0:
        return x
    if e == 2.0:
        return out(o.multiply(x, x))
    if e == 3.0:
        return out(o.multiply(out(o.multiply(x, x)), x))
    if e == 0.5:
        return out(o.sqrt(x))
    if e == -1.0:
        return divide(o, f32(o, 1.0), x)
    if e == -2.0:
        return divide(o, f32(o, 1.0), out(o.multiply(x, x)))
    if e == -0.5:
        return divide(o, f32(o, 1.0), out(o.sqrt(x)))
    return out(o.power(x, f32(o, e)))


@register("aten::pow.Tensor_Tensor")
def _conv_pow_tt(c):
    return out(c.o.power(c.x("self"), c.x("exponent")))


# -- identities -----------------------------------------------------------------------------------
def _identity(c):
    return c.x("self")


register("aten::contiguous", consts=("memory_format",))(_identity)
register("aten::clone", consts=("memory_format",))(_identity)
register("aten::detach")(_identity)
register("aten::dropout", consts=("p", "train"),
         check=lambda n: n.const("train", True) is False and 0.0 <= float(n.const("p", 0.5)) <= 1.0)(
    lambda c: c.x("input"))
register("aten::feature_dropout", consts=("p", "train"),
         check=lambda n: n.const("train", True) is False and 0.0 <= float(n.const("p", 0.5)) <= 1.0)(
    lambda c: c.x("input"))


def _to_float_ok(n) -> bool:
    """``x.to(float32)``: of a float32 tensor (nothing to do) or an int64 one (an attention mask)."""
    return len(n.output_types) == 1 and getattr(n.output_types[0], "dtype", None) == "float32"


@register("aten::to.dtype", consts=("dtype", "non_blocking", "copy", "memory_format"), check=_to_float_ok,
          tensor_dtypes=INT_RULE_DTYPES)
def _to_float(c):
    x = c.x("self")
    if x.get_element_type().is_integral():
        return out(c.o.convert(x, "f32"))
    return x


