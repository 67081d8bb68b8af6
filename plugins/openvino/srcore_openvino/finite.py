"""The inputs on which an OpenVINO model provably computes no NaN and no infinity.

torch's NaN semantics cost srcore's engines a few percent where OpenVINO's fused kernels differ
(a relu behind a convolution is ``Elu(0)``, an exp per element; a max pool needs a mask: see
``pointwise.relu`` and ``conv._max_pool``). Those checks only change values when a NaN or an
infinity occurs. :func:`input_bound` walks the model built without them and bounds every value
it computes by an interval (per channel where it can), given inputs within ``±B``; it returns
the largest power of two ``B`` for which every interval stays within ``±LIMIT``, or None when an
op has no rule here (or an input is not float). For finite inputs within ``±B`` no value of the model can overflow, and
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


class Unbounded(Exception):
    """An op without a rule, or a bound past :data:`LIMIT`."""


def input_bound(model) -> float | None:
    """The largest ``B`` (a power of two, at least :data:`MIN_BOUND`) such that for float inputs
    within ``±B`` every value ``model`` computes is finite; None if none is proven."""
    ops = list(model.get_ordered_ops())
    if any(p.get_element_type().get_type_name() not in ("f32", "f16", "bf16") for p in model.get_parameters()):
        return None
    cache: dict = {}
    steps = [_Step(op) for op in ops]
    try:
        _bounds(steps, MIN_BOUND, cache)
    except Unbounded:
        return None
    lo, hi = int(math.log2(MIN_BOUND)), 120
    while lo < hi:   # the intervals grow with B: the largest exponent that passes
        mid = (lo + hi + 1) // 2
        try:
            _bounds(steps, 2.0 ** mid, cache)
            lo = mid
        except Unbounded:
            hi = mid - 1
    return 2.0 ** lo


def within(xs, bound: float) -> bool:
    """Whether every value of the arrays ``xs`` is finite and within ``±bound`` (NaN compares false).

    Two numpy passes: the first reads ``x`` from memory (an inference has evicted it: ~50 µs for
    150k floats), the second from cache (~7 µs). A one-pass numba loop saved 5-15 µs a call
    (0.3-0.8 % of mobilenet_v3's) but costs numba's import and first call (1-3 s) in a process
    that may not use numba otherwise; a BLAS sum of squares (one pass) wakes BLAS threads."""
    return all(x.size == 0 or (-bound <= x.min() and x.max() <= bound) for x in xs)


# -- intervals -------------------------------------------------------------------------------------
# A float value's interval is (lo, hi), float64 arrays: 0-d for the whole tensor, or 1-d over its
# axis 1 (channels: a convolution's output, a per-channel constant, and what elementwise ops and
# pools make of them). Any op may collapse per-channel intervals to one: that only loosens them.
# Signs matter where a relu (or hardswish, swish, ...) follows: a convolution after a relu grows
# by its largest sum of positive or of negative weights, not of both.

def _iv(lo, hi):
    return np.asarray(lo, np.float64), np.asarray(hi, np.float64)


def _mag(iv) -> float:
    """The largest magnitude in ``iv`` (NaN if it holds one)."""
    return float(np.max(np.maximum(np.abs(iv[0]), np.abs(iv[1])), initial=0.0))


def _whole(iv):
    """One interval for the whole tensor."""
    lo, hi = iv
    return _iv(np.min(lo, initial=np.inf) if lo.size else 0.0, np.max(hi, initial=-np.inf) if hi.size else 0.0)


def _with_zero(iv):
    return _iv(np.minimum(iv[0], 0.0), np.maximum(iv[1], 0.0))


def _widen(iv, frac: float):
    m = np.maximum(np.abs(iv[0]), np.abs(iv[1]))
    return _iv(iv[0] - frac * m, iv[1] + frac * m)


def _sym(m: float):
    return _iv(-m, m)


class _Step:
    """An op with what the walk reads of it each time (OpenVINO's accessors cost µs a call)."""

    def __init__(self, op):
        self.op, self.kind = op, op.get_type_name()
        self.ins = [_key(op.input_value(i)) for i in range(op.get_input_size())]
        self.outs = [_key(op.output(i)) for i in range(op.get_output_size())]
        self.in_ranks = [_rank(op.input_value(i)) for i in range(op.get_input_size())]
        self.rank = _rank(op.output(0)) if self.outs else None
        self.const = _Lazy(op) if self.kind == "Constant" else None


def _bounds(steps, b_in: float, cache: dict) -> None:
    """Raise :class:`Unbounded` unless every value stays below LIMIT for inputs within ``±b_in``."""
    val: dict = {}   # output -> interval, _Lazy (a constant), or None for an integer (shape, axis, index) tensor
    for st in steps:
        if st.kind == "Parameter":
            iv = _sym(b_in)
        elif st.const is not None:   # read when an op uses it as a value (not conv weights)
            val[st.outs[0]] = st.const
            continue
        else:
            iv = _rule(st, st.kind, [val[k] for k in st.ins], cache)
        if iv is not None:
            iv = _widen(iv, ROUNDING - 1)
            if not _mag(iv) < LIMIT:   # NaN too
                raise Unbounded(f"{st.kind} {st.op.get_name()}: {_mag(iv):.3g}")
        for k in st.outs:
            val[k] = iv


def _key(v):
    return (v.get_node().get_name(), v.get_index())


def _rank(v) -> int | None:
    shape = v.get_partial_shape()
    return None if shape.rank.is_dynamic else shape.rank.get_length()


class _Lazy:
    """A constant, whose values are read if an op uses it as a value."""

    def __init__(self, op):
        self.op, self.cache = op, {}

    def interval(self, rank: int | None):
        """Per channel when the constant, aligned to an output of ``rank`` dims, varies along
        axis 1 only (a bias); else one interval; None for an integer constant."""
        op = self.op
        if op.get_element_type().get_type_name() not in ("f32", "f16", "bf16", "f64"):
            return None
        k = rank
        if k not in self.cache:
            data = np.asarray(op.get_data(), np.float64)
            if data.size and not np.all(np.abs(data) < LIMIT):   # inf, NaN or huge
                raise Unbounded(f"constant {op.get_name()}")
            shape = (1,) * ((rank or 0) - data.ndim) + data.shape
            if not data.size:
                self.cache[k] = _iv(0.0, 0.0)
            elif (rank is not None and rank >= 2 and len(shape) == rank
                  and all(d == 1 for i, d in enumerate(shape) if i != 1)):
                self.cache[k] = _iv(data.reshape(-1), data.reshape(-1))
            else:
                self.cache[k] = _iv(data.min(), data.max())
        return self.cache[k]


def _ins(st, ins, *idx):
    """The intervals of the float operands ``idx``, per channel where that lines up with the
    output's axis 1 (the same rank); an integer operand there has no rule."""
    rank = st.rank
    out = []
    for i in idx:
        v = ins[i]
        iv = v.interval(rank) if isinstance(v, _Lazy) else v
        if iv is None:
            raise Unbounded("integer operand")
        if iv[0].ndim and (rank is None or st.in_ranks[i] != rank):
            iv = _whole(iv)
        out.append(iv)
    if sum(iv[0].size > 1 for iv in out) > 1 and len({iv[0].size for iv in out if iv[0].size > 1}) > 1:
        out = [_whole(iv) for iv in out]   # channel counts that do not line up: no per-channel rule
    return out


def _hull(ivs):
    ivs = [_whole(iv) for iv in ivs]
    return _iv(min(iv[0] for iv in ivs), max(iv[1] for iv in ivs))


#: ops that keep each channel's values (elementwise, or pooling over the spatial axes)
_KEEP = {"MaxPool", "AdaptiveAvgPool", "Result"}
#: layout ops and reductions: their values are among the input's (or averages of them)
_SAME = {"ReduceMean", "ReduceMax", "ReduceMin", "Reshape", "Squeeze", "Unsqueeze", "Transpose", "StridedSlice",
         "Slice", "Broadcast", "Tile", "DepthToSpace", "SpaceToDepth", "Gather"}
#: x times a factor in [0, 1]: within [min(x, 0), max(x, 0)] (HSwish at least -0.375)
_GATED = {"HSwish", "Swish", "Gelu"}
_UNIT = {"Sigmoid", "HSigmoid", "Softmax"}
_SIGNED_UNIT = {"Tanh", "Erf"}
#: boolean results (a clamp's or leaky relu's Select conditions), whatever their operands
_BOOL = {"Less", "LessEqual", "Greater", "GreaterEqual", "Equal", "NotEqual", "LogicalAnd", "LogicalOr",
         "LogicalNot"}


def _rule(st, kind: str, ins: list, cache: dict):
    op = st.op
    if kind in _KEEP:
        return _ins(st, ins, 0)[0]
    if kind == "AvgPool":   # zero padding may be counted in
        return _with_zero(_ins(st, ins, 0)[0])
    if kind in _SAME:
        return _whole(_ins(st, ins, 0)[0])
    if kind == "Relu":
        lo, hi = _ins(st, ins, 0)[0]
        return _iv(np.maximum(lo, 0.0), np.maximum(hi, 0.0))
    if kind in _GATED:
        lo, hi = _with_zero(_ins(st, ins, 0)[0])
        return _iv(np.maximum(lo, -0.375) if kind == "HSwish" else lo, hi)
    if kind in _UNIT:
        _ins(st, ins, 0)
        return _iv(0.0, 1.0)
    if kind in _SIGNED_UNIT:
        _ins(st, ins, 0)
        return _iv(-1.0, 1.0)
    if kind in _BOOL:
        return _iv(0.0, 1.0)
    if kind == "Add":
        (alo, ahi), (blo, bhi) = _ins(st, ins, 0, 1)
        return _iv(alo + blo, ahi + bhi)
    if kind == "Subtract":
        (alo, ahi), (blo, bhi) = _ins(st, ins, 0, 1)
        return _iv(alo - bhi, ahi - blo)
    if kind == "Multiply":
        (alo, ahi), (blo, bhi) = _ins(st, ins, 0, 1)
        ends = [alo * blo, alo * bhi, ahi * blo, ahi * bhi]
        return _iv(np.minimum.reduce(ends), np.maximum.reduce(ends))
    if kind == "Select":
        (alo, ahi), (blo, bhi) = _ins(st, ins, 1, 2)
        return _iv(np.minimum(alo, blo), np.maximum(ahi, bhi))
    if kind in ("Maximum", "Minimum"):
        (alo, ahi), (blo, bhi) = _ins(st, ins, 0, 1)
        f = np.maximum if kind == "Maximum" else np.minimum
        return _iv(f(alo, blo), f(ahi, bhi))
    if kind == "Concat":
        return _hull(_ins(st, ins, *range(len(ins))))
    if kind == "Clamp":   # monotone
        (lo, hi), a = _ins(st, ins, 0)[0], op.get_attributes()
        return _iv(np.clip(lo, a["min"], a["max"]), np.clip(hi, a["min"], a["max"]))
    if kind == "Elu":
        lo, hi = _ins(st, ins, 0)[0]
        alpha = float(op.get_attributes()["alpha"])
        if alpha < 0:   # not monotone: within the input's magnitude or |alpha|
            return _sym(max(_mag((lo, hi)), -alpha))
        elu = lambda v: np.where(v > 0, v, alpha * np.expm1(np.minimum(v, 0.0)))  # noqa: E731
        return _iv(elu(lo), elu(hi))
    if kind == "Exp":
        lo, hi = _ins(st, ins, 0)[0]
        if np.max(hi) > 80.0:
            raise Unbounded("exp")
        return _iv(np.exp(lo), np.exp(hi))
    if kind in ("Convolution", "GroupConvolution"):
        return _conv(op, kind, _ins(st, ins, 0)[0], cache)
    if kind == "MatMul":
        return _sym(_matmul(st, ins, cache) * SUM_MARGIN)
    if kind == "GroupNormalization":
        return _sym(_group_norm(st, ins))
    raise Unbounded(f"no rule for {kind}")


def _abs_weights(op, i: int):
    node = op.input_value(i).get_node()
    if node.get_type_name() != "Constant":
        return None
    return np.abs(np.asarray(node.get_data()))


def _conv(op, kind: str, iv, cache: dict):
    """Each output channel's interval: the sum over its inputs and taps of the weight times the
    input channel's interval (with 0 in it: a padded tap, or a tap left out at a border, adds 0),
    widened by SUM_MARGIN - 1 of the sum of the terms' magnitudes (rounding, in any order)."""
    k = ("conv", op.get_name())
    if k not in cache:
        node = op.input_value(1).get_node()
        if node.get_type_name() != "Constant":
            raise Unbounded(f"{kind} with computed weights")
        w = np.asarray(node.get_data())
        # Convolution (O, I, k...) as one group; GroupConvolution (G, O, I, k...): taps summed
        w = (w[None] if kind == "Convolution" else w)
        w = w.reshape(*w.shape[:3], -1)
        pos, neg = np.maximum(w, 0).sum(-1, dtype=np.float64), np.minimum(w, 0).sum(-1, dtype=np.float64)
        cache[k] = pos, neg   # (G, O, I) each
    pos, neg = cache[k]
    g, _, i = pos.shape
    lo, hi = np.broadcast_arrays(*_with_zero(iv))
    if lo.size not in (1, g * i):   # channel counts that do not line up
        lo, hi = _whole((lo, hi))
    lo, hi = (np.broadcast_to(v.reshape(-1), (g * i,)).reshape(g, i) for v in (lo, hi))
    p, n = (w @ np.stack([lo, hi, np.maximum(-lo, hi)], -1) for w in (pos, neg))   # (G, O, 3): lo, hi, |.|
    err = (SUM_MARGIN - 1) * (p[..., 2] - n[..., 2])
    return _iv((p[..., 0] + n[..., 1] - err).reshape(-1), (p[..., 1] + n[..., 0] + err).reshape(-1))


def _matmul(st, ins, cache: dict) -> float:
    op = st.op
    a, b = (_mag(iv) for iv in _ins(st, ins, 0, 1))
    attrs = op.get_attributes()
    k = ("gain", op.get_name())
    if k not in cache:
        gain = None
        wb = _abs_weights(op, 1)
        wa = _abs_weights(op, 0)
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


def _group_norm(st, ins) -> float:
    """(x - mean) / sqrt(var + eps) * scale + bias. A value standardized among N is at most
    sqrt(N - 1) in magnitude; with N unknown, |x - mean| <= 2|x| and var + eps >= eps. The
    squares summed for the variance must not overflow either."""
    op = st.op
    x, scale, bias = (_mag(iv) for iv in _ins(st, ins, 0, 1, 2))
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
