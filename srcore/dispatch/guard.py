"""A kernel chosen while some of its node's dtypes were unknown checks them on every call.

Static dispatch never picks a kernel for a dtype the kernel does not list. When
propagation could not tell a dtype (a ``Tensor[]`` input, a value joined from
branches of different dtypes), the kernel is wrapped by :func:`dtype_guard`,
which raises :class:`srcore.KernelError` before calling it on an array whose
dtype it does not list (for a ``"*"`` kernel: a quantized array, unless it lists ``"quantized"``).
Nodes whose dtypes are known pay nothing.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..errors import KernelError
from ..plugin.types import Kernel
from .resolve import accepts_dtypes


def _arrays(values):
    for x in values:
        if isinstance(x, np.ndarray):
            yield x
        elif isinstance(x, (list, tuple)):
            yield from (y for y in x if isinstance(y, np.ndarray))


def _numpy_dtypes(names):
    for name in names:
        try:
            yield np.dtype(name)
        except Exception:   # noqa: BLE001 - a quantized dtype, a wildcard: no numpy dtype of that name
            pass


def dtype_guard(fn: Callable[..., Any], kernel: Kernel, op: str) -> Callable[..., Any]:
    """``fn`` preceded by a check that every array argument has a dtype ``kernel`` lists."""
    allowed = frozenset(kernel.dtypes)
    # plain arrays are checked by dtype object (``dtype.name`` is Python code in numpy: ~1 us an
    # array, 11 us a call of an LSTM with its weight list); anything else by name
    plain = frozenset(_numpy_dtypes(allowed))
    p = kernel.provider
    who = f"{p.dist or p.name} {p.version or ''}".strip() if p is not None else "an unregistered plugin"

    def check(x):
        name = getattr(x, "qdtype", None) or x.dtype.name   # a QuantizedArray: its quantized dtype
        if not accepts_dtypes(kernel, (name,)):
            raise KernelError(f"{op}: the {kernel.kind} kernel of {who} on {kernel.backend} lists dtypes "
                              f"({', '.join(kernel.dtypes)}) but got a {name} array (its dtype "
                              "was unknown when the model was loaded; give the inputs' dtypes)")

    def guarded(*args, **kwargs):
        # not ``out``: a planned buffer holds a quantized value's stored integers (uint8 for quint8)
        for x in _arrays((*args, *(v for k, v in kwargs.items() if k != "out")) if kwargs else args):
            if type(x) is not np.ndarray or x.dtype not in plain:
                check(x)
        return fn(*args, **kwargs)

    def guarded_any(*args, **kwargs):
        # a "*" kernel: only an ndarray subclass (a QuantizedArray) needs a look (~0.5 us a call of two
        # arguments, CPU time on the SPR; ``guarded`` ~0.9 us)
        for x in (args if not kwargs else (*args, *(v for k, v in kwargs.items() if k != "out"))):
            t = type(x)
            if t is np.ndarray:
                continue
            if t is list or t is tuple:
                for y in x:
                    if type(y) is not np.ndarray and isinstance(y, np.ndarray):
                        check(y)
            elif isinstance(x, np.ndarray):
                check(x)
        return fn(*args, **kwargs)

    if "*" in allowed:   # every plain array passes; a quantized one only if the kernel lists it
        guarded = guarded_any

    guarded.__name__ = getattr(fn, "__name__", "kernel")
    guarded.__wrapped__ = fn
    return guarded
