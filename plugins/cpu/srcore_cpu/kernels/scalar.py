"""Arithmetic on Python numbers, as TorchScript emits for sizes, loops and conditions.

``aten::add.int(int a, int b) -> int`` and friends. Semantics follow
TorchScript (which follows Python): ``//`` and ``%`` round toward negative
infinity, ``aten::div`` on ints is true division, ``aten::pow.int`` returns
a float, ``aten::floor.float``/``ceil.float`` return ints.
"""
from __future__ import annotations

import builtins as _b  # this module shadows min, max, sum, ...
import math

from srcore.plugin import KernelError


def add(a, b):
    return a + b


def sub(a, b):
    return a - b


def mul(a, b):
    return a * b


def div(a, b):
    """``aten::div.int`` / ``.float`` / ``div(Scalar, Scalar)``: true division, a float."""
    if b == 0:
        raise KernelError("ZeroDivisionError: division by zero")
    return a / b


def floordiv(a, b):
    if b == 0:
        raise KernelError("ZeroDivisionError: integer division or modulo by zero")
    return a // b


def remainder(a, b):
    if b == 0:
        raise KernelError("ZeroDivisionError: integer division or modulo by zero")
    return a % b


def pow(a, b):
    """``aten::pow.int`` (and float forms): a float."""
    return float(a) ** b


def pow_int(a, b):
    """``aten::pow.int_to_int``."""
    if b < 0:
        raise KernelError("Integers to negative integer powers are not allowed.")
    return a ** b


def neg(a):
    return -a


def abs(a):
    return -a if a < 0 else a


def eq(a, b):
    return a == b


def ne(a, b):
    return a != b


def lt(a, b):
    return a < b


def le(a, b):
    return a <= b


def gt(a, b):
    return a > b


def ge(a, b):
    return a >= b


def atan2(a, b):
    return math.atan2(a, b)


def fmod(a, b):
    """``aten::fmod`` on Python numbers: always a float, as TorchScript's."""
    return math.fmod(a, b)


def and_(a, b):
    """``aten::__and__.bool`` / ``.int``: ``a & b`` on Python numbers (TorchScript's ``and`` of loop
    conditions, e.g. after a ``break``, is one)."""
    return a & b


def or_(a, b):
    return a | b


def xor_(a, b):
    return a ^ b


def not_(a):
    return not a


def is_(a, b):
    """``aten::__is__``: identity (None is None; values compare by identity like Python)."""
    return a is b


def isnot(a, b):
    return a is not b


def min(a, b=None):
    """``prim::min`` of two numbers, of two lists (lexicographic), or of one list (``self_int``)."""
    if b is None:
        if not a:
            raise KernelError("min() arg is an empty sequence")
        return _b.min(a)
    return a if a <= b else b


def max(a, b=None):
    if b is None:
        if not a:
            raise KernelError("max() arg is an empty sequence")
        return _b.max(a)
    return a if a >= b else b


def sum(l):
    """``aten::sum.int`` / ``.float`` / ``.bool`` of a list."""
    return _b.sum(l)


def all(l):
    return _b.all(l)


def any(l):
    return _b.any(l)


def range_length(lo, hi, step):
    """``aten::__range_length``: ``len(range(lo, hi, step))``."""
    if step == 0:
        raise KernelError("range() arg 3 must not be zero")
    return len(range(lo, hi, step))


def derive_index(index, start, step):
    """``aten::__derive_index``: the loop variable of iteration ``index`` of ``range(start, _, step)``."""
    return start + index * step


def _floating(fn):
    def kernel(a, b=None):
        return fn(a) if b is None else fn(a, b)
    kernel.__name__ = fn.__name__
    return kernel


exp = _floating(math.exp)
log = _floating(math.log)
log1p = _floating(math.log1p)
expm1 = _floating(math.expm1)
sqrt = _floating(math.sqrt)
sin = _floating(math.sin)
cos = _floating(math.cos)
tanh = _floating(math.tanh)
erf = _floating(math.erf)


def floor(a):
    """``aten::floor.float`` -> int."""
    return math.floor(a)


def ceil(a):
    return math.ceil(a)


def round(a):
    """``aten::round.float`` -> float (half to even, like std::nearbyint)."""
    return float(_b.round(a))


def isnan(a):
    return math.isnan(a)


def isinf(a):
    return math.isinf(a)
