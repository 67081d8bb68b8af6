"""Matrix products: linear (and its fused activations), matmul, mm, bmm, addmm, baddbmm."""
from __future__ import annotations

from .pointwise import gelu, relu, scalar
from .table import out, rank_of, register


def _linear(c, act=None):
    o = c.o
    y = out(o.matmul(c.x("input"), c.x("weight"), False, True))
    if not c.is_none("bias"):
        y = out(o.add(y, c.x("bias")))
    if act is not None:
        y = act(o, y)
    return y


def _linear_ok(n) -> bool:
    w = rank_of(n, 1)
    b = rank_of(n, 2) if len(n.args) > 2 and getattr(n.args[2].type, "shape", None) is not None else None
    return w == 2 and (rank_of(n, 0) or 0) >= 1 and (b is None or b <= 1)


register("aten::linear", check=_linear_ok)(lambda c: _linear(c))
register("srcore::linear_relu", check=_linear_ok)(lambda c: _linear(c, lambda o, y: relu(o, y, "linear")))
register("srcore::linear_silu", check=_linear_ok)(lambda c: _linear(c, lambda o, y: out(o.swish(y))))
register("srcore::linear_tanh", check=_linear_ok)(lambda c: _linear(c, lambda o, y: out(o.tanh(y))))
register("srcore::linear_sigmoid", check=_linear_ok)(lambda c: _linear(c, lambda o, y: out(o.sigmoid(y))))
register("srcore::linear_gelu", consts=("approximate",),
         check=lambda n: _linear_ok(n) and n.const("approximate", "none") in ("none", "tanh"))(
    lambda c: _linear(c, lambda o, y: gelu(o, y, c.const("approximate", "none"))))


@register("aten::matmul", check=lambda n: (rank_of(n, 0) or 0) >= 1 and (rank_of(n, 1) or 0) >= 1)
def _conv_matmul(c):
    return out(c.o.matmul(c.x("self"), c.x("other"), False, False))


@register("aten::mm", check=lambda n: rank_of(n, 0) == 2 and rank_of(n, 1) == 2)
def _conv_mm(c):
    return out(c.o.matmul(c.x("self"), c.x("mat2"), False, False))


@register("aten::bmm", check=lambda n: rank_of(n, 0) == 3 and rank_of(n, 1) == 3)
def _conv_bmm(c):
    return out(c.o.matmul(c.x("self"), c.x("mat2"), False, False))


def _addmm_like(c, a, b):
    o = c.o
    beta, alpha = c.const("beta", 1), c.const("alpha", 1)
    prod = out(o.matmul(c.x(a), c.x(b), False, False))
    if alpha != 1:
        prod = out(o.multiply(prod, scalar(o, alpha)))
    if beta == 0:   # torch ignores self then (its NaNs do not reach the result)
        return prod
    s = c.x("self")
    if beta != 1:
        s = out(o.multiply(s, scalar(o, beta)))
    return out(o.add(s, prod))


@register("aten::addmm", consts=("beta", "alpha"),
          check=lambda n: n.const("alpha", 1) != 0 and rank_of(n, 1) == 2 and rank_of(n, 2) == 2)
def _conv_addmm(c):
    return _addmm_like(c, "mat1", "mat2")


@register("aten::baddbmm", consts=("beta", "alpha"),
          check=lambda n: n.const("alpha", 1) != 0 and rank_of(n, 1) == 3 and rank_of(n, 2) == 3)
def _conv_baddbmm(c):
    return _addmm_like(c, "batch1", "batch2")
