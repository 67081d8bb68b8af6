"""Natives for arithmetic on Python numbers (sizes, loop counters, conditions)."""
from __future__ import annotations

from srcore.plugin import ANY_QUANTIZED, Kernel

from . import ANY, family

_k = family("scalar")
_cv = family("convert")
_NUM = ("int", "float", "int_float", "float_int", "")  # the overloads of a binary number op


def _ov(name: str, overload: str) -> str:
    return f"aten::{name}.{overload}" if overload else f"aten::{name}"


_BINARY = {"add": "add", "sub": "sub", "mul": "mul", "floordiv": "floordiv", "remainder": "remainder",
           "eq": "eq", "ne": "ne", "lt": "lt", "le": "le", "gt": "gt", "ge": "ge"}
_MATH = ["exp", "log", "log1p", "expm1", "sqrt", "sin", "cos", "tanh", "erf", "neg", "floor", "ceil", "round"]

_OPS = (
    [(_ov(n, o), impl) for n, impl in _BINARY.items() for o in _NUM]
    + [(_ov(n, o), n) for n in ("eq", "ne") for o in ("bool", "str", "int_list", "float_list", "bool_list",
                                                      "device")]
    + [(_ov(n, "str"), n) for n in ("lt", "le", "gt", "ge")]
    + [("aten::add.str", "add")]
    + [("aten::div.int", "div"), ("aten::div.float", "div"), ("aten::div", "div")]
    + [(_ov("pow", o), "pow") for o in ("int", "float", "int_float", "float_int", "Scalar_Scalar")]
    + [("aten::pow.int_to_int", "pow_int")]
    + [(_ov(m, o), m) for m in _MATH for o in ("int", "float", "Scalar")]
    + [(_ov("log", o), "log") for o in ("int_int", "float_float", "int_float", "float_int", "Scalar_Scalar")]
    + [(f"prim::abs.{o}", "abs") for o in ("int", "float", "Scalar")]
    + [(f"prim::{m}.{o}" if o else f"prim::{m}", m) for m in ("min", "max")
       for o in ("int", "float", "int_float", "float_int", "", "int_list", "self_int", "float_list",
                 "self_float", "bool_list", "self_bool")]
    + [("aten::sum.int", "sum"), ("aten::sum.float", "sum"), ("aten::sum.bool", "sum")]
    + [(f"aten::{f}.{o}", f) for f in ("all", "any") for o in ("int", "float", "bool")]
    + [(_ov("fmod", o), "fmod") for o in _NUM]
    + [(_ov("atan2", o), "atan2") for o in ("int", "float", "int_float", "float_int", "Scalar_Scalar")]
    + [(f"aten::__{n}__.{o}", n + "_") for n in ("and", "or", "xor") for o in ("bool", "int")]
    + [("aten::__not__", "not_"), ("aten::__is__", "is_"), ("aten::__isnot__", "isnot"),
       ("aten::__range_length", "range_length"), ("aten::__derive_index", "derive_index"),
       ("aten::isnan.float", "isnan"), ("aten::isinf.float", "isinf")]
)

_CONVERT = [("aten::Int.bool", "int_"), ("aten::Int.float", "int_"), ("aten::Int.Scalar", "int_"),
            ("aten::Float.Scalar", "float_"), ("aten::Float.int", "float_"), ("aten::Float.bool", "float_"),
            ("aten::Bool.int", "bool_"), ("aten::Bool.float", "bool_")]

KERNELS: list[Kernel] = (
    # ``x is None`` of an optional tensor compares identities, not elements: quantized ones too
    [_k(op, impl, ANY + (ANY_QUANTIZED,) if op in ("aten::__is__", "aten::__isnot__") else ANY, kind="native")
     for op, impl in _OPS]
    + [_cv(op, impl, ANY, kind="native") for op, impl in _CONVERT]
)
