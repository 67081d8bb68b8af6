"""The kernel table and static dispatch (resolve every node's kernel once, at load).

``KernelTable`` holds every loaded kernel by ``(op, backend, kind)``;
``resolve_node`` / ``resolve_graph`` pick a kernel per node; ``STRUCTURAL_KINDS``
are the node kinds the runtime runs itself. See docs/static-dispatch.md.

Names load on first use, so that building the registry at start-up does not
import the resolver (and the IR) before a model needs them.
"""
from __future__ import annotations

import importlib

_LAZY = {
    "KernelTable": "table", "STANDARD_DTYPES": "table", "op_key": "table",
    "import_ref": "lazy", "resolve_ref": "lazy",
    "STRUCTURAL_KINDS": "resolve", "ResolvedKernel": "resolve", "Unsupported": "unsupported",
    "accepts_dtypes": "resolve", "dispatch_dtypes": "resolve", "node_info": "resolve",
    "resolve_graph": "resolve", "resolve_node": "resolve",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return __all__
