"""The kernel table and static dispatch (resolve every node's kernel once, at load).

``KernelTable`` holds every loaded kernel by ``(op, backend, kind)``;
``resolve_node`` / ``resolve_graph`` pick a kernel per node; ``STRUCTURAL_KINDS``
are the node kinds the runtime runs itself. See docs/static-dispatch.md.
"""
from __future__ import annotations

from .lazy import import_ref, resolve_ref
from .resolve import (STRUCTURAL_KINDS, ResolvedKernel, Unsupported, accepts_dtypes, dispatch_dtypes, node_info,
                      resolve_graph, resolve_node)
from .table import STANDARD_DTYPES, KernelTable, op_key

__all__ = [
    "KernelTable", "ResolvedKernel", "Unsupported", "STRUCTURAL_KINDS", "STANDARD_DTYPES",
    "resolve_node", "resolve_graph", "dispatch_dtypes", "accepts_dtypes", "node_info",
    "import_ref", "resolve_ref", "op_key",
]
