"""A segment's graph for concrete input shapes (what an engine that plans per signature builds)."""
from __future__ import annotations

from typing import Sequence

from ..errors import EngineBuildError, ShapeError
from ..ir.graph import Graph
from ..ir.types import TensorType


def specialize(graph: Graph, shapes: Sequence[Sequence[int]]) -> Graph:
    """A copy of ``graph`` with its tensor inputs of the concrete ``shapes``: every value typed
    (shapes propagated) and every derived non-tensor value (``aten::size`` of an input and the int
    and list arithmetic on it: :mod:`.dependencies`) folded into a constant, the chains computing
    them removed. Raises :class:`srcore.EngineBuildError` when the shapes do not fit the graph."""
    from ..ops.shapes import propagate
    from ..passes.dce import eliminate_dead_code
    from ..passes.known_values import fold_known_values

    if len(shapes) != len(graph.inputs):
        raise EngineBuildError(f"{len(shapes)} input shapes for a segment of {len(graph.inputs)} inputs")
    g = graph.copy()
    types = []
    for v, s in zip(g.inputs, shapes):
        t = v.type
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
