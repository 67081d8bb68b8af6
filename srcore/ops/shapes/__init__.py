"""Dtype and shape propagation over srcore's IR: one rule per standard op.

``propagate(graph, input_types)`` sets every value's type (dtype and shape,
with symbolic dims) and tracks the known values of non-tensor values (sizes,
lists of sizes, constants). See ``docs/shapes.md``.
"""
from __future__ import annotations

from . import (conv, creation, elementwise, fused, index, linalg, matrix, nn, pad, prim,  # noqa: F401
               quantized, rearrange, recurrent, reduce, scalar, special, view)  # (importing registers the rules)
from .base import RULES, UNKNOWN, A, Ctx, lookup, rule
from .dtypes import promote_types, result_type
from .interp import MAX_LOOP_ITERATIONS, PropagationResult, join_types, propagate

#: ops declared in aten.yaml/prim.yaml that deliberately have no rule, with the reason
NO_RULE: dict[str, str] = {
    "prim::If": "interpreted by propagate: the branches run and their output types are joined",
    "prim::Loop": "interpreted by propagate: the body runs to a fixpoint of the carried types",
}

__all__ = ["propagate", "PropagationResult", "RULES", "NO_RULE", "UNKNOWN", "A", "Ctx", "lookup", "rule",
           "promote_types", "result_type", "join_types", "MAX_LOOP_ITERATIONS"]
