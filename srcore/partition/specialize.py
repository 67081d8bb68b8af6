"""A segment's graph for concrete input shapes (what an engine that plans per signature builds)."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from ..errors import EngineBuildError, ShapeError
from ..ir.graph import Graph
from ..ir.types import TensorType


def specialize(graph: Graph, shapes: Sequence[Sequence[int]], known: Mapping[str, Any] | None = None) -> Graph:
    """A copy of ``graph`` with its tensor inputs of the concrete ``shapes``: every value typed
    (shapes propagated) and every derived non-tensor value (``aten::size`` of an input and the int
    and list arithmetic on it: :mod:`.dependencies`) folded into a constant, the chains computing
    them removed. Raises :class:`srcore.EngineBuildError` when the shapes do not fit the graph.

    ``known`` (value name -> value): what a propagation of ``graph`` with its own input types
    knew; when ``shapes`` are those types' (static) shapes, the graph is typed already and
    ``known`` is folded without propagating again (the load's segments: ``Segment.known``)."""
    from ..ops.shapes import propagate
    from ..passes.dce import eliminate_dead_code
    from ..passes.known_values import fold_known_values

    if len(shapes) != len(graph.inputs):
        raise EngineBuildError(f"{len(shapes)} input shapes for a segment of {len(graph.inputs)} inputs")
    g = graph.copy()
    if known is not None and _typed_for(g, shapes):
        by_name = {v.name: v for v in _values(g)}
        folded = {by_name[name]: value for name, value in known.items() if name in by_name}
        if folded and fold_known_values(g, known=folded):
            eliminate_dead_code(g)
        return g
    types = []
    for v, s in zip(g.inputs, shapes):
        t = v.type
        if t is not None and not isinstance(t, TensorType):
            types.append(t)   # a number or list read from outside the segment: it has no shape
            continue
        dtype = t.dtype if isinstance(t, TensorType) else None
        types.append(TensorType(dtype, tuple(int(d) for d in s)))
    for v, t in zip(g.inputs, types):
        v.type = t
    try:
        result = propagate(g, types)
    except ShapeError as exc:
        sig = ", ".join(f"({', '.join(map(str, s))})" for s in shapes)
        raise EngineBuildError(f"inputs of shapes {sig} do not fit the segment: {exc}") from exc
    if fold_known_values(g, known=result.known):
        eliminate_dead_code(g)
    return g


def _typed_for(g: Graph, shapes: Sequence[Sequence[int]]) -> bool:
    """True if every input of ``g`` is a tensor of exactly these static ``shapes``."""
    if len(shapes) != len(g.inputs):
        return False
    for v, s in zip(g.inputs, shapes):
        t = v.type
        if not (isinstance(t, TensorType) and t.shape is not None and t.dtype is not None
                and tuple(t.shape) == tuple(int(d) for d in s)):
            return False
    return True


def _values(g: Graph):
    yield from g.inputs
    for n in g.all_nodes():
        yield from n.outputs
        for b in n.blocks:
            yield from b.inputs
