"""Common subexpression elimination.

Two nodes are merged when they have the same kind, the same inputs (by
identity), equal attributes and equal output types, and the first one
dominates the second (it comes earlier in the same block or in an enclosing
block). Only pure nodes take part: no side effects, no blocks, no randomness,
no in-place writes, and neither their inputs nor their outputs are mutated by
anyone (merging two fresh lists would make them share one).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..ir.graph import Block, Graph, Node
from ..ir.alias import mutated_inputs, mutated_values
from ._util import has_side_effects, is_const, is_nondeterministic, replace_with_values


def _freeze(x: Any) -> Any:
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, tuple(_freeze(e) for e in x))
    if isinstance(x, dict):
        return ("dict", tuple(sorted((k, _freeze(v)) for k, v in x.items())))
    if isinstance(x, np.ndarray):  # tensors: equal when same dtype, shape, bytes
        if x.size > 4096:
            return ("tensor-id", id(x))
        # a QuantizedArray: the same integers with other parameters are another value
        return ("tensor", str(x.dtype), tuple(x.shape), x.tobytes(), getattr(x, "qdtype", None),
                getattr(x, "qparams", None))
    if isinstance(x, float) and x != x:
        return ("nan",)
    return (type(x).__name__, x)


def _key(node: Node):
    try:
        attrs = tuple(sorted((k, _freeze(v)) for k, v in node.attrs.items()))
        hash(attrs)
    except TypeError:
        return None
    return (node.kind, tuple(id(v) for v in node.inputs), attrs, tuple(str(o.type) for o in node.outputs))


def _pure(node: Node, mutated: set[int]) -> bool:
    if node.blocks or not node.outputs or node.kind in ("prim::Param", "prim::Return"):
        return False
    if node.kind == "prim::Constant" and not is_const(node.output) and "param" not in node.attrs:
        return False  # opaque values (a tensor dump, a function): equal attributes say nothing
    if has_side_effects(node) or is_nondeterministic(node) or mutated_inputs(node):
        return False
    return not any(id(v) in mutated for v in (*node.inputs, *node.outputs))


def eliminate_common_subexpressions(graph: Graph) -> bool:
    """Merge duplicate pure nodes; True if any was removed."""
    # merging pure, unwritten nodes creates no new writes, so one mutation analysis serves the pass
    return _cse_block(graph.block, [{}], mutated_values(graph))


def _cse_block(block: Block, scopes: list[dict], mutated: set[int]) -> bool:
    changed = False
    table: dict = {}
    scopes = scopes + [table]
    for node in list(block.nodes):
        for b in node.blocks:
            changed |= _cse_block(b, scopes, mutated)
        if not _pure(node, mutated):
            continue
        key = _key(node)
        if key is None:
            continue
        prior = next((s[key] for s in reversed(scopes) if key in s), None)
        if prior is None:
            table[key] = node
            continue
        replace_with_values(node, list(prior.outputs))
        changed = True
    return changed
