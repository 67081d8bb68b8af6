"""Running a segment node by node: what an engine falls back to for inputs it cannot plan.

An engine with symbolic input dims plans each input signature on first use. Some
signatures may have no plan (a size no tactic takes, a builder bug); rather than fail
the call, the engine hands those to :attr:`srcore.plugin.Segment.fallback`, which runs the
segment's own graph on the backends after the engine's, as TRTorch's fallback does for
whole nodes, here per signature.
"""
from __future__ import annotations

import threading
from typing import Any

import attrs
import numpy as np


class SegmentFallback:
    """``fallback(*inputs)``: the segment's graph run as a :class:`srcore.StaticModule` on
    ``options.backends`` (built on first call; one runtime per calling thread).

    Its results are fresh arrays like an engine's: one that shares memory with an input (a
    segment ending in a view) is copied, since the caller may reuse the input's buffer.
    """

    def __init__(self, graph: Any, options: Any, plugin_manager: Any = None):
        self.graph = graph
        self.plugin_manager = plugin_manager
        self.options = attrs.evolve(options, optimize=False, manage_output_tensors=False,
                                    require_full_compilation=False)
        self.backends = self.options.backends
        self._module = None
        self._lock = threading.Lock()
        self._local = threading.local()

    def _runtime(self):
        rt = getattr(self._local, "runtime", None)
        if rt is None:
            from ..runtime.static_runtime import StaticRuntime

            with self._lock:
                if self._module is None:
                    from ..runtime.static_module import StaticModule

                    self._module = StaticModule(self.graph, self.options, plugin_manager=self.plugin_manager)
            rt = self._local.runtime = StaticRuntime(self._module)
        return rt

    def __call__(self, *inputs):
        result = self._runtime()(*inputs)
        if isinstance(result, tuple):
            return tuple(_own(r, inputs) for r in result)
        return _own(result, inputs)


def _own(r, inputs):
    if isinstance(r, np.ndarray) and any(isinstance(x, np.ndarray) and np.may_share_memory(r, x) for x in inputs):
        return r.copy()
    return r
