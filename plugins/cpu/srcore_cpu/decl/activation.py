"""Activation kernels (out variants) and their in-place forms (natives)."""
from __future__ import annotations

from srcore.plugin import Kernel

from . import FLOATS, NUMERIC, SMALL_INTS, family

_act = family("activation")
_inp = family("inplace")

_OPS = [  # (op, impl, dtypes, matcher)
    ("aten::relu", "relu", NUMERIC + SMALL_INTS, "activation_matcher"),
    ("aten::relu6", "relu6", NUMERIC, None),
    ("aten::hardtanh", "hardtanh", NUMERIC, None),
    ("aten::threshold", "threshold", NUMERIC, None),
    ("aten::sigmoid", "sigmoid", NUMERIC, "activation_matcher"),
    ("aten::silu", "silu", FLOATS, None),
    ("aten::gelu", "gelu", FLOATS, None),
    ("aten::hardsigmoid", "hardsigmoid", FLOATS, None),
    ("aten::hardswish", "hardswish", FLOATS, None),
    ("aten::leaky_relu", "leaky_relu", FLOATS, None),
    ("aten::elu", "elu", FLOATS + ("float16",), None),
    ("aten::softplus", "softplus", FLOATS, None),
    ("aten::mish", "mish", FLOATS, None),
    ("aten::log_sigmoid", "log_sigmoid", FLOATS, None),
    ("aten::glu", "glu", FLOATS, None),
    ("aten::prelu", "prelu", FLOATS, None),
    ("aten::rrelu", "rrelu", FLOATS, None),
    ("aten::softshrink", "softshrink", FLOATS, None),
    ("aten::hardshrink", "hardshrink", FLOATS, None),
]

_INPLACE = [("aten::relu_", "relu_", NUMERIC), ("aten::relu6_", "relu6_", NUMERIC),
            ("aten::hardtanh_", "hardtanh_", NUMERIC), ("aten::threshold_", "threshold_", NUMERIC),
            ("aten::sigmoid_", "sigmoid_", FLOATS), ("aten::silu_", "silu_", FLOATS),
            ("aten::gelu_", "gelu_", FLOATS), ("aten::hardsigmoid_", "hardsigmoid_", FLOATS),
            ("aten::hardswish_", "hardswish_", FLOATS), ("aten::leaky_relu_", "leaky_relu_", FLOATS),
            ("aten::elu_", "elu_", FLOATS), ("aten::mish_", "mish_", FLOATS)]

KERNELS: list[Kernel] = (
    [_act(op, impl, dt, matcher=m) for op, impl, dt, m in _OPS]
    + [_inp(op, impl, dt, kind="native") for op, impl, dt in _INPLACE]
)
