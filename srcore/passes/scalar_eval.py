"""Evaluation of scalar, list and tuple ops on Python values (the constant folder's default table).

Each entry maps an op kind to ``fn(*args) -> result``; a result is one value
(one output) or, for ops with several outputs, a tuple marked by
:data:`MULTI`. Ops are looked up by kind (TorchScript graphs carry no
overload name), so each function must accept every overload's argument kinds.
"""
from __future__ import annotations

import math
import operator
from typing import Any, Callable

MULTI = "multi"  # marker: the function returns one value per output


def _div(a, b):
    return a / b


def _floordiv(a, b):
    return a // b if isinstance(a, int) and isinstance(b, int) else float(math.floor(a / b))


def _num(fn):
    def wrapped(*args):
        if any(not isinstance(a, (int, float)) for a in args):
            raise NotImplementedError("not scalars")
        return fn(*args)
    return wrapped


def _add(*args):
    """Numbers add; two strings or two lists concatenate (``aten::add.str``, ``aten::add.t``)."""
    if len(args) != 2:
        raise NotImplementedError("aten::add with alpha is a tensor op")
    a, b = args
    if isinstance(a, str) and isinstance(b, str) or isinstance(a, list) and isinstance(b, list):
        return a + b
    return _num(operator.add)(a, b)


def _cmp(fn):
    def wrapped(a, b):
        if hasattr(a, "shape") or hasattr(b, "shape"):
            raise NotImplementedError("tensor comparison")
        return fn(a, b)
    return wrapped


def _getitem(seq, i):
    if not isinstance(seq, (list, tuple, str)):
        raise NotImplementedError("not a sequence")
    return seq[i]


def _size(t, dim=None):
    shape = getattr(t, "shape", None)
    if shape is None:
        raise NotImplementedError("not a tensor")
    return list(shape) if dim is None else int(shape[dim])


def _len(x):
    if not isinstance(x, (list, tuple, str)) and not hasattr(x, "shape"):
        raise NotImplementedError("no length")
    return len(x)


def _item(t):
    if getattr(t, "size", 0) != 1:
        raise NotImplementedError("not a one-element tensor")
    return t.reshape(()).item()


def _to_int(x):
    if hasattr(x, "shape"):
        if getattr(x, "size", 0) != 1:
            raise NotImplementedError("not a one-element tensor")
        return int(x.reshape(()).item())
    return int(x)


def _to_float(x):
    if hasattr(x, "shape"):
        if getattr(x, "size", 0) != 1:
            raise NotImplementedError("not a one-element tensor")
        return float(x.reshape(()).item())
    return float(x)


def _to_bool(x):
    if hasattr(x, "shape"):
        if getattr(x, "size", 0) != 1:
            raise NotImplementedError("not a one-element tensor")
        return bool(x.reshape(()).item())
    return bool(x)


def _format(fmt, *xs):
    if not isinstance(fmt, str) or any(hasattr(x, "shape") for x in xs):
        raise NotImplementedError("format of non-scalars")
    return fmt.format(*xs)


def _ndim(t):
    if not hasattr(t, "ndim"):
        raise NotImplementedError("not a tensor")
    return int(t.ndim)


def _device_type(d):
    """``prim::type(Device)``: ``"cuda:1"`` -> ``"cuda"`` (device constants are strings)."""
    if not isinstance(d, str):
        raise NotImplementedError("not a device")
    return d.split(":", 1)[0]


def _list_reduce(fn):
    def wrapped(xs):
        if not isinstance(xs, list) or any(hasattr(x, "shape") for x in xs):
            raise NotImplementedError("any/all of a tensor")
        return fn(xs)
    return wrapped


SCALAR_OPS: dict[str, Callable[..., Any]] = {
    "aten::add": lambda *args: _add(*args), "aten::sub": _num(operator.sub), "aten::mul": _num(operator.mul),
    "aten::div": _num(_div), "aten::floordiv": _num(_floordiv), "aten::remainder": _num(operator.mod),
    "aten::pow": _num(operator.pow), "aten::neg": _num(operator.neg), "aten::abs": _num(abs),
    "prim::min": _num(min), "prim::max": _num(max), "aten::__round_to_zero_floordiv": _num(_floordiv),
    "aten::eq": _cmp(operator.eq), "aten::ne": _cmp(operator.ne), "aten::lt": _cmp(operator.lt),
    "aten::le": _cmp(operator.le), "aten::gt": _cmp(operator.gt), "aten::ge": _cmp(operator.ge),
    "aten::__not__": lambda a: not a, "aten::__and__": _cmp(lambda a, b: a and b),
    "aten::__or__": _cmp(lambda a, b: a or b), "aten::__xor__": _cmp(operator.xor),
    "aten::__is__": lambda a, b: a is b or (a is None and b is None),
    "aten::__isnot__": lambda a, b: not (a is b or (a is None and b is None)),
    "aten::__getitem__": _getitem, "aten::len": _len, "aten::size": _size,
    "aten::dim": lambda t: _ndim(t),
    "aten::Int": _to_int, "aten::Float": _to_float, "aten::Bool": _to_bool, "aten::ScalarImplicit": lambda t: _item(t),
    "prim::ListConstruct": lambda *xs: list(xs), "prim::TupleConstruct": lambda *xs: tuple(xs),
    "prim::TupleIndex": _getitem, "prim::ListUnpack": MULTI, "prim::TupleUnpack": MULTI,
    "aten::format": lambda fmt, *xs: _format(fmt, *xs),
    "aten::str": str, "aten::__contains__": lambda c, x: x in c,
    "prim::type": _device_type, "aten::any": _list_reduce(any), "aten::all": _list_reduce(all),
}


def eval_scalar_op(kind: str, args: list[Any], n_outputs: int) -> list[Any]:
    """Evaluate ``kind`` on Python values; raises ``NotImplementedError`` when the table cannot."""
    ns, _, name = kind.partition("::")
    fn = SCALAR_OPS.get(f"{ns}::{name.split('.', 1)[0]}" if name else kind)
    if fn is None:
        raise NotImplementedError(kind)
    if fn is MULTI:
        (seq,) = args
        if not isinstance(seq, (list, tuple)) or len(seq) != n_outputs:
            raise NotImplementedError("unpack arity")
        return list(seq)
    result = fn(*args)
    if n_outputs != 1:
        raise NotImplementedError("several outputs")
    return [result]
