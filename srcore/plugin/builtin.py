"""The builtin plugin: srcore's own op declarations and shape rules, through the same hooks as any plugin.

It declares the standard ``aten::``/``prim::`` (and ``srcore::``) ops from the
declaration files shipped in :mod:`srcore.ops`, and yields the rules of
:mod:`srcore.ops.shapes` (written there with ``@rule(...)``) and the
decompositions of :mod:`srcore.ops.decompositions`. It is essential:
it cannot be blocked. Backends and kernels come from plugins (``cpu`` from
srcore-cpu).
"""
from __future__ import annotations

import os

import srcore.ops

from . import hookimpl

#: (namespace, file in srcore/ops) of the core's declaration files
CORE_LIBRARIES = (("aten", "aten.yaml"), ("aten", "aten_quantized.yaml"), ("prim", "prim.yaml"),
                  ("srcore", "srcore.yaml"), ("quantized", "quantized.yaml"))


@hookimpl
def srcore_op_libraries():
    from .hook_types import OpLibrary  # a selective start calls no op-library hook: built on first use

    ops = os.path.dirname(srcore.ops.__file__)
    for namespace, name in CORE_LIBRARIES:
        if os.path.isfile(os.path.join(ops, name)):  # srcore.yaml is optional
            yield OpLibrary.from_resource(namespace, "srcore.ops", name)


@hookimpl
def srcore_shape_rules():
    from .rule_index import core_shape_rules  # an index: no rule module imported until a model needs it

    yield from core_shape_rules()


@hookimpl
def srcore_decompositions():
    from srcore.ops.decompositions import DECOMPOSITIONS

    from .hook_types import Decomposition

    for op, text in DECOMPOSITIONS.items():
        yield Decomposition(op, text)
    # every .out and in-place aten overload whose functional sibling is declared
    yield Decomposition("aten::*", "srcore.ops.decompositions:out_or_inplace")
