"""``torch.einsum`` of two operands as a batched matrix product (no numpy: the support table reads it).

Each letter is a *batch* letter (both operands and the result), *contracted* (both operands, not
the result), or *free* (one operand and the result). Operand A is permuted to (batch, free A,
contracted) and B to (batch, contracted, free B), each reshaped to (batch..., rows, columns), one
``matmul``, then the result reshaped and permuted to the equation's order. Swin's
``einsum("bhid,bhjd->bhij", q, k)`` is ``q @ k.transpose(-1, -2)``: one permute and the product.
Three or more operands are a chain of such products, left to right (:func:`chain`): each step keeps
the letters the result or a later operand names (linear attention's
``einsum("bthd,bhde,bth->bthe", q, kv, z)`` is two products, ``d`` summed by the first).
Not taken: ellipses, a letter twice in one term, a letter summed within one operand, batch letters
of unequal sizes (broadcasting), fewer than two operands.
"""
from __future__ import annotations

import math

import attrs


@attrs.frozen
class EinsumPlan:
    perm_a: tuple[int, ...]
    perm_b: tuple[int, ...]
    batch: tuple[int, ...]          # the batch dims' sizes
    m: tuple[int, ...]              # A's free dims' sizes
    k: tuple[int, ...]              # the contracted dims' sizes
    n: tuple[int, ...]              # B's free dims' sizes
    perm_out: tuple[int, ...]       # (batch, m, n) -> the result's order


def plan(equation: str, shape_a, shape_b) -> EinsumPlan | str:
    """The product form of ``equation`` on operands of these shapes, or why there is none."""
    eq = equation.replace(" ", "")
    if "..." in eq or "->" not in eq:
        return f"equation {equation!r} has an ellipsis or no explicit result"
    ins, out = eq.split("->")
    terms = ins.split(",")
    if len(terms) != 2:
        return f"equation {equation!r} has {len(terms)} operands (the engine's einsum is a product of two)"
    a, b = terms
    if any(len(set(t)) != len(t) or not t.isalpha() for t in (a, b)) or len(set(out)) != len(out) \
            or not set(out) <= set(a) | set(b) or (out and not out.isalpha()):
        return f"equation {equation!r} repeats a letter in a term or names one the operands lack"
    if len(a) != len(shape_a) or len(b) != len(shape_b):
        return f"equation {equation!r} does not match operand ranks {len(shape_a)} and {len(shape_b)}"
    size = {}
    for t, shape in ((a, shape_a), (b, shape_b)):
        for ch, n in zip(t, shape):
            if size.setdefault(ch, n) != n:
                return f"letter {ch!r} has sizes {size[ch]} and {n} (broadcasting)"
    batch = [ch for ch in out if ch in a and ch in b]
    m = [ch for ch in out if ch in a and ch not in b]
    n = [ch for ch in out if ch in b and ch not in a]
    k = [ch for ch in a if ch in b and ch not in out]
    if len(batch) + len(m) + len(k) != len(a) or len(batch) + len(n) + len(k) != len(b):
        return f"equation {equation!r} sums a letter of one operand alone"
    mid = batch + m + n
    return EinsumPlan(tuple(a.index(ch) for ch in batch + m + k), tuple(b.index(ch) for ch in batch + k + n),
                      tuple(size[ch] for ch in batch), tuple(size[ch] for ch in m), tuple(size[ch] for ch in k),
                      tuple(size[ch] for ch in n), tuple(mid.index(ch) for ch in out))


def chain(equation: str, shapes) -> list[tuple[str, tuple[int, ...], EinsumPlan]] | str:
    """``equation`` on operands of ``shapes`` as two-operand steps, left to right: per step its
    equation (the running product first), its result's shape and its plan; or why there is none."""
    eq = equation.replace(" ", "")
    if "..." in eq or "->" not in eq:
        return f"equation {equation!r} has an ellipsis or no explicit result"
    ins, out = eq.split("->")
    terms = ins.split(",")
    if len(terms) < 2 or len(terms) != len(shapes):
        return f"equation {equation!r} has {len(terms)} operands for {len(shapes)} tensors (the engine's einsum is a product of two or more)"
    if any(len(t) != len(s) for t, s in zip(terms, shapes)):
        return f"equation {equation!r} does not match operand ranks {[len(s) for s in shapes]}"
    size = {}
    for t, s in zip(terms, shapes):
        for ch, n in zip(t, s):
            size.setdefault(ch, n)
    steps, acc, shape = [], terms[0], tuple(shapes[0])
    for i in range(1, len(terms)):
        if i == len(terms) - 1:
            res = out
        else:
            later = set(out).union(*terms[i + 1:])
            res = "".join(dict.fromkeys(ch for ch in acc + terms[i] if ch in later))
        step = f"{acc},{terms[i]}->{res}"
        p = plan(step, shape, shapes[i])
        if isinstance(p, str):
            return p if len(terms) == 2 else f"{p} (step {step!r} of {equation!r})"
        acc, shape = res, tuple(size[ch] for ch in res)
        steps.append((step, shape, p))
    return steps


def operand_shapes(p: EinsumPlan):
    """(A's 3-part shape, B's, the product's) after the reshapes."""
    M, K, N = math.prod(p.m), math.prod(p.k), math.prod(p.n)
    return p.batch + (M, K), p.batch + (K, N), p.batch + (M, N)
