"""Dtype and shape propagation over srcore's IR: one rule per standard op.

``propagate(graph, input_types)`` sets every value's type (dtype and shape,
with symbolic dims) and tracks the known values of non-tensor values (sizes,
lists of sizes, constants). See ``docs/shapes.md``.
"""
from __future__ import annotations

import importlib

from . import base
from .base import UNKNOWN, A, Ctx, rule
from .dtypes import promote_types, result_type
from .interp import MAX_LOOP_ITERATIONS, PropagationResult, join_types, propagate

#: the modules of the core's rules (importing one files its ``@rule`` functions in ``RULES``). They
#: load on first use of ``RULES`` or ``lookup`` (the full registry's builtin plugin reads ``RULES``); a
#: selective build imports only the modules its rules name (``"srcore.ops.shapes.linalg:linear"``)
RULE_MODULES = ("conv", "creation", "detection", "elementwise", "fused", "index", "linalg", "matrix", "nn", "pad",
                "prim", "quantized", "rearrange", "recurrent", "reduce", "scalar", "special", "view")


def load_rules() -> dict:
    """Import every core rule module; ``RULES`` (op name -> rule function), complete."""
    for name in RULE_MODULES:
        importlib.import_module(f"{__name__}.{name}")
    return base.RULES


def lookup(qualified: str):
    """The core's rule of an op: by its exact overload name, else by its base name (or None)."""
    load_rules()
    return base.lookup(qualified)


def __getattr__(name: str):
    if name == "RULES":
        return load_rules()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

#: ops declared in aten.yaml/prim.yaml that deliberately have no rule, with the reason
NO_RULE: dict[str, str] = {
    "prim::If": "interpreted by propagate: the branches run and their output types are joined",
    "prim::Loop": "interpreted by propagate: the body runs to a fixpoint of the carried types",
}

__all__ = ["propagate", "PropagationResult", "RULES", "NO_RULE", "UNKNOWN", "A", "Ctx", "lookup", "rule",
           "promote_types", "result_type", "join_types", "MAX_LOOP_ITERATIONS", "load_rules", "RULE_MODULES"]
