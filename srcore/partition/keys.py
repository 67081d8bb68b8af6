"""The identity of a segment across processes and machines (what engine caches and serialized
engines are keyed by)."""
from __future__ import annotations

import hashlib

import numpy as np

from ..format.safetensors_io import drop_resident_pages
from ..ir.graph import Graph

#: bump when the meaning of a key changes
KEY_VERSION = 1


def segment_key(backend: str, graph: Graph) -> str:
    """SHA-256 (hex) of the backend, the segment graph's IR text (types, symbolic dims, constants'
    parameter names) and the dtype, shape and bytes of each of its array constants."""
    from ..ir.printer import print_graph

    digest = hashlib.sha256(f"srcore-segment/{KEY_VERSION}/{backend}\n".encode())
    digest.update(print_graph(graph).encode())
    for n in graph.all_nodes():
        if n.kind != "prim::Constant":
            continue
        value = n.attrs.get("value")
        if isinstance(value, np.ndarray):
            a = np.ascontiguousarray(value)
            digest.update(f"{a.dtype.str}{a.shape}".encode())
            digest.update(a)   # its bytes, in C order (hashlib reads the contiguous buffer)
            drop_resident_pages((value,))   # read once for the key: not kept resident for it
    return digest.hexdigest()
