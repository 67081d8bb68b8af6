"""One ``__repr__`` for the core's attrs classes, instead of one generated per class.

attrs compiles a ``__repr__`` for every class it builds (an f-string over the fields inside a recursion
guard): about 40% of the ``compile()`` time of building a class, and building the ~90 classes a first
run imports is about a third of srcore's share of a cold start. :func:`fields_repr` returns the same
text from the class's ``__attrs_attrs__`` at call time, and :func:`shared_repr` puts it on a class
before attrs sees it: attrs' ``define``/``frozen`` then keep the class's own ``__repr__``
(``auto_detect``) and compile only ``__init__``, ``__eq__`` and ``__hash__``.
"""
from __future__ import annotations

import threading

from attrs import NOTHING

_guard = threading.local()


def fields_repr(self) -> str:
    """``Name(field=value!r, ...)`` exactly as attrs writes it: fields with ``repr=False`` left out, a
    field's own ``repr=`` callable used, ``...`` for an object already being printed (a cycle)."""
    try:
        printing = _guard.ids
    except AttributeError:
        printing = _guard.ids = set()
    if id(self) in printing:
        return "..."
    printing.add(id(self))
    try:
        parts = []
        for a in type(self).__attrs_attrs__:
            if a.repr is False:
                continue
            value = getattr(self, a.name) if a.init else getattr(self, a.name, NOTHING)
            parts.append(f"{a.name}={value!r}" if a.repr is True else f"{a.name}={a.repr(value)}")
        return f"{type(self).__qualname__.rsplit('>.', 1)[-1]}({', '.join(parts)})"
    finally:
        printing.discard(id(self))


def shared_repr(cls):
    """Class decorator, below ``@attrs.define`` / ``@attrs.frozen``: the class prints with :func:`fields_repr`."""
    cls.__repr__ = fields_repr
    return cls
