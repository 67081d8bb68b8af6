"""The one timing algorithm of the builder: how candidate tactics are compared on a layer's real
shapes (:func:`best_times`), used for the engine's layers (:func:`.choose.rank`) and for conv
tactics on their own (:func:`time_tactics`, the benchmarks' entry point)."""
from __future__ import annotations

import math
import time
from typing import Callable

import numpy as np

from ..errors import TacticSpecError

# Bytes per second at which a layer's weights stream in during a whole-network run. Timing a layer
# on its own leaves its weights in cache; in a network they are not (resnet_small's laid-out weights
# are ~60 MB), and a tactic with larger weights (Winograd's transformed ones: 16/9 or 4x) pays for
# it: measured back to back on this machine, each layer was slower than alone by its weight bytes
# at 10-27 GB/s (resnet's 512-channel 3x3 layer: F(2x2) 2.3 -> 3.4 ms, im2col 2.3 -> 2.65 ms).
WEIGHT_STREAM_BYTES_PER_S = 16e9

#: timing rounds per layer (after one warm-up call of each candidate)
ROUNDS = 3


def best_times(calls: list[Callable[[], object]], rounds: int = ROUNDS, *, skip_failures: bool = False,
               weight_bytes: list[int] | None = None,
               bandwidth: float | None = WEIGHT_STREAM_BYTES_PER_S) -> list[float]:
    """Seconds per call of each of ``calls``: one warm-up call each (compiled code loads, scratch
    grows), then ``rounds`` rounds in which every call runs once, the order rotating per round so
    no call always follows the same one; a call's time is its best round (the least disturbed on
    a shared machine), plus ``weight_bytes[i]`` streamed in at ``bandwidth`` bytes/s (``None``: hot
    timing only). With ``skip_failures`` a call that raises in its warm-up gets ``inf``
    (a tactic that cannot run these shapes is just not chosen); otherwise it raises."""
    ok = []
    for i, call in enumerate(calls):
        try:
            call()
            ok.append(i)
        except Exception:
            if not skip_failures:
                raise
    best = [math.inf] * len(calls)
    for r in range(max(1, rounds)):
        for k in range(len(ok)):
            i = ok[(k + r) % len(ok)]
            t0 = time.perf_counter()
            calls[i]()
            best[i] = min(best[i], time.perf_counter() - t0)
    if weight_bytes is not None and bandwidth:
        best = [b + w / bandwidth for b, w in zip(best, weight_bytes)]
    return best


def time_tactics(tactics, spec, rounds: int = ROUNDS, seed: int = 0,
                 weight_bandwidth: float | None = WEIGHT_STREAM_BYTES_PER_S) -> list[tuple[str, float]]:
    """``[(name, seconds), ...]`` fastest first: conv tactics (:mod:`srcore_trt_like.conv`) timed on
    random inputs of ``spec`` by :func:`best_times` (``weight_bandwidth``: see there). Costs about
    ``rounds + 1`` calls per tactic."""
    if not tactics:
        raise TacticSpecError("time_tactics: no tactics to time")
    names = [t.name for t in tactics]
    if len(set(names)) != len(names):
        raise TacticSpecError(f"time_tactics: tactic names must be unique, got {names}")
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(spec.x_shape, np.float32)
    out_shape = tactics[0].out_shape
    out = np.empty(out_shape, np.float32)
    residual = rng.standard_normal(out_shape, np.float32) if getattr(spec, "residual", False) else None
    calls = [(lambda t=t: t(x, out, residual)) if residual is not None else (lambda t=t: t(x, out)) for t in tactics]
    best = best_times(calls, rounds, weight_bytes=[getattr(t, "weight_bytes", 0) for t in tactics],
                      bandwidth=weight_bandwidth)
    return sorted(zip(names, best), key=lambda p: p[1])
