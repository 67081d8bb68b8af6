"""Elementwise kernels: binary arithmetic, comparisons, unary math, clamp/where/masks, in-place forms."""
from __future__ import annotations

from srcore.plugin import Kernel

from . import ALL, FLOATS, INTS, NUMERIC, SMALL_INTS, WIDE_UINTS, family

_bin = family("elementwise")
_un = family("unary")
_ter = family("ternary")
_inp = family("inplace")
_BM = "binary_matcher"
_UM = "unary_matcher"
_BITS = INTS + SMALL_INTS + WIDE_UINTS + ("bool",)
_SHIFT = INTS + SMALL_INTS + WIDE_UINTS

_BINARY = [  # (op, impl, dtypes, matcher)
    ("aten::add.Tensor", "add", ALL, _BM), ("aten::add.Scalar", "add", ALL, _BM),
    ("aten::sub.Tensor", "sub", NUMERIC, _BM), ("aten::sub.Scalar", "sub", NUMERIC, _BM),
    ("aten::rsub.Tensor", "rsub", NUMERIC, None), ("aten::rsub.Scalar", "rsub", NUMERIC, None),
    ("aten::mul.Tensor", "mul", ALL, _BM), ("aten::mul.Scalar", "mul", ALL, _BM),
    ("aten::div.Tensor", "div", ALL, _BM), ("aten::div.Scalar", "div", ALL, _BM),
    ("aten::div.Tensor_mode", "div", NUMERIC, _BM), ("aten::div.Scalar_mode", "div", NUMERIC, _BM),
    ("aten::floor_divide", "floor_divide", NUMERIC, _BM),
    ("aten::floor_divide.Scalar", "floor_divide", NUMERIC, _BM),
    ("aten::remainder.Tensor", "remainder", NUMERIC, _BM), ("aten::remainder.Scalar", "remainder", NUMERIC, _BM),
    ("aten::remainder.Scalar_Tensor", "remainder", NUMERIC, None),
    ("aten::atan2", "atan2", NUMERIC, None),
    ("aten::fmod.Tensor", "fmod", NUMERIC, _BM), ("aten::fmod.Scalar", "fmod", NUMERIC, _BM),
    ("aten::pow.Tensor_Tensor", "pow", NUMERIC, _BM), ("aten::pow.Tensor_Scalar", "pow", NUMERIC, _BM),
    ("aten::pow.Scalar", "pow", NUMERIC, None),
    ("aten::minimum", "minimum", ALL, _BM), ("aten::maximum", "maximum", ALL, _BM),
    ("aten::max.other", "maximum", ALL, _BM), ("aten::min.other", "minimum", ALL, _BM),
    ("aten::bitwise_and.Tensor", "bitwise_and", _BITS, _BM), ("aten::bitwise_and.Scalar", "bitwise_and", _BITS, _BM),
    ("aten::bitwise_or.Tensor", "bitwise_or", _BITS, _BM), ("aten::bitwise_or.Scalar", "bitwise_or", _BITS, _BM),
    ("aten::bitwise_and.Scalar_Tensor", "bitwise_and", _BITS, None),
    ("aten::bitwise_or.Scalar_Tensor", "bitwise_or", _BITS, None),
    ("aten::bitwise_xor.Tensor", "bitwise_xor", _BITS, None), ("aten::bitwise_xor.Scalar", "bitwise_xor", _BITS, None),
    *((f"aten::bitwise_{d}_shift.{ov}", f"bitwise_{d}_shift", _SHIFT, None)
      for d in ("left", "right") for ov in ("Tensor", "Tensor_Scalar", "Scalar_Tensor")),
    ("aten::logical_and", "logical_and", ALL, _BM), ("aten::logical_or", "logical_or", ALL, _BM),
    ("aten::logical_xor", "logical_xor", ALL, _BM),
] + [(f"aten::{c}.{o}", c, ALL + ("uint8",), _BM) for c in ("eq", "ne", "lt", "le", "gt", "ge")
     for o in ("Tensor", "Scalar")]  # uint8: image thresholds, and export's core decomposition of eye

_FLOATING = ["exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "reciprocal", "sin", "cos", "tanh", "erf", "log2",
             "log10"]
_SAME = ["neg", "abs", "sign", "floor", "ceil", "trunc", "round", "square"]

_TERNARY = [  # (op, impl, dtypes, matcher)
    ("aten::clamp", "clamp", NUMERIC, "clamp_matcher"), ("aten::clamp.Tensor", "clamp", NUMERIC, "clamp_tensor_matcher"),
    ("aten::clamp_min", "clamp_min", NUMERIC, "clamp_matcher"), ("aten::clamp_min.Tensor", "clamp_min", NUMERIC, None),
    ("aten::clamp_max", "clamp_max", NUMERIC, "clamp_matcher"), ("aten::clamp_max.Tensor", "clamp_max", NUMERIC, None),
    ("aten::where.self", "where", ALL, None), ("aten::where.ScalarOther", "where", ALL, None),
    ("aten::where.ScalarSelf", "where", ALL, None), ("aten::where.Scalar", "where", ALL, None),
    ("aten::masked_fill.Scalar", "masked_fill", ALL, None), ("aten::masked_fill.Tensor", "masked_fill", ALL, None),
    ("aten::lerp.Scalar", "lerp", FLOATS, None), ("aten::lerp.Tensor", "lerp", FLOATS, None),
    ("aten::addcmul", "addcmul", NUMERIC, None),
]

# in-place forms: (op, impl in kernels.inplace, dtypes)
_INPLACE = [
    ("aten::add_.Tensor", "add_", ALL), ("aten::add_.Scalar", "add_", ALL),
    ("aten::sub_.Tensor", "sub_", NUMERIC), ("aten::sub_.Scalar", "sub_", NUMERIC),
    ("aten::mul_.Tensor", "mul_", ALL), ("aten::mul_.Scalar", "mul_", ALL),
    ("aten::div_.Tensor", "div_", FLOATS), ("aten::div_.Scalar", "div_", FLOATS),
    ("aten::div_.Tensor_mode", "div_", NUMERIC), ("aten::div_.Scalar_mode", "div_", NUMERIC),
    ("aten::floor_divide_.Tensor", "floor_divide_", NUMERIC),
    ("aten::floor_divide_.Scalar", "floor_divide_", NUMERIC),
    ("aten::remainder_.Tensor", "remainder_", NUMERIC), ("aten::remainder_.Scalar", "remainder_", NUMERIC),
    ("aten::pow_.Tensor", "pow_", NUMERIC), ("aten::pow_.Scalar", "pow_", NUMERIC),
    ("aten::bitwise_and_.Tensor", "bitwise_and_", _BITS), ("aten::bitwise_and_.Scalar", "bitwise_and_", _BITS),
    ("aten::bitwise_or_.Tensor", "bitwise_or_", _BITS), ("aten::bitwise_or_.Scalar", "bitwise_or_", _BITS),
    ("aten::logical_and_", "logical_and_", ALL), ("aten::logical_or_", "logical_or_", ALL),
    ("aten::logical_xor_", "logical_xor_", ALL), ("aten::logical_not_", "logical_not_", ALL),
    ("aten::bitwise_not_", "bitwise_not_", _BITS),
    ("aten::clamp_", "clamp_", NUMERIC), ("aten::clamp_.Tensor", "clamp_", NUMERIC),
    ("aten::clamp_min_", "clamp_min_", NUMERIC), ("aten::clamp_min_.Tensor", "clamp_min_", NUMERIC),
    ("aten::clamp_max_", "clamp_max_", NUMERIC), ("aten::clamp_max_.Tensor", "clamp_max_", NUMERIC),
    ("aten::masked_fill_.Scalar", "masked_fill_", ALL), ("aten::masked_fill_.Tensor", "masked_fill_", ALL),
    ("aten::lerp_.Scalar", "lerp_", FLOATS), ("aten::lerp_.Tensor", "lerp_", FLOATS),
    ("aten::addcmul_", "addcmul_", NUMERIC), ("aten::nan_to_num_", "nan_to_num_", NUMERIC),
    ("aten::zero_", "zero_", ALL), ("aten::fill_.Scalar", "fill_", ALL), ("aten::fill_.Tensor", "fill_", ALL),
] + [(f"aten::{c}_.{o}", c + "_", ALL) for c in ("eq", "ne", "lt", "le", "gt", "ge") for o in ("Tensor", "Scalar")] \
  + [(f"aten::{n}_", n + "_", FLOATS) for n in _FLOATING] \
  + [(f"aten::{n}_", n + "_", NUMERIC) for n in _SAME]

# float16 (numpy) and bfloat16 (ml_dtypes): each elementwise op computes in float32 and rounds once,
# as torch's CPU kernels do
_HALF = ("float16", "bfloat16")
_HALF_OK = {"add", "sub", "rsub", "mul", "div", "minimum", "maximum", "eq", "ne", "lt", "le", "gt", "ge", "neg",
            "abs", "exp", "log", "sqrt", "tanh", "sin", "cos", "floor", "ceil", "trunc", "round", "sign", "square",
            "reciprocal", "erf", "log1p", "expm1", "log2", "log10", "pow", "where", "clamp", "masked_fill",
            "remainder", "fmod"}


def _with_half(op: str, dtypes):
    base = op.split("::", 1)[-1].split(".")[0].rstrip("_")
    return tuple(dtypes) + _HALF if base in _HALF_OK and "float32" in dtypes else dtypes


#: ops whose integer kernels take the narrow integer types as well (checked against torch's OpInfo samples)
_SMALL_OK = {"add", "sub", "rsub", "mul", "div", "floor_divide", "remainder", "fmod", "minimum", "maximum",
             "max", "min", "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor", "neg",
             "abs", "sign", "where", "clamp", "clamp_min", "clamp_max", "masked_fill"}


def _with_small(op: str, dtypes):
    base = op.split("::", 1)[-1].split(".")[0].rstrip("_")
    if base not in _SMALL_OK or "int64" not in dtypes:
        return dtypes
    return tuple(dtypes) + tuple(d for d in SMALL_INTS + WIDE_UINTS if d not in dtypes)


def _dtypes(op: str, dtypes):
    return _with_small(op, _with_half(op, dtypes))


KERNELS: list[Kernel] = (
    [_bin(op, impl, _dtypes(op, dt), matcher=m) for op, impl, dt, m in _BINARY]
    + [_un(f"aten::{n}", n, _with_half(n, NUMERIC), matcher=_UM) for n in _FLOATING if n != "rsqrt"]
    + [_un("aten::rsqrt", "rsqrt", NUMERIC)]
    + [_un(f"aten::{n}", n, _dtypes(n, NUMERIC), matcher=_UM) for n in _SAME]
    + [_un("aten::round.decimals", "round", FLOATS),
       _un("aten::bitwise_not", "bitwise_not", _BITS),
       _un("aten::isnan", "isnan", ALL + _HALF), _un("aten::isinf", "isinf", ALL + _HALF),
       _un("aten::logical_not", "logical_not", ALL),
       _un("aten::nan_to_num", "nan_to_num", NUMERIC)]
    + [_un("prim::abs", "abs", NUMERIC, matcher=_UM)]
    + [_ter(op, impl, _dtypes(op, dt), matcher=m) for op, impl, dt, m in _TERNARY]
    + [_inp(op, impl, dt, kind="native") for op, impl, dt in _INPLACE]
)
