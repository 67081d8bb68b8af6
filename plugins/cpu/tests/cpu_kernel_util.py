"""Helpers the cpu plugin's kernel tests share."""
from __future__ import annotations

from srcore.ir.types import TensorType
from srcore.plugin import ArgInfo, NodeInfo


def node(op: str, **args) -> NodeInfo:
    """A ``NodeInfo`` for a matcher: every argument is a constant, except those given as ``"<var>"``."""
    return NodeInfo(op, None, tuple(ArgInfo(n, TensorType(), not (isinstance(v, str) and v == "<var>"), v)
                                    for n, v in args.items()), ())
