"""Elementwise chains: consecutive elementwise ops on one value -> ``srcore::ew_chain``.

``y = relu(tanh(x * 0.5 + z))`` is four dispatched nodes and four buffers; the fused
op runs the same numpy ufuncs in the same order on one buffer, with the program
(``"mul:s:0.5;add:t:1;tanh;relu"``) compiled by the kernel once at load. A chain
step is ``add``/``sub`` (alpha the constant 1), ``mul``/``div`` (no rounding mode),
with the running value as the first operand (either side for add and mul) and a
constant int/float (not bool) or a tensor as the other, or ``relu``/``sigmoid``/``tanh``.
Conditions: every step's result has the chain input's float dtype and static shape
(a tensor operand has that dtype and broadcasts into it: nothing grows), every
intermediate has exactly one use (the next step, in the same block), at most four
distinct tensor operands besides the chain input, and at least two steps.

Not in the default pipeline: on ``elementwise_chain`` (40 ops on 1x128) it measured
17-18 us against 18-19 us unfused most runs, but 26-27 us in some (the single
buffer's placement relative to the input matters: a 1.5x spread with the output's
offset alone), so it does not reliably help; opt in with ``fuse_elementwise_chains(g)``.
"""
from __future__ import annotations

from ..ir.graph import Graph, Node, Value
from ..ir.scope import joined
from ..ir.types import TensorType
from ..ir.alias import is_mutated
from ._util import base_kind, const_or, is_const, replace_with_values, walk_blocks

UNARY = {"aten::relu": "relu", "aten::sigmoid": "sigmoid", "aten::tanh": "tanh"}
BINARY = {"aten::add": "add", "aten::sub": "sub", "aten::mul": "mul", "aten::div": "div"}
COMMUTATIVE = {"add", "mul"}
MAX_OPERANDS = 4
MIN_STEPS = 2


def _static_float(t) -> bool:
    return (isinstance(t, TensorType) and t.dtype in ("float32", "float64") and t.shape is not None
            and all(isinstance(d, int) for d in t.shape))


def _broadcasts_into(t, target: TensorType) -> bool:
    if not isinstance(t, TensorType) or t.dtype != target.dtype or t.shape is None or len(t.shape) > len(target.shape):
        return False
    return all(isinstance(o, int) and (o == 1 or o == c) for o, c in zip(reversed(t.shape), reversed(target.shape)))


def _step(node: Node, cur: Value | None, ttype: TensorType):
    """``(name, cur, other)`` if ``node`` is a chain step on ``cur`` (any operand when ``cur`` is None)."""
    kind = base_kind(node)
    if len(node.outputs) != 1 or node.output.type != ttype:
        return None
    if kind in UNARY:
        if len(node.inputs) != 1 or (cur is not None and node.inputs[0] is not cur):
            return None
        return UNARY[kind], node.inputs[0], None
    name = BINARY.get(kind)
    if name is None:
        return None
    if name in ("add", "sub"):
        if len(node.inputs) != 3 or not is_const(node.inputs[2]):
            return None
        alpha = const_or(node.inputs[2])
        if alpha != 1 or isinstance(alpha, bool):
            return None
    elif len(node.inputs) != 2:
        return None
    a, b = node.inputs[0], node.inputs[1]
    order = [(a, b), (b, a)] if name in COMMUTATIVE else [(a, b)]
    for run, other in order:
        if cur is not None and run is not cur:
            continue
        if run.type != ttype:
            continue
        if is_const(other) and not isinstance(other.type, TensorType):
            v = const_or(other)
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                continue
            return name, run, float(v) if isinstance(v, float) else int(v)
        if _broadcasts_into(other.type, ttype):
            return name, run, other
    return None


def _fmt(v) -> str:
    return repr(v)


def _chain_from(start: Node):
    """The longest chain starting at ``start``: (input, [(node, name, other)])."""
    t = start.output.type
    if not _static_float(t):
        return None
    first = _step(start, None, t)
    if first is None:
        return None
    name, x, other = first
    steps = [(start, name, other)]
    cur = start.output
    while len(cur.uses) == 1:
        nxt = cur.uses[0].user
        if nxt.owning_block is not start.owning_block:
            break
        s = _step(nxt, cur, t)
        if s is None:
            break
        steps.append((nxt, s[0], s[2]))
        cur = nxt.output
    return x, steps


def fuse_elementwise_chains(graph: Graph, *, min_steps: int = MIN_STEPS) -> bool:
    """Fuse every maximal elementwise chain of at least ``min_steps`` steps; True if changed."""
    changed = False
    for block in list(walk_blocks(graph.block)):
        for node in list(block.nodes):
            if node.owning_block is None:
                continue
            found = _chain_from(node)
            if found is None:
                continue
            x, steps = found
            operands: list[Value] = []
            parts = []
            for n, name, other in steps:
                if other is None:
                    parts.append(name)
                elif isinstance(other, Value):
                    if other is x:
                        k = 0
                    else:
                        if other not in operands:
                            operands.append(other)
                        k = operands.index(other) + 1
                    parts.append(f"{name}:t:{k}")
                else:
                    parts.append(f"{name}:s:{_fmt(other)}")
            while len(operands) > MAX_OPERANDS or len(steps) < min_steps:
                if len(steps) < min_steps:
                    break
                steps.pop()   # too many operands: shorten the chain from its end
                parts.pop()
                operands = _used(parts, operands)
            if len(steps) < min_steps or len(operands) > MAX_OPERANDS:
                continue
            if any(is_mutated(v) for v in [x, *operands]):
                continue   # the chain runs at its last step: a write in between would be read
            last = steps[-1][0]
            prog = graph.insert_constant(";".join(parts), before=last)
            fused = graph.create("srcore::ew_chain", [x, prog] + operands, [last.output.type], source=last.source)
            scope = joined(n for n, _, _ in steps)
            if scope:
                fused.meta["scope"] = scope
            fused.insert_before(last)
            name = last.output.name
            replace_with_values(last, [fused.output])
            for n, _, _ in reversed(steps[:-1]):
                n.destroy()
            if name is not None:
                graph.rename(fused.output, name)
            changed = True
    return changed


def _used(parts: list[str], operands: list[Value]) -> list[Value]:
    """Operands still referenced by ``parts`` (the indices in parts stay valid: only trailing ones go)."""
    top = max((int(p.rsplit(":", 1)[1]) for p in parts if ":t:" in p), default=0)
    return operands[:top]
