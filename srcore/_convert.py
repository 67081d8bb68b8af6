"""Field converters for the core's attrs classes."""
from __future__ import annotations


def to_tuple(value) -> tuple:
    """``tuple(value)``, as a Python function: attrs inspects a converter's signature when it builds a
    class, and for a builtin such as ``tuple`` that parses its text signature with ``tokenize``, whose
    first use compiles a large regex (~5-15 ms of every cold start for the first such field)."""
    return tuple(value)
