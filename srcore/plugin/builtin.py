"""The builtin plugin: srcore's own op declarations, through the same hooks as any plugin.

It declares the standard ``aten::``/``prim::`` (and ``srcore::``) ops from the
declaration files shipped in :mod:`srcore.ops`. It is essential: it cannot
be blocked. Backends and kernels come from plugins (``cpu`` from srcore-cpu).
"""
from __future__ import annotations

import os

import srcore.ops

from . import hookimpl
from .types import OpLibrary

#: (namespace, file in srcore/ops) of the core's declaration files
CORE_LIBRARIES = (("aten", "aten.yaml"), ("aten", "aten_quantized.yaml"), ("prim", "prim.yaml"),
                  ("srcore", "srcore.yaml"), ("quantized", "quantized.yaml"))


@hookimpl
def srcore_op_libraries():
    ops = os.path.dirname(srcore.ops.__file__)
    for namespace, name in CORE_LIBRARIES:
        if os.path.isfile(os.path.join(ops, name)):  # srcore.yaml is optional
            yield OpLibrary.from_resource(namespace, "srcore.ops", name)
