"""The inputs on which an OpenVINO model provably computes no NaN and no infinity.

torch's NaN semantics cost srcore's engines a few percent where OpenVINO's fused kernels differ
(a relu behind a convolution is ``Elu(0)``, an exp per element; a max pool needs a mask: see
``pointwise.relu`` and ``conv._max_pool``). Those checks only change values when a NaN or an
infinity occurs. :func:`input_bound` walks the model built without them and bounds the magnitude
of every value it computes, given inputs within ``±B``; it returns the largest power of two
``B`` for which every bound stays below :data:`LIMIT`, or None when an op has no rule here (or
an input is not float). For finite inputs within ``±B`` no value of the model can overflow, and
none of these ops makes a NaN out of finite values, so the model without the checks gives the
checked model's answer (the checks only fire on NaN and infinities) and the engine may run it.
"""
from __future__ import annotations

import math

import numpy as np

#: every value's bound must stay below this. float32's largest is ~2^128; the 2^16 of headroom is
#: for kernels that do not sum directly (a Winograd or FFT convolution's transformed tiles reach a
#: few hundred times the direct sum's magnitude) and that another CPU's OpenVINO may choose
LIMIT = 2.0 ** 112
#: factor on every bound for rounding (bf16 rounds at 2^-8 relative) ...
ROUNDING = 1.01
#: ... and on sums of products: a float32 sum of K terms is within K * 2^-24 (relative) of the
#: sum of their magnitudes in any order; this covers K up to 2^20
SUM_MARGIN = 1.0625
#: the smallest bound worth a fast path: below it ordinary inputs would miss it
MIN_BOUND = 2.0 ** 4

_SAME = {"Relu", "MaxPool", "AvgPool", "AdaptiveAvgPool", "ReduceMean", "ReduceMax", "ReduceMin", "Reshape",
         "Squeeze", "Unsqueeze", "Transpose", "StridedSlice", "Slice", "Result", "HSwish", "Swish", "Gelu",
         "Broadcast", "Tile", "DepthToSpace", "SpaceToDepth"}
_UNIT = {"Sigmoid", "HSigmoid", "Tanh", "Softmax", "Erf"}
#: boolean results (a clamp's or leaky relu's Select conditions), whatever their operands
_BOOL = {"Less", "LessEqual", "Greater", "GreaterEqual", "Equal", "NotEqual", "LogicalAnd", "LogicalOr",
         "LogicalNot"}


class Unbounded(Exception):
    """An op without a rule, or a bound past :data:`LIMIT`."""


def input_bound(model) -> float | None:
    """The largest ``B`` (a power of two, at least :data:`MIN_BOUND`) such that for float inputs
    within ``±B`` every value ``model`` computes is finite; None if none is proven."""
    ops = list(model.get_ordered_ops())
    if any(p.get_element_type().get_type_name() not in ("f32", "f16", "bf16") for p in model.get_parameters()):
        return None
    cache: dict = {}
    try:
        _bounds(ops, MIN_BOUND, cache)
    except Unbounded:
        return None
    lo, hi = int(math.log2(MIN_BOUND)), 120
    while lo < hi:   # the bounds grow with B: the largest exponent that passes
        mid = (lo + hi + 1) // 2
        try:
            _bounds(ops, 2.0 ** mid, cache)
            lo = mid
        except Unbounded:
            hi = mid - 1
    return 2.0 ** lo


def _bounds(ops, b_in: float, cache: dict) -> None:
    """Raise :class:`Unbounded` unless every value stays below LIMIT for inputs within ``±b_in``."""
    bound: dict = {}   # output -> max |value|, or None for an integer (shape, axis, index) tensor
    for op in ops:
        kind = op.get_type_name()
        if kind == "Parameter":
            b = b_in
        elif kind == "Constant":   # its magnitude is read when an op uses it as a value (not conv weights)
            bound[_key(op.output(0))] = _Lazy(op, cache)
            continue
        else:
            ins = [bound[_key(op.input_value(i))] for i in range(op.get_input_size())]
            b = _rule(op, kind, ins, cache)
        if b is not None:
            b *= ROUNDING
            if not b < LIMIT:
                raise Unbounded(f"{kind} {op.get_name()}: {b:.3g}")
        for i in range(op.get_output_size()):
            bound[_key(op.output(i))] = b


def _key(v):
    return (v.get_node().get_name(), v.get_index())


class _Lazy:
    """A constant, whose largest magnitude is computed if an op reads it as a value."""

    def __init__(self, op, cache: dict):
        self.op, self.cache = op, cache

    def value(self) -> float | None:
        op = self.op
        if op.get_element_type().get_type_name() not in ("f32", "f16", "bf16", "f64"):
            return None
        k = ("const", op.get_name())
        if k not in self.cache:
            data = np.asarray(op.get_data())
            self.cache[k] = float(max(data.max(), -data.min())) * ROUNDING if data.size else 0.0
        if not self.cache[k] < LIMIT:   # inf, NaN or huge
            raise Unbounded(f"constant {op.get_name()}")
        return self.cache[k]


def _data(ins, *idx):
    """The bounds of the float operands ``idx``: an integer operand there has no rule."""
    out = []
    for i in idx:
        b = ins[i].value() if isinstance(ins[i], _Lazy) else ins[i]
        if b is None:
            raise Unbounded("integer operand")
        out.append(b)
    return out


def _rule(op, kind: str, ins: list, cache: dict) -> float | None:
    if kind in _SAME:
        return _data(ins, 0)[0]
    if kind in _UNIT:
        _data(ins, 0)
        return 1.0
    if kind in ("Add", "Subtract"):
        a, b = _data(ins, 0, 1)
        return a + b
    if kind == "Multiply":
        a, b = _data(ins, 0, 1)
        return a * b
    if kind in _BOOL:
        return 1.0
    if kind == "Select":
        return max(_data(ins, 1, 2))
    if kind in ("Maximum", "Minimum"):
        return max(_data(ins, 0, 1))
    if kind == "Concat":
        return max(_data(ins, *range(len(ins))))
    if kind == "Gather":
        return _data(ins, 0)[0]
    if kind == "Clamp":   # monotone: its extremes are those of the input's
        x, a = _data(ins, 0)[0], op.get_attributes()
        return max(abs(min(max(v, a["min"]), a["max"])) for v in (-x, x))
    if kind == "Elu":
        return max(_data(ins, 0)[0], abs(float(op.get_attributes()["alpha"])))
    if kind == "Exp":
        x = _data(ins, 0)[0]
        if x > 80.0:
            raise Unbounded("exp")
        return math.exp(x)
    if kind in ("Convolution", "GroupConvolution"):
        return _data(ins, 0)[0] * _conv_gain(op, kind, cache) * SUM_MARGIN
    if kind == "MatMul":
        return _matmul(op, ins, cache) * SUM_MARGIN
    if kind == "GroupNormalization":
        return _group_norm(op, ins)
    raise Unbounded(f"no rule for {kind}")


def _weights(op, i: int):
    node = op.input_value(i).get_node()
    if node.get_type_name() != "Constant":
        return None
    return np.abs(np.asarray(node.get_data()))


def _conv_gain(op, kind: str, cache: dict) -> float:
    """The largest sum of |weights| that makes one output value."""
    k = ("gain", op.get_name())
    if k not in cache:
        w = _weights(op, 1)
        if w is None:
            raise Unbounded(f"{kind} with computed weights")
        # Convolution (O, I, k...), GroupConvolution (G, O, I, k...): everything past O is summed
        first = 2 if kind == "GroupConvolution" else 1
        cache[k] = float(w.reshape(*w.shape[:first], -1).sum(axis=-1, dtype=np.float64).max()) if w.size else 0.0
    return cache[k]


def _matmul(op, ins, cache: dict) -> float:
    a, b = _data(ins, 0, 1)
    attrs = op.get_attributes()
    k = ("gain", op.get_name())
    if k not in cache:
        gain = None
        wb = _weights(op, 1)
        wa = _weights(op, 0)
        if wb is not None and wb.ndim >= 2:   # x @ W: sum over W's contracted (second-last) axis
            gain = ("b", float(wb.sum(axis=-1 if attrs["transpose_b"] else -2, dtype=np.float64).max()))
        elif wa is not None and wa.ndim >= 2:
            gain = ("a", float(wa.sum(axis=-2 if attrs["transpose_a"] else -1, dtype=np.float64).max()))
        else:
            shape = op.get_input_partial_shape(1)
            if shape.rank.is_dynamic or shape.rank.get_length() < 1:
                raise Unbounded("MatMul of a dynamic rank")
            d = shape[-1 if attrs["transpose_b"] else (-2 if shape.rank.get_length() > 1 else -1)]
            if d.is_dynamic:
                raise Unbounded("MatMul over a dynamic dim")
            gain = ("k", float(d.get_length()))
        cache[k] = gain
    side, g = cache[k]
    return a * g if side == "b" else b * g if side == "a" else a * b * g


def _group_norm(op, ins) -> float:
    """(x - mean) / sqrt(var + eps) * scale + bias. A value standardized among N is at most
    sqrt(N - 1) in magnitude; with N unknown, |x - mean| <= 2|x| and var + eps >= eps. The
    squares summed for the variance must not overflow either."""
    x, scale, bias = _data(ins, 0, 1, 2)
    shape = op.get_input_partial_shape(0)
    if (2 * x) ** 2 * SUM_MARGIN >= LIMIT or shape.rank.is_dynamic:
        raise Unbounded("GroupNormalization's variance")
    eps = float(op.get_attributes()["epsilon"])
    if not eps > 0:
        raise Unbounded("GroupNormalization without an epsilon")
    z = 2 * x / math.sqrt(eps)
    dims = [shape[i] for i in range(1, shape.rank.get_length())]
    if all(d.is_static for d in dims):
        n = math.prod(d.get_length() for d in dims) // int(op.get_attributes()["num_groups"])
        z = min(z, math.sqrt(max(n - 1, 1)))
    return z * scale + bias
