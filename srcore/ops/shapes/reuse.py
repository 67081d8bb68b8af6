"""What one propagation learnt per node, so that the next one over an edited graph re-runs the rules
only where the graph changed.

A node's facts are reused when everything its rule reads is as it was: the same node object of
the same kind, schema, attributes and input values, equal abstract input values, and its outputs'
declared types either as they were then or as that propagation set them. A node that a pass
created, rewired or edited, or one downstream of a change that altered its inputs' facts, is
evaluated again. Facts are kept as copies (abstract values of lists are mutable: ``aten::append``
grows its list's in place), and never for a rule that mutated its inputs or passed one through as
an output (the sharing is part of its effect), nor for known values that are not plain data.
"""
from __future__ import annotations

from typing import Any

from ...ir.graph import Node
from .base import A, BOTTOM, UNKNOWN

_SCALARS = (bool, int, float, str, type(None))


class _NotPlain(Exception):
    pass


def _copy_known(k: Any) -> Any:
    if k is UNKNOWN or k is BOTTOM or type(k) in _SCALARS:
        return k
    if type(k) in (list, tuple):
        return type(k)(_copy_known(x) for x in k)
    raise _NotPlain


def _copy(a: A) -> A:
    k = a.known
    if a.elems is None and (k is UNKNOWN or type(k) in _SCALARS):   # most values: a tensor, a number
        return A(a.type, k)
    return A(a.type, _copy_known(k), None if a.elems is None else [_copy(e) for e in a.elems])


def snapshot(args: list[A]) -> tuple[A, ...] | None:
    """Copies of ``args`` to compare with later, or None when a known value is not plain data."""
    try:
        return tuple(_copy(a) for a in args)
    except _NotPlain:
        return None


def same(a: A, b: A) -> bool:
    """Equal facts: type, known value (of the same Python type) and element facts."""
    if a.type != b.type:
        return False
    if a.known is not b.known and not (type(a.known) is type(b.known) and a.known == b.known):
        return False
    if a.elems is None or b.elems is None:
        return a.elems is b.elems
    return len(a.elems) == len(b.elems) and all(map(same, a.elems, b.elems))


class NodeFacts:
    """One node's rule evaluation: what it read and what it gave."""

    __slots__ = ("kind", "schema", "inputs", "attrs", "args", "declared", "outs")

    def __init__(self, node: Node, args: tuple[A, ...], declared: list, outs: tuple[A, ...]):
        self.kind, self.schema = node.kind, node.schema
        self.inputs = tuple(node.inputs)
        self.attrs = _attrs_of(node)
        self.args, self.declared, self.outs = args, tuple(declared), outs

    def fits(self, node: Node, args: list[A]) -> bool:
        """True if ``node``'s rule would read now exactly what it read then."""
        if node.kind != self.kind or node.schema is not self.schema or len(node.inputs) != len(self.inputs):
            return False
        if any(a is not b for a, b in zip(node.inputs, self.inputs)) or _attrs_of(node) != self.attrs:
            return False
        if not all(map(same, args, self.args)):
            return False
        return all(o.type == d or o.type == r.type for o, d, r in zip(node.outputs, self.declared, self.outs))

    def replay(self) -> list[A]:
        return [_copy(a) for a in self.outs]


def _attrs_of(node: Node) -> tuple:
    return tuple((k, id(v)) for k, v in node.attrs.items()) if node.attrs else ()


def record(node: Node, read: tuple[A, ...], args: list[A], declared: list, outs: list[A]) -> NodeFacts | None:
    """The facts to keep for ``node`` (``read``: the :func:`snapshot` of ``args`` taken before its
    rule ran), or None when they cannot be replayed faithfully."""
    if len(outs) != len(node.outputs) or not all(map(same, read, args)):
        return None   # the rule changed what it read (a list it appended to)
    if any(o is a for o in outs for a in args):
        return None   # an input passed through: later mutations of one must show in the other
    kept = snapshot(outs)
    return NodeFacts(node, read, declared, kept) if kept is not None else None
