"""Engines as kernels: what static dispatch records for an ``srcore::engine`` node."""
from __future__ import annotations

from typing import Any

from ..dispatch.resolve import ResolvedKernel
from ..plugin.types import Kernel
from .extract import ENGINE_KIND


def engine_kernels(engines: dict[Any, Any], registry: Any) -> dict[Any, ResolvedKernel]:
    """``{engine node: ResolvedKernel}``: each engine runs as a native kernel of its backend."""
    out = {}
    for node, engine in engines.items():
        backend = node.attrs["backend"]
        eb = registry.engine_builders[backend]
        kernel = Kernel(ENGINE_KIND, backend, "native", ("*",), engine, provider=eb.provider)
        out[node] = ResolvedKernel(kernel, engine, None, "native", backend)
    return out
