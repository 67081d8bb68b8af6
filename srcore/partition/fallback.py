"""Running a segment node by node: what an engine falls back to for inputs it cannot plan.

An engine with symbolic input dims plans each input signature on first use. Some
signatures may have no plan (a size no tactic takes, a builder bug); rather than fail
the call, the engine hands those to :attr:`srcore.plugin.Segment.fallback`, which runs the
segment's own graph on the backends after the engine's, as TRTorch's fallback does for
whole nodes, here per signature.
"""
from __future__ import annotations

import threading
from typing import Any, Callable

import attrs
import numpy as np


class SegmentFallback:
    """``fallback(*inputs)``: the segment's graph run node by node on ``options.backends``, as the
    module ``load(graph, options)`` makes of it (built on first call; a runtime per calling thread,
    from the module's ``runtime()``).

    Its results are fresh arrays like an engine's: one that shares memory with an input (a
    segment ending in a view) is copied, since the caller may reuse the input's buffer.
    """

    def __init__(self, graph: Any, options: Any, load: Callable[[Any, Any], Any]):
        self.graph = graph
        self.load = load
        self.options = attrs.evolve(options, optimize=False, manage_output_tensors=False,
                                    require_full_compilation=False)
        self.backends = self.options.backends
        self._module = None
        self._lock = threading.Lock()

    def optimized(self) -> Callable[..., Any]:
        """A runtime of the segment's graph optimized on ``options.backends``, as they run its nodes
        inside the model (its fusions), for an engine to time itself against at build (the node-by-node
        fallback leaves them out). Built on each call; its outputs may share the inputs' memory."""
        return self.load(self.graph, attrs.evolve(self.options, optimize=True)).runtime()

    def __call__(self, *inputs):
        module = self._module
        if module is None:
            with self._lock:
                if self._module is None:
                    self._module = self.load(self.graph, self.options)
                module = self._module
        result = module.runtime()(*inputs)
        if isinstance(result, tuple):
            return tuple(_own(r, inputs) for r in result)
        return _own(result, inputs)


def _own(r, inputs):
    if isinstance(r, np.ndarray) and any(isinstance(x, np.ndarray) and np.may_share_memory(r, x) for x in inputs):
        return r.copy()
    return r
