"""Ops that exporters write out as several ONNX nodes, put back together after conversion.

torch's ONNX exporter (before opset 20) writes ``F.gelu`` as ``Div(x, √2) -> Erf -> Add 1 -> Mul x
-> Mul 0.5``: five elementwise passes over the tensor where srcore has one ``aten::gelu`` (and a
fused ``linear + gelu``). Each rule is ``match(node) -> Value | None``, tried on the node kinds it
names, and returns the value it matched and the value that replaces it; the nodes no longer
needed are removed after. A rule fires only when every constant matches to float32 precision
and every intermediate has no other use, so the result is the same function.
"""
from __future__ import annotations

import math
from typing import Callable

import attrs
import numpy as np

from ...ir.graph import Graph, Node, Value
from ...ir.types import BOOL, FLOAT, NONE, STR, TensorType


@attrs.frozen
class Rule:
    name: str
    kinds: tuple[str, ...]
    match: Callable[[Node, "Context"], "tuple[Value, Value] | None"]


@attrs.define
class Context:
    """What rules share while rewriting one graph: the parameter names taken, weights transposed."""

    graph: Graph
    param_names: set = attrs.field(factory=set)
    transposed: dict = attrs.field(factory=dict)

    def new_param(self, base: str, arr: np.ndarray) -> Value:
        name, k = base, 0
        while name in self.param_names:
            k += 1
            name = f"{base}.{k}"
        self.param_names.add(name)
        node = self.graph.create("prim::Constant", (), (TensorType(str(arr.dtype), arr.shape),),
                                 {"param": name, "value": arr}, output_names=[name])
        node.insert_before(self.graph.block.nodes.first)
        return node.output


def _const(v: Value):
    """A scalar constant's value (a Python number or a one-element array), else None."""
    if v.node.kind != "prim::Constant":
        return None
    c = v.node.attrs.get("value")
    if isinstance(c, np.ndarray):
        return float(c.reshape(-1)[0]) if c.size == 1 and c.dtype.kind == "f" else None
    return float(c) if isinstance(c, (int, float)) and not isinstance(c, bool) else None


def _is(v: Value, target: float) -> bool:
    c = _const(v)
    return c is not None and math.isclose(c, target, rel_tol=1e-6)


def _only_use(v: Value, kind: str) -> Node | None:
    """The single user of ``v`` when it is a ``kind`` node."""
    if len(v.uses) != 1:
        return None
    user = v.uses[0].user
    return user if user.kind == kind else None


def _other(node: Node, v: Value) -> Value | None:
    """The other of a binary node's two inputs."""
    a, b = node.inputs[0], node.inputs[1]
    return b if a is v else a if b is v else None


def _add_one(v: Value) -> Node | None:
    add = _only_use(v, "aten::add")
    if add is None or len(add.inputs) != 3 or not _is(add.inputs[2], 1.0) or not _is(_other(add, v), 1.0):
        return None
    return add


def gelu_erf(mul: Node, ctx: Context) -> tuple[Value, Value] | None:
    """``0.5 * x * (1 + erf(x / √2))`` in either association: ``((x*(1+e)) * 0.5)`` or ``((x*0.5) * (1+e))``;
    returns (the value computed, its ``aten::gelu`` replacement)."""
    for side in mul.inputs[:2]:
        add = side.node
        if add.kind != "aten::add" or len(add.inputs) != 3:
            continue
        erf = next((i.node for i in add.inputs[:2] if i.node.kind == "aten::erf"), None)
        if erf is None or _add_one(erf.output) is not add:
            continue
        div = erf.inputs[0].node
        if div.kind != "aten::div" or len(div.inputs) != 2 or not _is(div.inputs[1], math.sqrt(2.0)) \
                or len(div.output.uses) != 1 or len(side.uses) != 1:
            continue
        x = div.inputs[0]
        rest = _other(mul, side)
        if rest is x:  # (x * (1 + e)) then * 0.5 by the next node
            half = _only_use(mul.output, "aten::mul")
            if half is not None and _is(_other(half, mul.output), 0.5):
                return _gelu(half, x)
        elif rest is not None and rest.node.kind == "aten::mul" and len(rest.uses) == 1:
            inner = rest.node  # (x * 0.5) * (1 + e)
            if x in inner.inputs[:2] and _is(_other(inner, x), 0.5):
                return _gelu(mul, x)
    return None


def _gelu(node: Node, x: Value) -> tuple[Value, Value] | None:
    t = x.type
    if not isinstance(t, TensorType) or t.dtype not in (None, "float32", "float64", "float16"):
        return None
    g = node.graph
    approx = g.create("prim::Constant", (), (STR,), {"value": "none"})
    gelu = g.create("aten::gelu", [x, approx.output], (node.output.type,), source=node.source)
    approx.insert_before(node)
    gelu.insert_before(node)
    return node.output, gelu.output


def _param(v: Value, ndim: int) -> np.ndarray | None:
    """The array of a float parameter of rank ``ndim``, else None."""
    if v.node.kind != "prim::Constant" or v.node.attrs.get("param") is None:
        return None
    a = v.node.attrs.get("value")
    return a if isinstance(a, np.ndarray) and a.ndim == ndim and a.dtype.kind == "f" else None


def matmul_add_linear(add: Node, ctx: Context) -> tuple[Value, Value] | None:
    """``MatMul(x, W) + b`` with a constant 2-D ``W`` and 1-D ``b`` (how torch's exporter writes a
    Linear on a 3-D input) -> ``aten::linear(x, Wᵀ, b)``, which srcore fuses with what follows."""
    if len(add.inputs) != 3 or not _is(add.inputs[2], 1.0):
        return None
    for mm_v, b in ((add.inputs[0], add.inputs[1]), (add.inputs[1], add.inputs[0])):
        mm = mm_v.node
        if mm.kind != "aten::matmul" or len(mm_v.uses) != 1:
            continue
        x, w_v = mm.inputs
        w, bias = _param(w_v, 2), _param(b, 1)
        xt = x.type
        if w is None or bias is None or bias.shape[0] != w.shape[1] or bias.dtype != w.dtype \
                or not isinstance(xt, TensorType) or xt.rank is None or xt.rank < 2 or xt.dtype != str(w.dtype):
            continue
        if w_v not in ctx.transposed:  # one transposed copy per weight
            ctx.transposed[w_v] = ctx.new_param(f"{w_v.node.attrs['param']}.T", np.ascontiguousarray(w.T))
        wt = ctx.transposed[w_v]
        g = add.graph
        lin = g.create("aten::linear", [x, wt, b], (add.output.type,), source=add.source)
        lin.insert_before(add)
        return add.output, lin.output
    return None


def _scaled(v: Value) -> tuple[Value, float]:
    """``v`` without a scalar ``mul``/``div`` applied to it (used once), and that factor."""
    n = v.node
    if n.kind in ("aten::mul", "aten::div") and len(n.inputs) == 2 and len(v.uses) == 1:
        c = _const(n.inputs[1])
        if c is not None and c != 0 and isinstance(n.inputs[0].type, TensorType):
            return n.inputs[0], (c if n.kind == "aten::mul" else 1.0 / c)
        c = _const(n.inputs[0])
        if c is not None and n.kind == "aten::mul" and isinstance(n.inputs[1].type, TensorType):
            return n.inputs[1], c
    return v, 1.0


def _swapped_last(v: Value) -> Value | None:
    """``k`` when ``v`` is ``k`` with its last two dims swapped (permute or transpose), used once."""
    n = v.node
    if len(v.uses) != 1 or n.kind not in ("aten::permute", "aten::transpose"):
        return None
    k = n.inputs[0]
    r = k.type.rank if isinstance(k.type, TensorType) else None
    if r is None or r < 3:
        return None
    if n.kind == "aten::permute":
        perm = _list_const(n.inputs[1])
        return k if perm is not None and [p % r for p in perm] == [*range(r - 2), r - 1, r - 2] else None
    dims = {_int_const(n.inputs[1]), _int_const(n.inputs[2])}
    return k if None not in dims and {d % r for d in dims} == {r - 1, r - 2} else None


def _list_const(v: Value):
    c = v.node.attrs.get("value") if v.node.kind == "prim::Constant" else None
    return list(c) if isinstance(c, (list, tuple)) and all(isinstance(i, int) for i in c) else None


def _int_const(v: Value):
    c = v.node.attrs.get("value") if v.node.kind == "prim::Constant" else None
    return c if isinstance(c, int) and not isinstance(c, bool) else None


def attention(mm: Node, ctx: Context) -> tuple[Value, Value] | None:
    """``softmax((q·s1) @ (kᵀ·s2) · s3, -1) @ v`` -> ``aten::scaled_dot_product_attention(q, k, v,
    scale=s1·s2·s3)`` (how exporters write attention without a fused op)."""
    if len(mm.inputs) != 2:
        return None
    p, v = mm.inputs
    sm = p.node
    if sm.kind != "aten::softmax" or len(p.uses) != 1 or len(sm.inputs) != 3:
        return None
    r = v.type.rank if isinstance(v.type, TensorType) else None
    dim = _int_const(sm.inputs[1])
    if r is None or r < 3 or dim is None or dim % r != r - 1 or not _none_const(sm.inputs[2]):
        return None
    scores, s3 = _scaled(sm.inputs[0])
    qk = scores.node
    if qk.kind != "aten::matmul" or len(scores.uses) != 1:
        return None
    q, s1 = _scaled(qk.inputs[0])
    kt, s2 = _scaled(qk.inputs[1])
    k = _swapped_last(kt)
    if k is None or any(not isinstance(t.type, TensorType) or t.type.rank != r for t in (q, k)):
        return None
    dtypes = {t.type.dtype for t in (q, k, v)}
    if len(dtypes) != 1 or dtypes.pop() not in ("float32", "float64"):
        return None
    g = mm.graph
    args = [q, k, v]
    for value, t in ((None, NONE), (0.0, FLOAT), (False, BOOL), (float(s1 * s2 * s3), FLOAT), (False, BOOL)):
        c = g.create("prim::Constant", (), (t,), {} if value is None else {"value": value})
        c.insert_before(mm)
        args.append(c.output)
    out = g.create("aten::scaled_dot_product_attention", args, (mm.output.type,), source=mm.source)
    out.insert_before(mm)
    return mm.output, out.output


def _none_const(v: Value) -> bool:
    return v.node.kind == "prim::Constant" and "value" not in v.node.attrs


RULES = (Rule("gelu (erf)", ("aten::mul",), gelu_erf), Rule("matmul + bias -> linear", ("aten::add",),
                                                                 matmul_add_linear),
         Rule("attention -> scaled_dot_product_attention", ("aten::matmul",), attention))


def recompose(graph: Graph, rules=RULES) -> list[str]:
    """Apply ``rules`` everywhere in ``graph``; returns the names of the rules that fired, in order.
    The replaced nodes are left for dead-code elimination."""
    by_kind: dict[str, list[Rule]] = {}
    for r in rules:
        for k in r.kinds:
            by_kind.setdefault(k, []).append(r)
    fired = []
    ctx = Context(graph, {n.attrs["param"] for n in graph.all_nodes()
                          if n.kind == "prim::Constant" and n.attrs.get("param") is not None})
    for node in list(graph.all_nodes()):
        for r in by_kind.get(node.kind, ()):
            found = r.match(node, ctx)
            if found is not None:
                old, new = found
                old.replace_all_uses_with(new)
                name = old.name
                graph.rename(old, None)
                graph.rename(new, name)
                fired.append(r.name)
                break
    return fired
