"""``fold_known_values``: replace values that shape propagation knows by constants.

:func:`srcore.ops.shapes.propagate` runs over the graph from its input types
(the input specs: dtypes and static dims) and knows the value of many
non-tensor values: ``aten::size`` of a static dim, ``prim::dtype``,
``prim::device`` (always ``cpu``), ``prim::requires_grad`` and ``prim::is_nested``
(always false for a static runtime's inputs), ``aten::is_grad_enabled`` /
``aten::is_autocast_enabled`` (false at inference), and whatever scalar/list
arithmetic follows from them (a list built by ``append`` of known values, its
``any``/``all``, ``x is x``...). Every use of such a value is redirected to a new
``prim::Constant``; the ``prim::If`` it decides is then inlined by
``inline_constant_ifs``/``fold_constants`` and the dead code goes with DCE.

Guard: only facts that hold for every input satisfying the input types are
used. Propagation never knows tensor data; symbolic dims (strings) are never
folded into ``int`` slots; a value is folded only when its Python value matches
its declared type (``int`` for ``int``, ``bool`` for ``bool``, ...); lists that the
program mutates are never replaced (their value changes along the program).
"""
from __future__ import annotations

from typing import Any

from ..ir.graph import Graph
from ..ir.types import (BoolType, DeviceType, FloatType, IntType, ListType, NoneType, NumberType, OptionalType,
                        ScalarTypeType, StrType, TensorType, TupleType, Type)
from ..ir.alias import is_mutated

#: nodes whose outputs are never redirected (already constants, or placeholders)
_SKIP = frozenset({"prim::Constant", "prim::Uninitialized", "prim::Param", "prim::Return"})


def matches(value: Any, t: Type | None) -> bool:
    """True if the Python ``value`` is a plain constant of type ``t`` (no symbol, no tensor)."""
    if isinstance(t, OptionalType):
        return value is None or matches(value, t.elem)
    if isinstance(t, BoolType):
        return isinstance(value, bool)
    if isinstance(t, (IntType, ScalarTypeType)):
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(t, FloatType):
        return isinstance(value, float)
    if isinstance(t, NumberType):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if isinstance(t, (StrType, DeviceType)):
        return isinstance(value, str)
    if isinstance(t, NoneType):
        return value is None
    if isinstance(t, ListType):
        return isinstance(value, list) and all(matches(v, t.elem) for v in value)
    if isinstance(t, TupleType):
        return (isinstance(value, tuple) and len(value) == len(t.elems)
                and all(matches(v, e) for v, e in zip(value, t.elems)))
    return False


def _concrete(value: Any, t: Type) -> Type:
    """The constant's type: an optional's element type (or None)."""
    if isinstance(t, OptionalType):
        return NoneType() if value is None else t.elem
    return t


def _blocks(graph: Graph):
    from ._util import walk_blocks

    return walk_blocks(graph.block)


class KnownValues:
    """What one propagation knew, and of which graph (:func:`graph_signature`): the pipeline reuses
    ``known`` while no pass has changed the graph since, instead of propagating again; ``result``
    (the ``PropagationResult``, if given) lets the propagation after a change re-run the rules only
    where the graph changed."""

    __slots__ = ("known", "signature", "result")

    def __init__(self, graph: Graph, known: dict, result=None):
        self.known, self.signature, self.result = known, graph_signature(graph), result

    def for_graph(self, graph: Graph) -> dict | None:
        return self.known if self.signature == graph_signature(graph) else None

    def update(self, graph: Graph, result) -> None:
        """Hold ``result``, a propagation of ``graph`` as it is now."""
        self.known, self.signature, self.result = result.known, graph_signature(graph), result


def graph_signature(graph: Graph) -> tuple:
    """The graph's structure: every node and what it reads (a pass that adds, removes or rewires
    anything changes it)."""
    return tuple((id(n), tuple(id(v) for v in n.inputs)) for n in graph.all_nodes())


def fold_known_values(graph: Graph, *, known: dict | None = None, reuse: KnownValues | None = None, rules=None,
                      schemas=None) -> bool:
    """Redirect the uses of every value whose value propagation knows to a constant; True if changed.

    ``known`` (``Value -> value``, e.g. ``propagate(graph).known``) skips the propagation, as does
    ``reuse`` while the graph is still the one it was made of. ``rules``/``schemas``: what the
    propagation reads (default: the process-wide registry's).
    """
    if known is None and reuse is not None:
        known = reuse.for_graph(graph)
    if known is None:
        from ..errors import ShapeError
        from ..ops.shapes import propagate

        # propagation also sets every value's type: keep the graph's own types (the pass only
        # redirects uses), so that its effect does not depend on whether types were propagated before
        saved = [(v, v.type) for n in graph.all_nodes() for v in n.outputs] + [(v, v.type) for v in graph.inputs]
        saved += [(v, v.type) for b in _blocks(graph) for v in b.inputs]
        try:
            result = propagate(graph, rules=rules, schemas=schemas,
                               previous=reuse.result if reuse is not None else None)
            known = result.known
            if reuse is not None:
                reuse.update(graph, result)
        except ShapeError:  # a contradiction: leave it for the runtime to report
            return False
        finally:
            for v, t in saved:
                v.type = t
    changed = False
    for node in list(graph.all_nodes()):
        if node.kind in _SKIP or node.owning_block is None:
            continue
        for o in node.outputs:
            if not o.uses or o not in known or isinstance(o.type, TensorType):
                continue
            value = known[o]
            if not matches(value, o.type):
                continue
            if isinstance(o.type, (ListType, TupleType)) and is_mutated(o):
                continue  # the list changes along the program: its final value is not its value here
            const = graph.insert_constant(value, _concrete(value, o.type), before=node)
            const.node.source = node.source
            o.replace_all_uses_with(const)
            changed = True
    return changed
