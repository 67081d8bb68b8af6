"""Arithmetic on dimensions: ``int`` (fixed), ``str`` (symbolic) or ``None`` (unknown).

A symbolic dimension is a product of symbols with an integer coefficient,
written canonically as ``"batch"``, ``"2*batch"`` or ``"batch*seq"``, so that
``batch * 12 / 12`` is ``"batch"`` again and a ``view`` with ``-1`` can be
solved when the symbols cancel. Sums of symbols are not tracked (unknown).
"""
from __future__ import annotations

from collections import Counter
from typing import Iterable, Union

Dim = Union[int, str, None]


def _parse(d: str) -> tuple[int, Counter]:
    coeff, syms = 1, Counter()
    for part in d.split("*"):
        part = part.strip()
        if part.lstrip("-").isdigit():
            coeff *= int(part)
        else:
            syms[part] += 1
    return coeff, syms


def _format(coeff: int, syms: Counter) -> Dim:
    names = sorted(syms.elements())
    if not names:
        return coeff
    if coeff == 0:
        return 0
    return "*".join(([str(coeff)] if coeff != 1 else []) + names)


def _mono(d) -> tuple[int, Counter] | None:
    if isinstance(d, bool):
        return int(d), Counter()
    if isinstance(d, int):
        return d, Counter()
    if isinstance(d, str):
        return _parse(d)
    return None


def canon(d: Dim) -> Dim:
    """The canonical spelling of a dimension (``"seq*2*batch"`` -> ``"2*batch*seq"``)."""
    if isinstance(d, str):
        return _format(*_parse(d))
    return d


def mul(a: Dim, b: Dim) -> Dim:
    if isinstance(a, int) and isinstance(b, int):
        return a * b
    if a == 0 or b == 0:
        return 0
    ma, mb = _mono(a), _mono(b)
    if ma is None or mb is None:
        return None
    return _format(ma[0] * mb[0], ma[1] + mb[1])


def prod(dims: Iterable[Dim]) -> Dim:
    out: Dim = 1
    for d in dims:
        out = mul(out, d)
    return out


def floordiv(a: Dim, b: Dim) -> Dim:
    """``a // b``; symbolic only when ``b`` divides ``a`` exactly."""
    if isinstance(a, int) and isinstance(b, int):
        return a // b if b else None
    ma, mb = _mono(a), _mono(b)
    if ma is None or mb is None or mb[0] == 0:
        return None
    if any(ma[1][s] < n for s, n in mb[1].items()) or ma[0] % mb[0]:
        return None
    return _format(ma[0] // mb[0], ma[1] - mb[1])


def exact_div(a: Dim, b: Dim) -> Dim:
    """``a / b`` when it is exact; None when unknown or inexact."""
    if isinstance(a, int) and isinstance(b, int):
        return a // b if b and a % b == 0 else None
    return floordiv(a, b)


def add(a: Dim, b: Dim) -> Dim:
    if isinstance(a, int) and isinstance(b, int):
        return a + b
    if b == 0:
        return a
    if a == 0:
        return b
    return None


def sub(a: Dim, b: Dim) -> Dim:
    if isinstance(a, int) and isinstance(b, int):
        return a - b
    if b == 0:
        return a
    if a is not None and b is not None and canon(a) == canon(b):
        return 0
    return None


def equal(a: Dim, b: Dim) -> bool | None:
    """True/False when decidable, None when not (an unknown or two different symbols)."""
    if a is None or b is None:
        return None
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    if canon(a) == canon(b):
        return True
    return None
