"""A compiled kernel's Python wrapper remembers what it derives from the geometry arguments (output
size, window bounds) per input shape, when the node's geometry arguments are constants: the argument
checks and tuple building cost a few us a call in Python, as much as a small kernel itself."""
from __future__ import annotations

from srcore.plugin import NodeInfo


def all_const(node: NodeInfo, names) -> bool:
    """Whether every argument of ``names`` is a constant (False for one the node does not know)."""
    try:
        return all(node.is_const(n) for n in names)
    except KeyError:
        return False


class PerShape:
    """``fn(shape, *geometry arguments)``, remembered per ``shape`` when the node's arguments
    ``names`` are constants, recomputed every call otherwise. An error ``fn`` raises is raised again
    on every call (nothing is remembered for it)."""

    def __init__(self, node: NodeInfo, names, fn):
        self.fixed, self.fn, self.memo = all_const(node, names), fn, {}

    def __call__(self, shape, *args):
        if not self.fixed:
            return self.fn(shape, *args)
        g = self.memo.get(shape)
        if g is None:
            g = self.memo[shape] = self.fn(shape, *args)
        return g
