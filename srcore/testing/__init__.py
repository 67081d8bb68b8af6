"""Helpers for testing srcore and its plugins (torch is imported only when a reference needs it).

``check_kernel(kernel, reference, *inputs, **kwargs)`` runs a kernel the way
the runtime does (``out=None`` and a preallocated ``out``) and compares it
with a reference (torch or numpy).
"""
from __future__ import annotations

from .kernels import check_kernel, node_info, random_inputs, resolve_kernel

__all__ = ["check_kernel", "node_info", "random_inputs", "resolve_kernel"]
