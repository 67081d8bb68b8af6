"""Tactic selection: for each layer, every implementation that applies, timed on the layer's
real shapes; the fastest wins (TensorRT's builder does the same with its kernels).

Implementations register per layer kind in :data:`TACTICS` as ``(name, factory)``;
``factory(layer, net)`` returns ``fn(*inputs, *outputs)`` or None when it does not
apply. The numpy implementations (``layers_numpy.py``) are always candidates.
Engine option ``timing=False`` skips the timing and takes the first candidate
(the registered order puts the usually fastest first).
"""
from __future__ import annotations

import time
from typing import Any, Callable

import numpy as np

from srcore.errors import EngineBuildError

from . import layers_numpy
from .network import Layer, Network

Factory = Callable[[Layer, Network], Any]
#: layer kind -> candidate implementations, best guess first
TACTICS: dict[str, list[tuple[str, Factory]]] = {}
_LOADED: list[bool] = []


def register(kind: str, name: str, factory: Factory, first: bool = True) -> None:
    """Add a candidate implementation for layers of ``kind``."""
    lst = TACTICS.setdefault(kind, [])
    lst.insert(0, (name, factory)) if first else lst.append((name, factory))


def _load() -> None:
    if _LOADED:
        return
    for kind, factory in layers_numpy.FACTORIES.items():
        register(kind, "numpy", factory, first=False)
    from . import compiled  # noqa: F401  (registers the compiled tactics it can)
    _LOADED.append(True)


def candidates(layer: Layer, net: Network) -> list[tuple[str, Callable]]:
    _load()
    out = []
    for name, factory in TACTICS.get(layer.kind, ()):
        fn = factory(layer, net)
        if fn is not None:
            out.append((name, fn))
    if not out:
        raise EngineBuildError(f"no trt_like implementation of a {layer.kind} layer ({layer.source})")
    return out


def choose_tactics(net: Network, options: dict[str, Any]) -> list[tuple[Layer, Callable | None]]:
    """``(layer, kernel)`` for every layer, in order (``None`` for views)."""
    timing = options.get("timing", True)
    rng = np.random.default_rng(0)
    steps = []
    for layer in net.layers:
        if layer.kind == "reshape":
            steps.append((layer, None))
            continue
        cands = candidates(layer, net)
        if len(cands) > 1 and timing:
            cands = sorted(cands, key=lambda c: _time(c[1], layer, net, rng))
        name, fn = cands[0]
        fn = _named(fn, name)
        steps.append((layer, fn))
    return steps


def _named(fn, name):
    try:
        fn.tactic = name
        return fn
    except AttributeError:  # a builtin or a numba dispatcher: wrap once
        def call(*a):
            return fn(*a)
        call.tactic = name
        return call


def _time(fn, layer: Layer, net: Network, rng, budget: float = 0.01) -> float:
    """Best of a few calls on random data of the layer's shapes (seconds); inf if it fails."""
    args = [net.constants[t] if t in net.constants else rng.standard_normal(net.shape(t)).astype(np.float32)
            for t in layer.inputs]
    args += [np.empty(net.shape(t), np.float32) for t in layer.outputs]
    try:
        fn(*args)  # warm-up (first calls may compile or fill caches)
        best = float("inf")
        spent = 0.0
        for _ in range(10):
            t0 = time.perf_counter()
            fn(*args)
            dt = time.perf_counter() - t0
            best = min(best, dt)
            spent += dt
            if spent > budget:
                break
        return best
    except Exception:  # a tactic that cannot run these shapes is just not chosen
        return float("inf")
