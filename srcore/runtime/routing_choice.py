"""The load's timer of ``dense_routing`` (:mod:`srcore.passes.routing_timer`): a routed layer near the
break-even is loaded in both forms on the load's own backends and called alternately on one drawn
routing, and the faster form is kept, as trt_like keeps a tactic: by timing on the machine it runs on.

The inputs: each of the layer's masks gets the positions where one uniform draw over the masks picks it
(a routing tensor ``idx`` gives mask ``e`` at ``idx == e``: each position to one expert, every expert
its share), every other input standard normal floats. Best single calls in process CPU time (a call
on a busy machine only gets slower). The choice is cached like trt_like's tactics, per machine, thread
setting and srcore code, in ``cache_root()/routing/choices-<machine>.json``: each form's least time over
the loads that timed it; a choice is kept (no more timing) when the forms differ by
:data:`CLEAR` or more, or after :data:`EVIDENCE_LOADS` loads; within :data:`TIE` the count decides.
"""
from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import threading
import time
from pathlib import Path

import numpy as np

log = logging.getLogger("srcore.passes.dense_routing")

#: calls of each form at least / at most, and the seconds the trial of one layer may take
MIN_CALLS, MAX_CALLS, BUDGET = 5, 40, 0.3
#: a ratio of the two forms' best calls that one timing decides for good
CLEAR = 1.25
#: loads whose pooled best times decide a close layer for good
EVIDENCE_LOADS = 3
#: a ratio under which the two forms are a tie, decided by the count as without timing: the cut layer's
#: forms timed 1.01-1.03x apart where the whole model's were 1.21x (benchmarks.dense_routing_ab,
#: 128x64x128x4x2 on trt_like: the routed form faster in both)
TIE = 1.05
_lock = threading.Lock()


class LoadTimer:
    """``timer(layer) -> bool`` (True: dense) for the load with ``options`` and ``plugin_manager``."""

    def __init__(self, options, plugin_manager):
        self.options, self.pm = options, plugin_manager

    def __call__(self, layer) -> bool:
        key = f"{layer.key}|{','.join(self.options.backends)}|{sorted(dict(self.options.engine_options).items())!r}"
        key = hashlib.sha256(key.encode()).hexdigest()[:24]
        cache = _Cache.get()
        known = cache.winners.get(key)
        if known is not None:
            log.debug("routed layer %s (%d MACs dense): %s (timing cache)", layer.key, layer.macs, known)
            return known == "dense"
        try:
            times = time_forms(layer, self.options, self.pm)
        except Exception as exc:   # a form the backends cannot load or run: the static bound
            from ..passes.dense_routing import BREAK_EVEN_MACS

            log.debug("routed layer %s: its timing failed (%s: %s)", layer.key, type(exc).__name__, exc)
            return layer.macs <= BREAK_EVEN_MACS
        from ..passes.dense_routing import BREAK_EVEN_MACS

        best, loads = cache.merge(key, times)
        win = "dense" if best["dense"] < best["routed"] else "routed"
        ratio = max(best.values()) / max(min(best.values()), 1e-12)
        if ratio < TIE:   # a tie on the cut layer: the count's answer (in the model, the engines around it differ)
            win = "dense" if layer.macs <= BREAK_EVEN_MACS else "routed"
        if ratio >= CLEAR or loads >= EVIDENCE_LOADS:
            cache.winners[key] = win
        cache.save()
        log.debug("routed layer %s (%d MACs dense): dense %.1f µs, routed %.1f µs: %s", layer.key, layer.macs,
                  best["dense"] * 1e6, best["routed"] * 1e6, win)
        return win == "dense"


def trial_inputs(layer, seed: int = 0) -> list:
    """Inputs of ``layer``'s forms: its masks one uniform routing, every other input normal floats."""
    rng = np.random.default_rng(seed)
    ins = layer.routed.inputs
    shape = ins[layer.masks[0]].type.shape
    pick = rng.integers(len(layer.masks), size=shape)
    xs = []
    for i, v in enumerate(ins):
        if i in layer.masks:
            xs.append((pick == layer.masks.index(i)).astype(v.type.dtype))
        else:
            xs.append(rng.standard_normal(v.type.shape).astype(v.type.dtype))
    return xs


def time_forms(layer, options, plugin_manager) -> dict[str, float]:
    """Each form's best call (seconds of process CPU time), loaded on ``options``' backends."""
    from ..passes.routing_timer import KEEP_ROUTED, TIMER
    from .static_module import StaticModule

    token = TIMER.set(KEEP_ROUTED)   # the routed form's load leaves it routed
    try:
        forms = {"routed": StaticModule(layer.routed, options, plugin_manager=plugin_manager),
                 "dense": StaticModule(layer.dense, options, plugin_manager=plugin_manager)}
    finally:
        TIMER.reset(token)
    xs = trial_inputs(layer)
    times: dict[str, list] = {k: [] for k in forms}
    clock = time.process_time
    with np.errstate(all="ignore"):
        for sm in forms.values():
            sm(*xs)
        start = time.perf_counter()
        while len(times["dense"]) < MAX_CALLS and (len(times["dense"]) < MIN_CALLS
                                                    or time.perf_counter() - start < BUDGET):
            for name, sm in forms.items():
                t0 = clock()
                sm(*xs)
                times[name].append(clock() - t0)
    return {k: min(v) for k, v in times.items()}


class _Cache:
    """One machine's routing choices (``winners``: key -> form) and the times behind them."""

    _caches: dict[Path, "_Cache"] = {}

    def __init__(self, path: Path):
        self.path, self.winners, self.evidence = path, {}, {}
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            self.winners = {str(k): str(v) for k, v in data["winners"].items() if v in ("dense", "routed")}
            self.evidence = {str(k): {"times": {str(n): float(s) for n, s in v["times"].items()},
                                      "loads": int(v["loads"])} for k, v in data["evidence"].items()}
        except (OSError, ValueError, TypeError, KeyError, AttributeError):   # none yet, or corrupt: rewritten
            pass

    @classmethod
    def get(cls) -> "_Cache":
        from ..cachedir import cache_root

        path = cache_root() / "routing" / f"choices-{machine_tag()}.json"
        with _lock:
            if path not in cls._caches:
                cls._caches[path] = cls(path)
            return cls._caches[path]

    def merge(self, key: str, times: dict[str, float]) -> tuple[dict[str, float], int]:
        with _lock:
            old = self.evidence.get(key, {"times": {}, "loads": 0})
            best = {n: min(s, old["times"].get(n, math.inf)) for n, s in times.items()}
            self.evidence[key] = {"times": best, "loads": old["loads"] + 1}
            return best, old["loads"] + 1

    def save(self) -> None:
        with _lock:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
                tmp.write_text(json.dumps({"winners": self.winners, "evidence": self.evidence}, sort_keys=True),
                               encoding="utf-8")
                os.replace(tmp, self.path)
            except OSError:   # a read-only cache directory: no reuse
                pass


_tags: dict[tuple, str] = {}


def machine_tag() -> str:
    """What makes the timings comparable: CPU, numpy, srcore's code and the thread settings (the plugins'
    code by their versions, in the key's backends)."""
    import srcore
    from ..cpu_features import cpu_name
    from ..plugin.record_cache import sources_fingerprint

    threads = tuple(os.environ.get(v, "") for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"))
    if threads not in _tags:
        code = sources_fingerprint([Path(srcore.__file__).parent])
        parts = [cpu_name(), str(os.cpu_count()), np.__version__, code, *threads]
        _tags[threads] = hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]
    return _tags[threads]
